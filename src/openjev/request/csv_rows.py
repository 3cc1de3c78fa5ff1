"""CSV and TSV text as records, read strictly: a row that cannot be read as written is an error with its
line, never a shorter or merged row.

- The delimiter (comma, semicolon or tab) is sniffed from the header by the stdlib `csv.Sniffer`
  (`.tsv` is always tab); every value is text (an empty one is none); blank lines are skipped.
- A row with more or fewer fields than the header is an error (an unquoted comma in a value is the
  usual cause: "I paid, twice" read as two fields).
- A quote never closed is an error on the line it opens (read on, the rest of the file would be one
  value); a quote followed by anything but a delimiter too (`csv` strict mode).
- A value longer than FIELD_LIMIT characters, the largest body a Jev server takes, is an error on its
  line; `csv`'s own limit (131,072) is raised to it, so a long but valid value is read.
- Each record's line is the physical line it ends on (a quoted value over several lines keeps later
  rows' numbers right); an error names the line its row starts on.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

from openjev.config import Settings

FIELD_LIMIT = max(
    Settings.model_fields["max_body_bytes"].default, Settings.model_fields["max_image_body_bytes"].default
)
AddProblem = Callable[[int | None, str], None]


def delimiter_of(header: str, tab: bool) -> str:
    if tab:
        return "\t"
    try:
        return csv.Sniffer().sniff(header, delimiters=",;\t").delimiter
    except csv.Error:
        return ","


def csv_records(text: str, tab: bool, add: AddProblem) -> tuple[list[str], list[tuple[int, dict[str, Any]]]]:
    """The header's names and every row that reads as written (module doc); `add` gets each problem."""
    csv.field_size_limit(FIELD_LIMIT)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter_of(text.split("\n", 1)[0], tab), strict=True)
    header: list[str] | None = None
    records: list[tuple[int, dict[str, Any]]] = []
    while True:
        first = reader.line_num + 1
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            add(first, _csv_error(str(error), reader.line_num))
            continue
        if not fields:
            continue
        if header is None:
            header = fields
            continue
        if len(fields) != len(header):
            spans = f" (lines {first}-{reader.line_num}: a quoted value runs on)" if reader.line_num > first else ""
            add(
                first,
                f"{len(fields)} fields where the header has {len(header)}{spans}; quote a value holding the delimiter",
            )
            continue
        records.append((reader.line_num, dict(zip(header, fields, strict=True))))
    return header or [], records


def _csv_error(message: str, last: int) -> str:
    if "unexpected end of data" in message:
        return f'a quote (") opened on this line is never closed (it runs to the end of the file, line {last})'
    if "field larger than field limit" in message:
        return f"a value longer than {FIELD_LIMIT:,} characters, the largest request a server takes"
    return f"not CSV ({message})"
