"""Labelled states from a user's file, for `openjev tasks fit` (and any command that reads gold labels).

- JSONL (`.jsonl`, `.json`): one JSON object per non-blank line, with `state` (text, object or array,
  as `/v1/systemone` takes it), `label` and, optionally, `pair`.
- CSV (`.csv`): a header row with `state` and `label` columns, and optionally `pair`; every value is
  text (an empty `pair` is none).

Anything else (another suffix, a missing column or key, a line that is not JSON, no rows at all) is a
`LabelledFileError` naming the file and the line, never a silently shorter list.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

SUFFIXES = (".jsonl", ".json", ".csv")


class LabelledFileError(ValueError):
    """The file cannot be read as labelled states; the message names the file and the line."""


def _record(path: Path, line: int, state: Any, label: Any, pair: Any) -> dict[str, Any]:
    if state is None or label is None:
        raise LabelledFileError(f"{path}:{line}: every row needs a state and a label")
    return {"state": state, "label": label, **({"pair": str(pair)} if pair not in (None, "") else {})}


def _jsonl(path: Path, text: str) -> list[dict[str, Any]]:
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
        records.append(_record(path, number, row.get("state"), row.get("label"), row.get("pair")))
    return records


def _csv(path: Path, text: str) -> list[dict[str, Any]]:
    reader = csv.DictReader(text.splitlines())
    missing = {"state", "label"} - set(reader.fieldnames or ())
    if missing:
        raise LabelledFileError(f"{path}:1: the header needs the column(s) {', '.join(sorted(missing))}")
    return [
        _record(path, number, row.get("state"), row.get("label"), row.get("pair"))
        for number, row in enumerate(reader, start=2)
    ]


def read_labelled(path: Path) -> list[dict[str, Any]]:
    """The file's labelled states, in order (module doc)."""
    if path.suffix.lower() not in SUFFIXES:
        raise LabelledFileError(f"{path}: expected a {', '.join(SUFFIXES)} file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise LabelledFileError(f"{path}: cannot be read ({error})") from None
    records = _csv(path, text) if path.suffix.lower() == ".csv" else _jsonl(path, text)
    if not records:
        raise LabelledFileError(f"{path}: no labelled states in it")
    return records
