"""Rows of a user's file: labelled states for `openjev tasks fit`, and the rows `openjev eval` and
`openjev classify` read (`batch/rows.py`), through one reader, `read_records`.

- Text is decoded by its byte-order mark, else UTF-8; `.gz` is gunzipped first (`file_text.py`).
- JSONL (`.jsonl`): one JSON object per non-blank line. JSON (`.json`): an array of objects, objects
  one after another (pretty-printed or not), or one object whose `data` holds the array (the layout
  Hugging Face `datasets` reads with `field="data"`). Each holds `state` (text, object or array, as
  `/v1/systemone` takes it) and the command's own keys (`label` and, optionally, `pair` here).
- CSV (`.csv`, `.tsv`): a header row and one row a line, read strictly (`csv_rows.py`): a row with
  another number of fields, a quote never closed and a value over the request limit are errors.
- Parquet (`.parquet`): read by pyarrow (the `reports` extra), one row a record; its "line" is the
  1-based row number. A `ClassLabel` column (integers whose names the file's `huggingface` schema
  metadata lists, as `datasets` writes it) is read as the names.
- `columns` maps the reader's names to the file's own (`{"state": "text"}`), for files whose columns
  are named otherwise; a dotted name (`input.text`) reaches into a nested object or struct. Names
  match the file's up to case (`State`, `Label`) where no name matches exactly.

A problem (another suffix, a missing column or key, a line that is not JSON, no rows at all) is a
`LabelledFileError` naming the file and the line; every problem of the file is listed in the one
error, up to MAX_LISTED, never a silently shorter list.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openjev.request.csv_rows import csv_records
from openjev.request.file_text import FileTextError, decoded, raw_bytes

SUFFIXES = (".jsonl", ".json", ".csv", ".tsv", ".parquet")
MAX_LISTED = 20
REPORTS_EXTRA = "uv sync --inexact --extra reports, or pip install 'openjev-server[reports]'"
#: The names a row's keys are matched to up to case, besides the `columns` given.
KNOWN_KEYS = ("state", "question", "gold", "label", "pair", "id")
DATA_ARRAY = re.compile(r'"data"\s*:\s*\[')


class LabelledFileError(ValueError):
    """The file cannot be read as labelled states; the message names the file and each line."""


class Problems:
    """The problems of one file, each with its line, raised together as one LabelledFileError."""

    def __init__(self, path: Path) -> None:
        self.path, self.found = path, []

    def add(self, line: int | None, message: str) -> None:
        self.found.append(f"{self.path}:{line}: {message}" if line is not None else f"{self.path}: {message}")

    def raise_any(self) -> None:
        if len(self.found) == 1:
            raise LabelledFileError(self.found[0])
        if self.found:
            shown = self.found[:MAX_LISTED]
            more = f"\n... and {len(self.found) - len(shown)} more" if len(self.found) > len(shown) else ""
            raise LabelledFileError(f"{self.path}: {len(self.found)} problems\n" + "\n".join(shown) + more)


def file_format(path: Path) -> str:
    """The suffix that names the file's format (`.csv` for `rows.csv.gz`)."""
    name = path.name.lower().removesuffix(".gz")
    return next((suffix for suffix in SUFFIXES if name.endswith(suffix)), Path(name).suffix)


def read_records(
    path: Path, columns: Mapping[str, str] | None = None, problems: Problems | None = None
) -> list[tuple[int, dict[str, Any]]]:
    """Every row of the file as a JSON object, a CSV row or a Parquet row, with its line number, its
    keys the reader's names (module doc). With `problems`, what is wrong is added there and the rows
    that could be read are returned."""
    return [(line, renamed(record, columns or {})) for line, record in read_file_records(path, columns, problems)]


def read_file_records(
    path: Path, columns: Mapping[str, str] | None = None, problems: Problems | None = None
) -> list[tuple[int, dict[str, Any]]]:
    """`read_records` before renaming: each row under the file's own column names (what a labelled
    copy of the file keeps), a `ClassLabel` column already read as its names."""
    own = problems is None
    problems = problems or Problems(path)
    kind = file_format(path)
    if kind not in SUFFIXES:
        raise LabelledFileError(f"{path}: expected a {', '.join(SUFFIXES)} file (or one of them .gz)")
    if kind == ".parquet":
        records = _parquet(path)
    else:
        try:
            text = decoded(path, raw_bytes(path))
        except FileTextError as error:
            raise LabelledFileError(str(error)) from None
        records = _text_records(text, kind, columns, problems)
    if not records and not problems.found:
        raise LabelledFileError(f"{path}: no rows in it")
    if own:
        problems.raise_any()
    return records


def _text_records(
    text: str, kind: str, columns: Mapping[str, str] | None, problems: Problems
) -> list[tuple[int, dict[str, Any]]]:
    if kind in (".csv", ".tsv"):
        return _csv(text, kind == ".tsv", columns, problems)
    return (_jsonl if kind == ".jsonl" else _json)(text, problems)


def read_labelled(path: Path, columns: Mapping[str, str] | None = None) -> list[tuple[int, dict[str, Any]]]:
    """The file's labelled states (`state`, `label` (else `gold`), `pair`), in order, each with its line
    (module doc)."""
    problems = Problems(path)
    rows = [(line, _labelled(line, row, problems)) for line, row in read_records(path, columns, problems)]
    problems.raise_any()
    return rows


def _labelled(line: int, row: dict[str, Any], problems: Problems) -> dict[str, Any]:
    state, pair = row.get("state"), row.get("pair")
    label = row.get("label") if row.get("label") not in (None, "") else row.get("gold")
    if state in (None, "") or label in (None, ""):
        problems.add(line, "every row needs a state and a label")
    return {"state": state, "label": label, **({"pair": str(pair)} if pair not in (None, "") else {})}


def renamed(record: dict[str, Any], columns: Mapping[str, str]) -> dict[str, Any]:
    """`record` with the reader's names (`state`, `gold`, ...) for the file's own (`columns`, case, dots)."""
    named = {key: value for key, value in record.items() if key not in columns}
    for own in (*KNOWN_KEYS, *columns):
        found = _lookup(record, columns.get(own, own))
        if found is not _ABSENT:
            named[own] = found
    return named


_ABSENT = object()


def _lookup(record: Any, name: str) -> Any:
    """`record[name]`, else the one key equal to it up to case, else (a dotted name) the path through
    nested objects; _ABSENT where there is none."""
    if not isinstance(record, dict):
        return _ABSENT
    if name in record:
        return record[name]
    folded = [key for key in record if isinstance(key, str) and key.casefold() == name.casefold()]
    if len(folded) == 1:
        return record[folded[0]]
    head, dot, rest = name.partition(".")
    return _lookup(_lookup(record, head), rest) if dot else _ABSENT


def _jsonl(text: str, problems: Problems) -> list[tuple[int, dict[str, Any]]]:
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            problems.add(number, f"not JSON ({error.msg})")
            continue
        if not isinstance(row, dict):
            problems.add(number, "each line must be a JSON object")
            continue
        records.append((number, row))
    return records


def _json(text: str, problems: Problems) -> list[tuple[int, Any]]:
    """An array of objects, objects one after another, or `{"data": [...]}`; each with its first line."""
    decoder, values, at = json.JSONDecoder(), [], _skip(text, 0)
    at = _data_array(text, at) if text.startswith("{", at) else at
    in_array = text.startswith("[", at)
    at = _skip(text, at + 1) if in_array else at
    while at < len(text) and not (in_array and text[at] == "]"):
        line = text.count("\n", 0, at) + 1
        try:
            value, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as error:
            problems.add(error.lineno, f"not JSON ({error.msg})")
            return values
        if isinstance(value, dict):
            values.append((line, value))
        else:
            problems.add(line, "each row must be a JSON object")
        at = _skip(text, at)
        if in_array and text.startswith(",", at):
            at = _skip(text, at + 1)
    return values


def _data_array(text: str, at: int) -> int:
    """Where the `data` array starts when the text is one object holding the rows there (no `state`
    of its own); else `at`."""
    try:
        value, end = json.JSONDecoder().raw_decode(text, at)
    except json.JSONDecodeError:
        return at
    if _skip(text, end) < len(text) or "state" in value or not isinstance(value.get("data"), list):
        return at
    found = DATA_ARRAY.search(text, at)
    return found.end() - 1 if found else at


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _csv(text: str, tab: bool, columns: Mapping[str, str] | None, problems: Problems) -> list[tuple[int, Any]]:
    header, records = csv_records(text, tab, problems.add)
    state = (columns or {}).get("state", "state")
    if header and _lookup(dict.fromkeys(header), state) is _ABSENT:
        found = ", ".join(repr(name) for name in header)
        hint = "; name the file's own with --state-column" if columns is not None else ""
        problems.add(1, f"the header has no {state!r} column (it has {found}){hint}")
        return []
    return records


def _parquet(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        import pyarrow.parquet as parquet
    except ImportError:
        raise LabelledFileError(
            f"{path}: reading Parquet needs pyarrow, in openjev's reports extra ({REPORTS_EXTRA})"
        ) from None
    try:
        table = parquet.read_table(path)
    except (OSError, ValueError) as error:
        raise LabelledFileError(f"{path}: not a Parquet file ({error})") from None
    names = _class_labels(table.schema.metadata or {})
    rows = table.to_pylist()
    for row in rows:
        for column, labels in names.items():
            value = row.get(column)
            if isinstance(value, int) and 0 <= value < len(labels):
                row[column] = labels[value]
    return list(enumerate(rows, start=1))


def _class_labels(metadata: Mapping[bytes, bytes]) -> dict[str, list[str]]:
    """The names of each `ClassLabel` column, as the `huggingface` schema metadata lists them."""
    try:
        info = json.loads(metadata.get(b"huggingface", b"{}"))
    except ValueError:
        return {}
    features = (info.get("info") or {}).get("features") or info.get("features") or {}
    return {
        column: [str(name) for name in feature["names"]]
        for column, feature in features.items()
        if isinstance(feature, dict) and feature.get("_type") == "ClassLabel" and isinstance(feature.get("names"), list)
    }
