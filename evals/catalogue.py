"""Every suite the entry scripts know (evals/run.py, report.py, compare.py, calibrate.py), registered."""

from __future__ import annotations

from evals import decisions_dev, jev_dev, mmlu, worked_examples


def register_all() -> None:
    mmlu.register()
    jev_dev.register()
    decisions_dev.register()
    worked_examples.register()
