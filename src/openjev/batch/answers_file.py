"""The answers file of a run, what a run started again on it may keep, and what it may never write over.

Contract:
- `ANSWERS` (say `answers.jsonl`) holds only row records, one JSON object a line (`batch/client.py`);
  while a run works they are appended, and when it ends (finished, stopped or interrupted) the file
  is compacted to one record per row: each id's last record, the input's rows in file order first.
  So every line is a row with an `id` (what `pyarrow.json.read_json` and Hugging Face `datasets` read).
- What the run was made from lives beside it, in `ANSWERS` with the suffix `.run.json` (`run_path`):
  `{"openjev_answers": {"file", "path", "file_sha256", "questions"}}`, the input file's name, where it
  was, the sha256 of its bytes, and each question asked (digest -> its type and instructions). A file from before this
  held that object as its first line: it is read as the run's, and moved beside it.
- A file that is not empty and not an answers file (no run beside it, and a line that is no row
  record) is never written, deleted or cut, `restart` or not (NotAnswersFile); neither is a `.run.json`
  that is not one.
- A run on an existing answers file is refused (ResumeRefused, naming both) when its input's bytes
  differ from those the answers were made from (whatever the names), or when it asks none of the
  questions the answers were made for, or when the file has answers and no run named; `restart`
  deletes the file (and its run) first instead. `rebind` makes an edited input the run's own.
- An answer is kept only where the row with its id still asks what it was asked (`input`, the row's
  digest) of the same server (`server`, the digest of the served model and answer settings); any
  other row is asked again, and the count of each kind is reported.
- A torn last line (a run killed while writing) is cut off before anything is appended, and counted
  with any other line that is not JSON as a lost record: its row is asked again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openjev.batch.rows import Row, digest_of

HEADER = "openjev_answers"
#: What every record a client writes has (`batch/client.py`); a line without them is not ours.
RECORD_KEYS = ("id", "input")


class ResumeRefused(RuntimeError):
    """The answers file was made from another file or question; the message names the difference."""


class NotAnswersFile(ResumeRefused):
    """A file that is not an answers file where one would be written: it is left as it is."""


@dataclass
class Opened:
    """An answers file ready to append to: the last record of each id, and the records lost."""

    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    lost: int = 0


def run_path(answers: Path) -> Path:
    """Where the run an answers file was made by is named: `answers.jsonl` -> `answers.run.json`."""
    return answers.with_suffix(".run.json")


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def run_header(source: Path, rows: list[Row]) -> dict[str, Any]:
    questions = {digest_of(row.question): _title(row.question) for row in rows}
    return {
        "file": source.name,
        "path": str(source.resolve()),
        "file_sha256": file_digest(source),
        "questions": questions,
    }


def read_answers(path: Path) -> dict[str, dict[str, Any]]:
    """The last record of each id in an answers file (none: an empty mapping); lines that are not JSON skipped."""
    return _read(path)[1]


def open_answers(path: Path, header: dict[str, Any], *, restart: bool) -> Opened:
    """The file's records, checked against this run's `header` (module doc); the run written beside it."""
    earlier = check_writable(path)
    if restart:
        path.unlink(missing_ok=True)
        run_path(path).unlink(missing_ok=True)
        earlier = None
    path.parent.mkdir(parents=True, exist_ok=True)
    torn = _cut_torn_line(path)
    legacy, records, unreadable = _read(path)
    earlier = earlier or legacy
    if earlier is None and records:
        raise ResumeRefused(f"{path} holds answers without the run that made them; --restart to start over")
    if earlier is not None:
        _check(path, earlier, header)
    _write_run(path, header)
    path.touch()
    return Opened(records, torn + unreadable)


def check_writable(path: Path) -> dict[str, Any] | None:
    """The run an answers file names (None for a new or empty file); NotAnswersFile for a file, or a
    `.run.json`, this command did not write (module doc)."""
    beside = run_path(path)
    run = None
    if beside.exists():
        try:
            run = json.loads(beside.read_text(encoding="utf-8")).get(HEADER)
        except (OSError, ValueError, AttributeError):
            run = None
        if not isinstance(run, dict):
            raise NotAnswersFile(f"{beside} is not the run of an openjev answers file; it is left as it is")
    if run is None and path.is_file() and path.stat().st_size and not _only_records(path):
        raise NotAnswersFile(
            f"{path} is not an openjev answers file (a line is no answer record); it is left as it is: "
            "choose another --out"
        )
    return run


def rebind(path: Path, source: Path) -> None:
    """Make `source` (an edited copy of the input the answers were made from) the run's input, so a
    resume keeps the answers of its unchanged rows; nothing where no run is named yet."""
    earlier = check_writable(path) or _read(path)[0]
    if earlier is not None:
        _write_run(
            path, {**earlier, "file": source.name, "path": str(source.resolve()), "file_sha256": file_digest(source)}
        )


def compact(path: Path, rows: Sequence[Row]) -> None:
    """Rewrite the answers file as one record per id, each id's last, the rows of `rows` first in
    their order; lines that are not records are dropped. Replaced in one step (a crash keeps the old)."""
    if not path.is_file():
        return
    records = read_answers(path)
    order = [row.id for row in rows if row.id in records]
    order += [key for key in records if key not in set(order)]
    _replace(path, "".join(json.dumps(records[key], ensure_ascii=False) + "\n" for key in order))


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
    if earlier.get("file_sha256") != header["file_sha256"]:
        before = f"{earlier.get('path') or earlier.get('file')} (sha256 {str(earlier.get('file_sha256'))[:12]})"
        now = f"{header['path']} (sha256 {header['file_sha256'][:12]})"
        raise ResumeRefused(
            f"{path} holds answers to rows of {before}; this run reads {now}, another content ({again}; "
            "--resume-edited if it is the same file edited: the answers of its unchanged rows stand)"
        )
    before, now = earlier.get("questions") or {}, header["questions"]
    if not set(before) & set(now):
        raise ResumeRefused(
            f"{path} holds answers to {'; '.join(before.values())}; this run asks {'; '.join(now.values())} ({again})"
        )


def _title(question: dict[str, Any]) -> str:
    instructions = str(question.get("instructions") or "(no instructions)")
    return f"{question['type']} question {instructions[:80]!r}"


def _write_run(path: Path, header: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace(run_path(path), json.dumps({HEADER: header}, ensure_ascii=False, indent=2) + "\n")


def _replace(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def _only_records(path: Path) -> bool:
    """Whether every whole line is a row record or the run's line of an answers file (a torn last line aside)."""
    with path.open("rb") as source:
        for raw in source:
            if not raw.endswith(b"\n"):
                break
            try:
                value = json.loads(raw)
            except ValueError:
                return False
            if not isinstance(value, dict) or not (
                isinstance(value.get(HEADER), dict) or all(key in value for key in RECORD_KEYS)
            ):
                return False
    return True


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
