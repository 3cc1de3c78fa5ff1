"""The answers file of a run, and what a run started again on it may keep.

Contract:
- The first line names the run: `{"openjev_answers": {"file", "file_sha256", "questions"}}`, the
  input file's name and digest and each question asked (digest -> its type and instructions). Every
  other line is one finished row's record (`batch/client.py`).
- A run on an existing file is refused (ResumeRefused, naming the difference) when it reads another
  file (by name) or asks none of the questions the file's answers were made for, or when the file
  has answers and no such line; `restart` deletes the file first instead.
- An answer is kept only where the row with its id still asks what it was asked (`input`, the row's
  digest) of the same server (`server`, the digest of the served model and answer settings); any
  other row is asked again, and the count of each kind is reported.
- A torn last line (a run killed while writing) is cut off before anything is appended, and counted
  with any other line that is not JSON as a lost record: its row is asked again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openjev.batch.rows import Row, digest_of

HEADER = "openjev_answers"


class ResumeRefused(RuntimeError):
    """The answers file was made from another file or question; the message names the difference."""


@dataclass
class Opened:
    """An answers file ready to append to: the last record of each id, and the records lost."""

    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    lost: int = 0


def run_header(source: Path, rows: list[Row]) -> dict[str, Any]:
    questions = {digest_of(row.question): _title(row.question) for row in rows}
    return {"file": source.name, "file_sha256": hashlib.sha256(source.read_bytes()).hexdigest(), "questions": questions}


def read_answers(path: Path) -> dict[str, dict[str, Any]]:
    """The last record of each id in an answers file (none: an empty mapping); lines that are not JSON skipped."""
    return _read(path)[1]


def open_answers(path: Path, header: dict[str, Any], *, restart: bool) -> Opened:
    """The file's records, checked against this run's `header` (module doc), the header written when new."""
    if restart:
        path.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    torn = _cut_torn_line(path)
    earlier, records, unreadable = _read(path)
    if earlier is None and records:
        raise ResumeRefused(f"{path} holds answers without the line naming their run; --restart to start over")
    if earlier is not None:
        _check(path, earlier, header)
    else:
        with path.open("a", encoding="utf-8") as sink:
            sink.write(json.dumps({HEADER: header}, ensure_ascii=False) + "\n")
    return Opened(records, torn + unreadable)


def kept_answers(records: dict[str, dict[str, Any]], rows: list[Row], server: str) -> tuple[set[str], int, int]:
    """The ids whose answer stands; the answers dropped because the row changed, and because the server did."""
    kept, changed, other_server = set(), 0, 0
    for row in rows:
        record = records.get(row.id, {})
        if "answer" not in record:
            continue
        if record.get("input") != row.digest:
            changed += 1
        elif record.get("server") != server:
            other_server += 1
        else:
            kept.add(row.id)
    return kept, changed, other_server


def _check(path: Path, earlier: dict[str, Any], header: dict[str, Any]) -> None:
    again = "--restart to start over, or another --out"
    if earlier.get("file") != header["file"]:
        raise ResumeRefused(
            f"{path} holds answers to rows of {earlier.get('file')!r}; this run reads {header['file']!r} ({again})"
        )
    before, now = earlier.get("questions") or {}, header["questions"]
    if not set(before) & set(now):
        raise ResumeRefused(
            f"{path} holds answers to {'; '.join(before.values())}; this run asks {'; '.join(now.values())} ({again})"
        )


def _title(question: dict[str, Any]) -> str:
    instructions = str(question.get("instructions") or "(no instructions)")
    return f"{question['type']} question {instructions[:80]!r}"


def _cut_torn_line(path: Path) -> int:
    """1 when the file ended inside a line (that line removed), else 0."""
    if not path.is_file() or path.stat().st_size == 0:
        return 0
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return 0
    with path.open("r+b") as sink:
        sink.truncate(data.rfind(b"\n") + 1)
    return 1


def _read(path: Path) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]], int]:
    header, records, unreadable = None, {}, 0
    if not path.is_file():
        return header, records, unreadable
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            unreadable += 1
            continue
        if isinstance(record, dict) and isinstance(record.get(HEADER), dict):
            header = header or record[HEADER]
        elif isinstance(record, dict) and "id" in record:
            records[str(record["id"])] = record
    return header, records, unreadable
