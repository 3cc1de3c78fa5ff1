"""What every suite's offline variants share: a variant record, and a run read as `DIR` or `DIR@VARIANT`.

Contract: a suite's variant (registry.SuiteSpec.variant_records) answers each record as a server with
some setting would have, from readouts the run recorded, with openjev's own maths. A variant record is
the record with `choice` and `probabilities` replaced (`answered_as`), so every figure of a report and
every paired comparison applies to it unchanged. `read_scored("DIR@VARIANT")` is run.json and the
answered records of DIR as VARIANT answers them (plain `DIR`: as served), of one question type if given.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.harness import registry
from evals.harness.runs import read_run


def answered_as(record: dict[str, Any], keys: Sequence[str], values: Sequence[float], choice: str) -> dict[str, Any]:
    """The record answered `choice` with the distribution `values` over `keys`."""
    return {**record, "choice": choice, "probabilities": dict(zip(keys, values, strict=True))}


def scored(meta: dict[str, Any], records: Sequence[dict[str, Any]], variant: str | None) -> list[dict[str, Any]]:
    """The records as `variant` of the run's suite answers them; as they are without one."""
    if not variant:
        return list(records)
    return registry.get(meta["suite"]).variant_records(meta, records, variant)


def read_scored(spec: str | Path, question_type: str | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """run.json and the answered records of `DIR` or `DIR@VARIANT` (of one question type if given)."""
    directory, _, variant = str(spec).partition("@")
    meta, answered, _ = read_run(Path(directory))
    if question_type is not None:
        answered = [record for record in answered if record.get("type") == question_type]
    return meta, scored(meta, answered, variant)
