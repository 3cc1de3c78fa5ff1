"""Rows of a user's file: labelled states for `openjev tasks fit`, and the rows `openjev eval` and
`openjev classify` read (`batch/rows.py`), through one reader, `read_records`.

- Text is UTF-8, with or without a byte-order mark (Excel's "CSV UTF-8" writes one); a file ending in
  `.gz` is gunzipped first (`rows.csv.gz`). Another encoding (Latin-1, UTF-16) is an error naming the
  first line that is not UTF-8.
- JSONL (`.jsonl`): one JSON object per non-blank line. JSON (`.json`): an array of objects, or objects
  one after another, pretty-printed or not. Each holds `state` (text, object or array, as
  `/v1/systemone` takes it) and the command's own keys (`label` and, optionally, `pair` here).
- CSV (`.csv`, `.tsv`): a header row and one row a line; the delimiter (comma, semicolon or tab) is
  sniffed from the header by the stdlib `csv.Sniffer` (`.tsv` is always tab); every value is text
  (an empty one is none).
- Parquet (`.parquet`): read by pyarrow (the `reports` extra), one row a record; its "line" is the
  1-based row number.
- `columns` maps the reader's names to the file's own (`{"state": "text"}`), for files whose columns
  are named otherwise.

A problem (another suffix, a missing column or key, a line that is not JSON, no rows at all) is a
`LabelledFileError` naming the file and the line; every problem of the file is listed in the one
error, up to MAX_LISTED, never a silently shorter list.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SUFFIXES = (".jsonl", ".json", ".csv", ".tsv", ".parquet")
MAX_LISTED = 20
REPORTS_EXTRA = "uv sync --inexact --extra reports, or pip install 'openjev-server[reports]'"


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
    """Every row of the file as a JSON object, a CSV row or a Parquet row, with its line number (module
    doc). With `problems`, what is wrong is added there and the rows that could be read are returned."""
    own = problems is None
    problems = problems or Problems(path)
    kind = file_format(path)
    if kind not in SUFFIXES:
        raise LabelledFileError(f"{path}: expected a {', '.join(SUFFIXES)} file (or one of them .gz)")
    if kind == ".parquet":
        records = _parquet(path)
    elif kind in (".csv", ".tsv"):
        records = _csv(_text(path), kind == ".tsv", columns, problems)
    else:
        records = (_jsonl if kind == ".jsonl" else _json)(_text(path), problems)
    if not records and not problems.found:
        raise LabelledFileError(f"{path}: no rows in it")
    if own:
        problems.raise_any()
    return [(line, _renamed(record, columns or {})) for line, record in records]


def read_labelled(path: Path, columns: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The file's labelled states (`state`, `label`, `pair`), in order (module doc)."""
    problems = Problems(path)
    rows = [_labelled(line, row, problems) for line, row in read_records(path, columns, problems)]
    problems.raise_any()
    return rows


def _labelled(line: int, row: dict[str, Any], problems: Problems) -> dict[str, Any]:
    state, label, pair = row.get("state"), row.get("label"), row.get("pair")
    if state in (None, "") or label in (None, ""):
        problems.add(line, "every row needs a state and a label")
    return {"state": state, "label": label, **({"pair": str(pair)} if pair not in (None, "") else {})}


def _renamed(record: dict[str, Any], columns: Mapping[str, str]) -> dict[str, Any]:
    named = {key: value for key, value in record.items() if key not in columns}
    named.update({own: record[theirs] for own, theirs in columns.items() if theirs in record})
    return named


def _text(path: Path) -> str:
    try:
        raw = path.read_bytes()
        if path.name.lower().endswith(".gz"):
            raw = gzip.decompress(raw)
    except (OSError, EOFError) as error:
        raise LabelledFileError(f"{path}: cannot be read ({error})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise LabelledFileError(
            f"{path}:{line}: not UTF-8 (byte 0x{raw[error.start]:02x}); save the file as UTF-8 "
            "(Excel: CSV UTF-8), or convert it: iconv -f latin1 -t utf-8"
        ) from None


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
    """An array of objects, or objects one after another; each with the line it starts on."""
    decoder, values, at = json.JSONDecoder(), [], _skip(text, 0)
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


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _csv(text: str, tab: bool, columns: Mapping[str, str] | None, problems: Problems) -> list[tuple[int, Any]]:
    header = text.split("\n", 1)[0]
    delimiter = "\t"
    if not tab:
        try:
            delimiter = csv.Sniffer().sniff(header, delimiters=",;\t").delimiter
        except csv.Error:
            delimiter = ","
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    state = (columns or {}).get("state", "state")
    if state not in (reader.fieldnames or ()):
        found = ", ".join(repr(name) for name in reader.fieldnames or ())
        hint = "; name the file's own with --state-column" if columns is not None else ""
        problems.add(1, f"the header has no {state!r} column (it has {found or 'none'}){hint}")
        return []
    # `line_num` counts physical lines, so a quoted value over several lines keeps later rows' numbers right.
    return [(reader.line_num, {key: value for key, value in row.items() if key is not None}) for row in reader]


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
    return list(enumerate(table.to_pylist(), start=1))
