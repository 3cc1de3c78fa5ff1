"""The report of any `decisions-dev` run (`evals/report.py DIR`, and after `evals/run.py decisions-dev`):
a position run's (its records carry the `canon` view) is position_report.py's, every other run's report.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evals.decisions_dev.position_report import is_position_run, write_position_report
from evals.decisions_dev.report import write_suite_report
from evals.harness import runs


def write_report(directory: Path) -> dict[str, Any]:
    _, records, _ = runs.read_run(directory)
    if is_position_run(records):
        return write_position_report(directory, records)
    return write_suite_report(directory, records)
