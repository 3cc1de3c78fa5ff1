"""Report of a `decisions-dev` run (placeholder, filled below)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_report(directory: Path) -> dict[str, Any]:
    return {"n": 0}

VARIANTS: tuple[str, ...] = ()


def variant_records(run: dict[str, Any], records: Any, variant: str) -> list[dict[str, Any]]:
    raise ValueError(variant)
