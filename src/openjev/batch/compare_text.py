"""What `openjev eval compare` prints and writes: the comparison as text, the changed rows as CSV, and
both in one HTML page that needs no other file.

The text opens with what differs between the runs (a fact the same in both is one line; of answer
settings only the keys that differ), then one section per question pair: its fields that differ, n,
accuracy, macro-F1, Brier and ECE of A and B with B - A and its 95% interval, the 2x2 table and
McNemar's p; then all questions (accuracy, the table, McNemar) and the first LISTED changed rows.
"""

from __future__ import annotations

import csv
import html
import io
import json
from collections.abc import Mapping
from typing import Any

from openjev.batch.compare import SHOWN

#: At most this many changed rows are printed (the CSV and the page have them all).
LISTED = 20
CHANGED_COLUMNS = (
    "id",
    "line",
    "question",
    "gold",
    "predicted_a",
    "predicted_b",
    "correct_a",
    "correct_b",
    "confidence_a",
    "confidence_b",
)
#: The figures beside accuracy, with what they are called and which way is better.
FIGURE_NAMES = {"macro_f1": "macro-F1", "brier": "Brier (lower is better)", "ece": "ECE (lower is better)"}
#: Question fields by the name a reader knows them by.
FIELD_NAMES = {"criteria": "options", "x_task": "task"}


def fact_lines(name: str, a: Any, b: Any) -> list[str]:
    """One line when both runs agree, else A's and B's (of a mapping, only the keys that differ)."""
    if a == b:
        if a is None:
            return []
        return [f"  {name}: {'the same' if isinstance(a, dict) else json.dumps(a)} in both"]
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(key for key in {*a, *b} if a.get(key) != b.get(key))
        a, b = ({key: side.get(key) for key in keys} for side in (a, b))
    return [f"  {name}: A {_json(a)}, B {_json(b)}"]


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def figure_line(name: str, figure: Mapping[str, Any], a: str = "a", b: str = "b") -> str:
    low, high = figure["ci95"]
    return (
        f"  {name}: A {figure[a]:.3f}  B {figure[b]:.3f}  B - A {figure['difference']:+.3f} "
        f"[95% CI {low:+.3f}, {high:+.3f}]"
    )


def table_lines(entry: Mapping[str, Any]) -> list[str]:
    return [
        f"  both right {entry['both_right']}, only A right {entry['only_a_right']}, "
        f"only B right {entry['only_b_right']}, both wrong {entry['both_wrong']}; "
        f"McNemar exact p = {entry['mcnemar_p']:.4g}"
    ]


def question_lines(entry: Mapping[str, Any]) -> list[str]:
    name = entry["name"] if entry["name_b"] == entry["name"] else f"A {entry['name']} | B {entry['name_b']}"
    lines = ["", f"{name}: n={entry['n']}"]
    for field, (a, b) in entry["differs"].items():
        lines.append(f"  {FIELD_NAMES.get(field, field)} differs: A {_json(a)}, B {_json(b)}")
    lines.append(figure_line("accuracy", entry, "accuracy_a", "accuracy_b"))
    lines += [figure_line(FIGURE_NAMES[name], figure) for name, figure in entry["figures"].items()]
    return lines + table_lines(entry)


def comparison_text(comparison: Mapping[str, Any]) -> str:
    lines = [f"A: {comparison['a']}", f"B: {comparison['b']}", "what differs between the runs:"]
    for name in SHOWN:
        lines += fact_lines(name, comparison["runs"]["a"][name], comparison["runs"]["b"][name])
    lines.append(
        f"paired rows (same {comparison['pairing']}): {comparison['overall']['n']}; answered by A only "
        f"{comparison['only_a']}, by B only {comparison['only_b']}; same id but another row "
        f"{comparison['rows_differ']} (left out)"
    )
    for entry in comparison["questions"]:
        lines += question_lines(entry)
    overall = comparison["overall"]
    lines += ["", f"All questions: n={overall['n']}", figure_line("accuracy", overall, "accuracy_a", "accuracy_b")]
    lines += table_lines(overall)
    lines.append(f"(intervals: paired bootstrap, {comparison['draws']} draws, seed {comparison['seed']})")
    changed = comparison["changed"]
    lines += ["", f"rows whose answer changed: {len(changed)}"]
    lines += [
        f"  {row['id']} (line {row['line']}): gold {row['gold']}, A {row['predicted_a']} "
        f"({'right' if row['correct_a'] else 'wrong'}), B {row['predicted_b']} "
        f"({'right' if row['correct_b'] else 'wrong'})"
        for row in changed[:LISTED]
    ]
    if len(changed) > LISTED:
        lines.append(f"  ... and {len(changed) - LISTED} more")
    return "\n".join(lines) + "\n"


def changed_csv(comparison: Mapping[str, Any]) -> str:
    """The changed rows, one a line, with a header of CHANGED_COLUMNS."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CHANGED_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(comparison["changed"])
    return buffer.getvalue()


def comparison_html(comparison: Mapping[str, Any]) -> str:
    """The printed comparison and a table of every changed row."""
    head = "".join(f"<th>{html.escape(name)}</th>" for name in CHANGED_COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(row[name]))}</td>" for name in CHANGED_COLUMNS) + "</tr>"
        for row in comparison["changed"]
    )
    title = f"openjev eval compare {comparison['a']} {comparison['b']}"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head><body>"
        f"<h1>{html.escape(title)}</h1><pre>{html.escape(comparison_text(comparison))}</pre>"
        f"<h2>rows whose answer changed ({len(comparison['changed'])})</h2>"
        f"<table border='1'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></body></html>"
    )
