"""`openjev tasks fit`: what the command prints of a fitted task (`report_lines`).

The summary says what the task stores, never a bare "adopted": the worked examples per label, and the
calibration's temperature and biases or, where it changes nothing, the identity named; with the
held-out accuracy (nested cross-validation) with what was chosen and without it (the plain readout).

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
    plain_only = is_identity(task["calibration"]) and not task["worked_examples_per_label"]
    adopted = "no"
    if nested["adopted"]:
        adopted = "yes, but what it stores answers as the plain readout does" if plain_only else "yes"
    lines += [
        f"adopted by nested cross-validation ({nested['outer_folds']} outer folds): {adopted}; held-out accuracy "
        f"{nested['chosen']['accuracy']:.1%} with what was chosen, {nested['plain']['accuracy']:.1%} without "
        "(the plain readout)",
        _row("plain", nested["plain"]),
        _row("chosen", nested["chosen"]),
        f"  chosen minus plain {nested['difference']['accuracy']:+.1%} [{low:+.1%}, {high:+.1%}]",
        f"stored: {stored_text(task)}",
        f'use it: "x_task": "{task["id"]}" on the question',
    ]
    return lines


def is_identity(calibration: dict[str, Any]) -> bool:
    """Whether a stored calibration changes nothing: temperature 1 and no biases."""
    return calibration["temperature"] == 1 and not any(calibration["biases"])


def stored_text(task: dict[str, Any]) -> str:
    """What the task answers with: its worked examples and its calibration, or the identity named."""
    worked = task["worked_examples_per_label"]
    shown = f"{worked} worked example(s) per label" if worked else "no worked examples"
    calibration = task["calibration"]
    if is_identity(calibration):
        plain = ": the plain readout answers" if not worked else ""
        return f"{shown}; no calibration (the identity: temperature 1, no biases){plain}"
    biases = ", ".join(
        f"{label} {bias:+.2f}" for label, bias in zip(task["labels"], calibration["biases"], strict=True)
    )
    return f"{shown}; calibration temperature {calibration['temperature']:.3f}, biases {biases}"
