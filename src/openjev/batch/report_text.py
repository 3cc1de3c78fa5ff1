"""`report.md`, the report `openjev eval` prints: the run's metadata, then per question its figures,
the per-label table in scikit-learn's `classification_report` layout and the confusion matrix with
its labels named."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

DIGITS = 3
AVERAGES = ("macro avg", "weighted avg")


def report_text(summary: Mapping[str, Any], title: str) -> str:
    lines = [f"# {title}", "", *run_lines(summary.get("run") or {}), ""]
    overall = summary["all"]
    low, high = overall["accuracy_ci95"]
    lines.append(f"All questions: n={overall['n']}, accuracy {overall['accuracy']:.3f} [{low:.3f}, {high:.3f}]")
    for figures in summary["questions"]:
        lines += ["", f"## {figures['name']}", "", *headline(figures), ""]
        lines += ["```text", *classification_lines(figures), "", *confusion_lines(figures), "```"]
    errors = summary["errors"]
    lines += [
        "",
        f"Rows without an answer: {errors['n']}" + (f" ({', '.join(errors['ids'])})." if errors["n"] else "."),
    ]
    return "\n".join(lines) + "\n"


def run_lines(run: Mapping[str, Any]) -> list[str]:
    """The run's metadata, one `- name: value` line each; absent entries are left out."""
    rows = run.get("rows") or {}
    settings = run.get("answer_settings")
    entries = [
        ("server", run.get("server_url")),
        ("served model", run.get("served_model")),
        ("openjev version", run.get("openjev_version")),
        ("answer settings", json.dumps(settings, sort_keys=True) if settings is not None else None),
        ("file", f"{run['file']} (sha256 {run['file_sha256']})" if run.get("file") else None),
        ("question", json.dumps(run["question"], ensure_ascii=False) if run.get("question") else None),
        ("task", ", ".join(run["tasks"]) if run.get("tasks") else None),
        ("time", f"{run['started']} to {run['ended']}" if run.get("started") else None),
        ("rows", ", ".join(f"{value} {name}" for name, value in rows.items()) if rows else None),
        ("retries", run.get("retries")),
        ("not read from the server", json.dumps(run["unread"]) if run.get("unread") else None),
    ]
    return [f"- {name}: {value}" for name, value in entries if value is not None]


def headline(figures: Mapping[str, Any]) -> list[str]:
    low, high = figures["accuracy_ci95"]
    lines = [
        f"n={figures['n']}, accuracy {figures['accuracy']:.3f} [95% CI {low:.3f}, {high:.3f}], "
        f"Brier {figures['brier']:.3f}, ECE {figures['ece']:.3f}"
    ]
    if pairs := figures.get("pairs"):
        low, high = pairs["ci95"]
        lines.append(f"pair accuracy {pairs['pair_accuracy']:.3f} [{low:.3f}, {high:.3f}] over {pairs['pairs']} pairs")
    if mae := figures.get("level_mae"):
        low, high = mae["ci95"]
        lines.append(f"score MAE {mae['mean']:.3f} levels [{low:.3f}, {high:.3f}]")
    if position := figures.get("position_error"):
        lines.append(f"worst option-position gap {position['worst']:.3f}")
    return lines


def classification_lines(figures: Mapping[str, Any]) -> list[str]:
    """Per-label precision, recall, F1 and support, then accuracy and the two averages, laid out as
    scikit-learn's `classification_report` lays them out."""
    names = [figures["label_names"][label] for label in figures["labels"]]
    width = max(len(name) for name in [*names, *AVERAGES])
    head = f"{'':>{width}} " + "".join(f" {word:>9}" for word in ("precision", "recall", "f1-score", "support"))
    lines = [head, ""]
    for name, row in zip(names, figures["labels"].values(), strict=True):
        lines.append(_row(name, row, width))
    lines.append("")
    lines.append(f"{'accuracy':>{width}} {'':>9} {'':>9} {figures['accuracy']:>9.{DIGITS}f} {figures['n']:>9}")
    lines += [_row(average, figures[average.split()[0]], width) for average in AVERAGES]
    return lines


def _row(name: str, row: Mapping[str, Any], width: int) -> str:
    values = "".join(f" {row[key]:>9.{DIGITS}f}" for key in ("precision", "recall", "f1"))
    return f"{name:>{width}} {values} {row['support']:>9}"


def confusion_lines(figures: Mapping[str, Any]) -> list[str]:
    """The confusion matrix: one line per gold label, one column per predicted label, both named."""
    confusion = figures["confusion"]
    names = [figures["label_names"][label] for label in confusion["labels"]]
    # Score levels head their columns by index alone, so a wide rubric still fits a terminal.
    columns = confusion["labels"] if figures["type"] == "score" else names
    return ["confusion (rows: gold, columns: predicted)", *table(names, columns, confusion["matrix"])]


def table(rows: Sequence[str], columns: Sequence[str], cells: Sequence[Sequence[Any]]) -> list[str]:
    first = max(len(name) for name in [*rows, "gold"])
    widths = [max(len(name), *(len(str(line[i])) for line in cells)) for i, name in enumerate(columns)]
    head = f"{'gold':<{first}}" + "".join(f"  {name:>{w}}" for name, w in zip(columns, widths, strict=True))
    body = [
        f"{name:<{first}}" + "".join(f"  {value!s:>{w}}" for value, w in zip(line, widths, strict=True))
        for name, line in zip(rows, cells, strict=True)
    ]
    return [head, *body]
