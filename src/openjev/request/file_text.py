"""A user's text file as one string: gunzipped where it ends in `.gz`, decoded by its byte-order mark.

- A BOM names the encoding: UTF-8 (Excel's "CSV UTF-8"), UTF-16 LE/BE (Excel's "Unicode Text",
  PowerShell's `Out-File`), UTF-32 LE/BE; the BOM itself is not part of the text.
- Without one the text must be UTF-8. Bytes that are not are an error naming the first line they are
  on; where every other byte of the start is NUL (UTF-16 written without a BOM) the error says so
  instead of suggesting a Latin-1 conversion.
- Standard input (`-`) is spooled to a file first (`spool_stdin`), gunzipped where it starts as gzip
  does, named by its format: its first character `[` is JSON, `{` JSONL (JSON where the first line
  is not one object), anything else CSV.
"""

from __future__ import annotations

import codecs
import gzip
import json
import sys
from pathlib import Path

#: Longest BOM first: UTF-32 LE starts with UTF-16 LE's.
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
#: Bytes of the start looked at for NULs that say "UTF-16 without a BOM".
SNIFFED_BYTES = 200
STDIN = Path("-")
GZIP_MAGIC = b"\x1f\x8b"


class FileTextError(ValueError):
    """The file cannot be read as text; the message names the file and, where known, the line."""


def raw_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped where its name ends in `.gz`."""
    try:
        raw = path.read_bytes()
        if path.name.lower().endswith(".gz"):
            raw = gzip.decompress(raw)
    except (OSError, EOFError) as error:
        raise FileTextError(f"{path}: cannot be read ({error})") from None
    return raw


def decoded(path: Path, raw: bytes) -> str:
    """`raw` as text, in the encoding its BOM names, else UTF-8 (module doc)."""
    for bom, encoding in BOMS:
        if raw.startswith(bom):
            try:
                return raw[len(bom) :].decode(encoding)
            except UnicodeDecodeError as error:
                line = raw[: error.start].decode(encoding, "replace").count("\n") + 1
                raise FileTextError(f"{path}:{line}: not {encoding} though its byte-order mark says so") from None
    start = raw[:SNIFFED_BYTES]
    if start and start.count(0) * 3 >= len(start):
        raise FileTextError(
            f"{path}:1: looks like UTF-16 or UTF-32 without a byte-order mark; save it as UTF-8 "
            "(Excel: CSV UTF-8), or convert it: iconv -f utf-16 -t utf-8"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise FileTextError(
            f"{path}:{line}: not UTF-8 (byte 0x{raw[error.start]:02x}); save the file as UTF-8 "
            "(Excel: CSV UTF-8), or convert it: iconv -f latin1 -t utf-8"
        ) from None


def spool_stdin(folder: Path) -> Path:
    """Standard input written whole to `folder`/stdin.SUFFIX, gunzipped, SUFFIX its format (module doc)."""
    raw = sys.stdin.buffer.read()
    if raw.startswith(GZIP_MAGIC):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as error:
            raise FileTextError(f"-: cannot be read ({error})") from None
    start = decoded(STDIN, raw).lstrip()
    suffix = ".csv"
    if start.startswith("["):
        suffix = ".json"
    elif start.startswith("{"):
        try:
            json.loads(start.split("\n", 1)[0])
            suffix = ".jsonl"
        except ValueError:
            suffix = ".json"
    path = folder / f"stdin{suffix}"
    path.write_bytes(raw)
    return path
