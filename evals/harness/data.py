"""Vendored data of every suite: files under `evals/data/`, refused unless their sha256 is the expected one.

Contract: data comes only from `evals/data/` (never a download); a file's sha256 (of its uncompressed
bytes) is checked before anything is built from it, and a mismatch or a missing file raises DataError.
A `Suite` is what the run directory records of a suite: its name, description, dataset sha256 and its
items in their fixed order (`--limit N` means the first N).
"""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data"


class DataError(RuntimeError):
    """A vendored data file is missing or differs from the one the suites were built on."""


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    dataset_sha256: str
    items: tuple[Any, ...]


def read_verified(path: Path, sha256: str) -> bytes:
    """The file's bytes (gunzipped when it ends in .gz), refused unless their sha256 is `sha256`."""
    if not path.is_file():
        raise DataError(f"{path} is missing")
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise DataError(f"{path}: sha256 {digest}, expected {sha256}")
    return data
