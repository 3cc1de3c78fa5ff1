"""`evals/report.py DIR`: rebuild a run directory's report with its suite's report writer.

Usage: uv run evals/report.py DIR

Contract: reads only DIR/run.json and DIR/results.jsonl (runs.py); the suite named in run.json
(registry.py) writes DIR/report.json and DIR/report.md (and its figures). Every report starts with
`run_identity` (suite, description, URL, protocol, dataset sha256, answering models, what the
harness could not read from the server: `server_unread`, runs.py) and states
accuracies as `metrics.accuracy_of` does: n, accuracy and its 95% Wilson interval (metrics.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.harness import registry
from evals.harness.runs import UNREAD, read_meta

ECE_BINS = 10


def run_identity(meta: dict[str, Any], answered: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What was asked of which server: the head of every report."""
    return {
        "suite": meta["suite"],
        "description": meta.get("description"),
        "url": meta["url"],
        "protocol": meta["protocol"],
        "dataset_sha256": meta["dataset_sha256"],
        "models": sorted({str(record.get("model")) for record in answered}),
        UNREAD: meta.get(UNREAD) or {},
    }


def write_json_and_markdown(directory: Path, report: dict[str, Any], markdown: str) -> None:
    (directory / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    (directory / "report.md").write_text(markdown)


def write_report(directory: Path) -> dict[str, Any]:
    """The report of DIR, written by the suite named in its run.json."""
    suite = read_meta(directory)["suite"]
    return registry.get(suite).write_report(directory)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    if len(arguments) != 1:
        print("usage: uv run evals/report.py DIR", file=sys.stderr)
        return 2
    report = write_report(Path(arguments[0]))
    print(f"{report['suite']}: n={report['n']}, accuracy {report['accuracy']:.1%}, written to {arguments[0]}")
    return 0
