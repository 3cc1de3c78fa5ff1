"""The offline readout variants of `decisions-dev`: what a server that combines its raw readouts in each
sound way would answer, from one raw pass (asking.py).

Contract: every view of a record is a distribution in the question's own order (`dataset.distribution`:
option keys in the family's order, levels low to high), so combining views never needs to know where
an option was shown. A variant's name is `[CAL+]COMBINE`:

- `CAL` (calibration, per view, before combining): none; `cc`, each view divided by its own readout
  over `N/A` (`content_free`); `ccn`, divided by its readout over the family's neutral state
  (`content_free_neutral`). A noul has no content-free readout in this suite, so a noul is never
  calibrated. Dividing and combining are the server's own (`answering/debias.py`: `divide_prior`,
  `combined_views`), so a variant scores what a server so configured serves.
- `COMBINE`: `plain` (the first readout alone), `rot` (the second alone: the choice's options shifted by
  n // 2, the score's rubric reversed), `avg2` (both: probability mean for a choice, normalised
  geometric mean for a score), `gateT` (the first readout alone when its top probability is at least
  T, else `avg2`: a second readout only where the first is unsure).

No letter prior is estimated or divided out: every correction here carries no content of the state.
Readouts per question: 1 for plain/rot, 2 for avg2, 1 + the share below T for gateT; the content-free
readouts are read once per question text and cached (`+ cached`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from openjev.answering.debias import combined_views, divide_prior
from openjev.options import RotationAverage

GATES = (0.5, 0.7, 0.9)
CALIBRATIONS = {"": None, "cc": "content_free", "ccn": "content_free_neutral"}
COMBINES = ("plain", "rot", "avg2", *(f"gate{t}" for t in GATES))
VARIANTS = tuple(f"{cal}+{combine}" if cal else combine for cal in CALIBRATIONS for combine in COMBINES)


def normalised(values: Sequence[float]) -> list[float]:
    total = math.fsum(values)
    return [v / total for v in values] if total > 0 else [1.0 / len(values)] * len(values)


def averaged(kind: str, first: Sequence[float], second: Sequence[float]) -> list[float]:
    """Two views combined as the server combines them: the probability mean (choice), the normalised
    geometric mean (score)."""
    return combined_views(kind, [first, second], RotationAverage.probability)


def split_name(variant: str) -> tuple[str, str]:
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
    cal, _, combine = variant.rpartition("+")
    return cal, combine


def views(record: dict[str, Any], cal: str) -> tuple[list[float], list[float] | None]:
    """The record's first and second views in its own order, each calibrated by `cal`."""
    first = list(record["probabilities"].values())
    extra = list(record["views"].values())
    second = list(extra[0].values()) if extra else None
    field = CALIBRATIONS[cal]
    if field is None or record["type"] == "noul":
        return first, second
    priors = record.get(field)
    if not priors:
        raise ValueError(f"{record['id']}: variant needs `{field}`, which this run did not read")
    view_names = ["plain", *record["views"]]
    first = divide_prior(first, priors[view_names[0]])
    if second is not None:
        second = divide_prior(second, priors[view_names[1]])
    return first, second


def variant_distribution(record: dict[str, Any], variant: str) -> tuple[list[float], int]:
    """What a server under `variant` answers for the record (its own order), and the readouts it took."""
    cal, combine = split_name(variant)
    first, second = views(record, cal)
    if second is None or combine == "plain":
        return first, 1
    if combine == "rot":
        return second, 1
    if combine.startswith("gate") and max(first) >= float(combine[4:]):
        return first, 1
    return averaged(record["type"], first, second), 2
