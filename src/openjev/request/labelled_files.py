"""Rows of a user's file: labelled states for `openjev tasks fit`, and the rows `openjev eval` and
`openjev classify` read (`batch/rows.py`), through one reader, `read_records`.

- JSONL (`.jsonl`, `.json`): one JSON object per non-blank line, with `state` (text, object or array,
  as `/v1/systemone` takes it) and the command's own keys (`label` and, optionally, `pair` here).
- CSV (`.csv`): a header row with a `state` column and the command's own columns; every value is
  text (an empty `pair` is none).

Anything else (another suffix, a missing column or key, a line that is not JSON, no rows at all) is a
`LabelledFileError` naming the file and the line, never a silently shorter list.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

SUFFIXES = (".jsonl", ".json", ".csv")


class LabelledFileError(ValueError):
    """The file cannot be read as labelled states; the message names the file and the line."""


def read_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Every row of the file as a JSON object or a CSV row (a `state` column required), with its line
    number; LabelledFileError for another suffix, an unreadable file, a line that is not a JSON object,
    or no rows at all."""
    if path.suffix.lower() not in SUFFIXES:
        raise LabelledFileError(f"{path}: expected a {', '.join(SUFFIXES)} file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise LabelledFileError(f"{path}: cannot be read ({error})") from None
    records = _csv(path, text) if path.suffix.lower() == ".csv" else _jsonl(path, text)
    if not records:
        raise LabelledFileError(f"{path}: no rows in it")
    return records


def read_labelled(path: Path) -> list[dict[str, Any]]:
    """The file's labelled states (`state`, `label`, `pair`), in order (module doc)."""
    return [_labelled(path, line, row) for line, row in read_records(path)]


def _labelled(path: Path, line: int, row: dict[str, Any]) -> dict[str, Any]:
    state, label, pair = row.get("state"), row.get("label"), row.get("pair")
    if state in (None, "") or label in (None, ""):
        raise LabelledFileError(f"{path}:{line}: every row needs a state and a label")
    return {"state": state, "label": label, **({"pair": str(pair)} if pair not in (None, "") else {})}


def _jsonl(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise LabelledFileError(f"{path}:{number}: not JSON ({error.msg})") from None
        if not isinstance(row, dict):
            raise LabelledFileError(f"{path}:{number}: each line must be a JSON object")
        records.append((number, row))
    return records


def _csv(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if "state" not in (reader.fieldnames or ()):
        raise LabelledFileError(f"{path}:1: the header needs a state column")
    # `line_num` counts physical lines, so a quoted value over several lines keeps later rows' numbers right.
    return [(reader.line_num, dict(row)) for row in reader]
