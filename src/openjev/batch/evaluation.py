"""`openjev eval`'s judging and reporting: answered rows against their gold, into the report files.

`evaluate` judges every answered row, writes `report.json` (the figures per question, `summary.py`,
and the run's metadata under `run`), `report.md` (also printed) and, with matplotlib, the plots
(`plots.py`), and marks each answer record in `answers.jsonl` with the row's `gold`, the `predicted`
label, whether it is `correct`, its `question_key`, `item_sha256` (what `openjev eval compare` pairs
rows by: `judging.item_digests`) and `row_sha256` (what it pairs by with --strict); a record of a row
this run did not judge (one no longer in the file) loses those marks, so a comparison pairs only the
rows of this run. Rows that got no answer are counted as errors and left out of the figures, never
scored as wrong.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from openjev.batch.answers_file import file_digest
from openjev.batch.judging import Judged, item_digests, judge, question_key, row_digest
from openjev.batch.plots import write_plots
from openjev.batch.report_text import report_text
from openjev.batch.rows import Row
from openjev.batch.summary import summarize

#: At most this many ids of unanswered rows are listed in the report.
LISTED_ERRORS = 50
#: What `mark_answers` adds to the record of a judged row.
MARKS = ("gold", "predicted", "correct", "question_key", "item_sha256", "row_sha256")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_metadata(file: Path, question: Mapping[str, Any] | None, rows: list[Row], started: str) -> dict[str, Any]:
    """What the run asked: the file (name and sha256), the `--question` if given, the tasks its questions
    name (`x_task`), when it started; `retries` stays None until the client has counted them."""
    tasks = sorted({str(row.question["x_task"]) for row in rows if row.question.get("x_task")})
    return {
        "file": file.name,
        "file_sha256": file_digest(file),
        "question": dict(question) if question is not None else None,
        "tasks": tasks,
        "started": started,
        "retries": None,
    }


def evaluate(
    rows: list[Row], records: dict[str, Any], out_dir: Path, title: str, run: dict[str, Any]
) -> dict[str, Any]:
    """Judge the answered rows and write the report files into `out_dir`; the summary, whose `plots`
    lists the images written or says why there are none."""
    judged: list[Judged] = [
        judge(row, records[row.id]["answer"]) for row in rows if "answer" in records.get(row.id, {})
    ]
    errors = [row.id for row in rows if "answer" not in records.get(row.id, {})]
    if not judged:
        raise ValueError(f"no row was answered ({len(errors)} errors; see {out_dir / 'answers.jsonl'})")
    questions = {question_key(row.question): row.question for row in rows}
    summary = summarize(judged, questions)
    summary["errors"] = {"n": len(errors), "ids": errors[:LISTED_ERRORS]}
    rows_counts = {"rows": len(rows), "answered": len(judged), "errors": len(errors)}
    summary["run"] = {**run, "ended": now(), "rows": rows_counts}
    text = report_text(summary, title)
    try:
        summary["plots"] = [path.name for path in write_plots(summary, out_dir, title, text)]
    except ImportError as missing:
        summary["plots"] = str(missing)
    (out_dir / "report.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    (out_dir / "report.md").write_text(text, encoding="utf-8")
    mark_answers(out_dir / "answers.jsonl", {item.id: item for item in judged}, {row.id: row for row in rows})
    return summary


def mark_answers(path: Path, judged: Mapping[str, Judged], rows: Mapping[str, Row]) -> None:
    """Add MARKS to every answer record of a judged row and take them from every other record; lines
    that are not records are kept as they are. Replaced in one step, so a crash leaves the old file."""
    items = item_digests(list(rows.values()))
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict) and "id" in record:
            item = judged.get(str(record["id"])) if "answer" in record else None
            record = {key: value for key, value in record.items() if key not in MARKS}
            if item is not None:
                row = rows[item.id]
                record |= {"gold": item.gold, "predicted": item.predicted, "correct": item.correct}
                record |= {"question_key": item.question, "item_sha256": items[item.id], "row_sha256": row_digest(row)}
            line = json.dumps(record, ensure_ascii=False)
        lines.append(line + "\n")
    partial = path.with_name(path.name + ".partial")
    partial.write_text("".join(lines), encoding="utf-8")
    os.replace(partial, path)
