"""Offline answer variants of a `--shifts K` run: what a server with option shifts would have answered.

A results line of such a run holds, under `shifts`, each rotation's distribution keyed by the
original letters (`offsets[i]` is rotation i's cyclic shift; offset 0 is the protocol's own
question). From them, with the server's own maths (`openjev.answering.debias.combine_views`, module doc):

- `shift0`: rotation 0 alone, the plain protocol answer (what the record's `choice` already is);
- `average`: the mean of the K rotations' distributions (OPENJEV_OPTION_SHIFTS=K,
  OPENJEV_ROTATION_SKIP_ABOVE=1);
- `log`: their renormalised geometric mean (the same with OPENJEV_ROTATION_AVERAGE=log).

A variant record is the record with `choice` and `probabilities` replaced (evals/harness/variants.py),
so every figure of the report and every paired comparison applies to it unchanged. `temperature` (when
not 1) sharpens or flattens the result last, as the server's OPENJEV_TEMPERATURE or calibration file
would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evals.harness.variants import answered_as
from openjev.answering.answers import argmax_first, sharpen
from openjev.answering.debias import combine_views
from openjev.options import RotationAverage

VARIANTS = ("shift0", "average", "log")


def variant_probabilities(record: dict[str, Any], variant: str) -> dict[str, float]:
    """The variant's distribution for one answered record, keyed by letter in the record's order."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
    letters = list(record["probabilities"])
    if variant == "shift0":
        return dict(record["probabilities"])
    if "shifts" not in record:
        raise ValueError(f"item {record['id']} has no rotations: run with --shifts K to score {variant!r}")
    distributions = [[dist[letter] for letter in letters] for dist in record["shifts"]["probabilities"]]
    combined = combine_views(distributions, RotationAverage.log if variant == "log" else RotationAverage.probability)
    return dict(zip(letters, combined, strict=True))


def variant_record(record: dict[str, Any], variant: str, temperature: float = 1.0) -> dict[str, Any]:
    probabilities = variant_probabilities(record, variant)
    letters = list(probabilities)
    values = sharpen(list(probabilities.values()), temperature)
    return answered_as(record, letters, values, letters[argmax_first(values)])


def variant_records(records: Sequence[dict[str, Any]], variant: str) -> list[dict[str, Any]]:
    """Every record as `variant` answers it."""
    return [variant_record(record, variant) for record in records]


def run_variant_records(meta: dict[str, Any], records: Sequence[dict[str, Any]], variant: str) -> list[dict]:
    """The registry's hook: every record of the run as `variant` answers it (from its rotations alone)."""
    return variant_records(records, variant)


def has_shifts(records: Sequence[dict[str, Any]]) -> bool:
    return bool(records) and all("shifts" in record for record in records)
