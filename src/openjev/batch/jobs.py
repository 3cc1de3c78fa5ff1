"""`openjev eval` and `openjev classify` as functions: rows in, answers and figures out.

Both ask the rows of one file of any Jev server (`url`) or, without one, of the embedded default
started for the run. `classify` writes each row's answer to a JSONL file as it arrives and resumes a
run that stopped (keeping only answers made for the same row, question and server: `answers_file.py`).
`eval` does the same into `OUT/answers.jsonl`, then judges every answered row against its gold and
writes `report.json`, `report.md`, `reliability.png` and `reliability.html`.
Rows that got no answer (a 4xx, or overload past the retry deadline) are counted as errors and left
out of the figures, never scored as wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openjev.batch.answers_file import Opened
from openjev.batch.client import answer_rows
from openjev.batch.judging import Judged, judge
from openjev.batch.local_server import embedded_server
from openjev.batch.progress import Progress
from openjev.batch.reliability import write_reliability
from openjev.batch.rows import Row
from openjev.batch.summary import summarize


@dataclass(frozen=True)
class Target:
    """The server asked: a URL, or None for the embedded default started for the run."""

    url: str | None
    api_key: str | None = None
    model: str = "jev-latest"
    concurrency: int = 4


@contextlib.contextmanager
def served(target: Target) -> Iterator[str]:
    if target.url is not None:
        yield target.url
    else:
        with embedded_server() as url:
            yield url


def answer_file(
    rows: list[Row], target: Target, answers_path: Path, opened: Opened, progress: Progress
) -> dict[str, Any]:
    """Every row asked whose answer in `opened` does not stand (`batch/answers_file.py`); the records by row id."""
    with served(target) as url:
        return asyncio.run(
            answer_rows(
                rows,
                url=url,
                opened=opened,
                answers_path=answers_path,
                api_key=target.api_key,
                model=target.model,
                concurrency=target.concurrency,
                progress=progress,
            )
        )


def evaluate(rows: list[Row], records: dict[str, Any], out_dir: Path, title: str) -> dict[str, Any]:
    """Judge the answered rows, write the report files into `out_dir`; the summary with the error count."""
    judged: list[Judged] = [
        judge(row, records[row.id]["answer"]) for row in rows if "answer" in records.get(row.id, {})
    ]
    errors = [row.id for row in rows if "answer" not in records.get(row.id, {})]
    if not judged:
        raise ValueError(f"no row was answered ({len(errors)} errors; see {out_dir / 'answers.jsonl'})")
    positions = {row.id: list(row.question.get("criteria") or []) for row in rows if row.question["type"] == "choice"}
    summary = summarize(judged, positions)
    summary["errors"] = {"n": len(errors), "ids": errors[:50]}
    (out_dir / "report.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    (out_dir / "report.md").write_text(report_text(summary, title), encoding="utf-8")
    write_reliability(summary, out_dir, title)
    return summary


def report_text(summary: dict[str, Any], title: str) -> str:
    """The figures as a short Markdown table, one line per question type."""
    lines = [
        f"# {title}",
        "",
        "| type | n | accuracy [95% CI] | pairs | Brier | ECE | extra |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, figures in summary["types"].items():
        low, high = figures["accuracy_ci95"]
        pairs = figures["pairs"]
        pair_text = f"{pairs['pair_accuracy']:.3f} (n={pairs['pairs']})" if pairs else "-"
        extra = ""
        if "position_error" in figures:
            extra = f"worst position gap {figures['position_error']['worst']:.3f}"
        if "level_mae" in figures:
            extra = f"MAE {figures['level_mae']['mean']:.3f} levels"
        lines.append(
            f"| {kind} | {figures['n']} | {figures['accuracy']:.3f} [{low:.3f}, {high:.3f}] | {pair_text} "
            f"| {figures['brier']:.3f} | {figures['ece']:.3f} | {extra} |"
        )
    lines += ["", f"Rows without an answer: {summary['errors']['n']}."]
    return "\n".join(lines) + "\n"
