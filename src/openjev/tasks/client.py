"""`openjev tasks fit`: what the command prints of a fitted task (`report_lines`).

The command (`batch/task_fit.py`) posts the task body as a job to `{url}/v1/tasks`, or, without a
URL, to the embedded default started for the run (`batch/local_server.py`, as `openjev eval` does),
and follows its progress.
"""

from __future__ import annotations

from typing import Any


def _row(name: str, quality: dict[str, Any]) -> str:
    low, high = quality["accuracy_ci95"]
    pairs = quality["pairs"]
    paired = f"  pairs {pairs['pair_accuracy']:.1%} of {pairs['pairs']}" if pairs else ""
    return (
        f"  {name:<7} accuracy {quality['accuracy']:.1%} [{low:.1%}, {high:.1%}]{paired}"
        f"  Brier {quality['brier']:.3f}  ECE {quality['ece']:.3f}"
    )


def report_lines(task: dict[str, Any]) -> list[str]:
    """The task's id and its held-out report, one line per figure."""
    report = task["report"]
    lines = [
        f"task {task['id']} ({task['question']['type']}, model {task['model']})",
        f"{report['examples']} examples {report['label_counts']}, {report['folds']}-fold cross-validation",
    ]
    for count, row in report["by_worked_examples"].items():
        lines += [f"{count} worked example(s) per label, cross-validated once:"]
        lines += [_row("plain", row["before"]), _row("calib.", row["after"])]
    nested = report["nested"]
    low, high = nested["difference"]["ci95"]
    lines += [
        f"adopted by nested cross-validation ({nested['outer_folds']} outer folds): "
        f"{'yes' if nested['adopted'] else 'no, the plain readout answers'}",
        _row("plain", nested["plain"]),
        _row("chosen", nested["chosen"]),
        f"  chosen minus plain {nested['difference']['accuracy']:+.1%} [{low:+.1%}, {high:+.1%}]",
    ]
    calibration = task["calibration"]
    biases = ", ".join(
        f"{label} {bias:+.2f}" for label, bias in zip(task["labels"], calibration["biases"], strict=True)
    )
    lines += [
        f"chosen: {task['worked_examples_per_label']} worked example(s) per label; "
        f"temperature {calibration['temperature']:.3f}; biases {biases}",
        f'use it: "x_task": "{task["id"]}" on the question',
    ]
    return lines
