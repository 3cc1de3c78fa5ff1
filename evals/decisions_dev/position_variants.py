"""The position variants of a `decisions-dev --position-views` run (positions.py): what a server that reads
a choice in each way would answer, computed offline from the raw readouts with the server's own maths
(`openjev.answering.debias`).

Contract: a record's views are distributions in the question's own option order; `cycle` is the full
cycle, the given order (shift 0) then `shift1` .. `shift{n-1}`. Each variant gives a distribution in
option order, its answer (argmax; ties to the first option in the question's order) and the readouts it
took:

- `plain`: the given order alone (1);
- `cycle-mean`, `cycle-log`: the full cycle's probability mean, its renormalised geometric mean (n);
- `cycle-prior`: the full cycle with its position prior divided out of each rotation, then the mean
  (`debias.cycle_debiased`; n);
- `adaptive`: rotations read one at a time in shift order, stopping as soon as the unread ones cannot
  change the argmax of the full-cycle mean (`debias.settled`), else after all n; serves the mean of
  those read (m of n);
- `canonical`: the options sorted by text then key (OPENJEV_OPTION_ORDER=canonical; 1);
- `vote`: each rotation's argmax votes; the most votes wins, a tie broken by the full cycle's mean
  probability (n).

Each variant also answers the reversed listing where this run read what it needs (`reversed_answer`):
`plain` reads the reversed order once; `canonical` shows a reversed listing in the same canonical
order, so its prompt and answer are the same by construction. The full-cycle variants would need the
reversed listing's own cycle, which this run does not read (they are invariant under a rotation of the
listing by construction: the same views are read).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from openjev.answering.debias import combine_views, cycle_debiased, settled
from openjev.options import RotationAverage

POSITION_VARIANTS = ("plain", "cycle-mean", "cycle-log", "cycle-prior", "adaptive", "canonical", "vote")


def cycle(record: dict[str, Any]) -> list[list[float]]:
    """Shift s's distribution in option order, s = 0..n-1."""
    n = len(record["probabilities"])
    views = record["views"]
    return [list(record["probabilities"].values()), *(list(views[f"shift{s}"].values()) for s in range(1, n))]


def argmax(values: Sequence[float]) -> int:
    return max(range(len(values)), key=lambda index: (values[index], -index))


def adaptive(rotations: Sequence[Sequence[float]]) -> tuple[list[float], int]:
    """The mean of the rotations read until the answer is settled (module doc), and how many were read."""
    n = len(rotations)
    sums = [0.0] * n
    for read, view in enumerate(rotations, start=1):
        sums = [total + p for total, p in zip(sums, view, strict=True)]
        if settled(sums, n - read):
            break
    return [total / read for total in sums], read


def vote(rotations: Sequence[Sequence[float]]) -> list[float]:
    """Vote shares, a tie broken by the mean probability (added at a scale below one vote)."""
    votes = Counter(argmax(view) for view in rotations)
    mean = combine_views(rotations, RotationAverage.probability)
    return [(votes[o] + mean[o] / 2) / (len(rotations) + 0.5) for o in range(len(mean))]


def distribution(record: dict[str, Any], variant: str) -> tuple[list[float], int]:
    """The variant's distribution (option order) and the readouts it took."""
    rotations = cycle(record)
    n = len(rotations)
    if variant == "plain":
        return rotations[0], 1
    if variant == "canonical":
        return list(record["views"]["canon"].values()), 1
    if variant == "cycle-mean":
        return combine_views(rotations, RotationAverage.probability), n
    if variant == "cycle-log":
        return combine_views(rotations, RotationAverage.log), n
    if variant == "cycle-prior":
        return cycle_debiased(rotations, RotationAverage.probability), n
    if variant == "adaptive":
        return adaptive(rotations)
    if variant == "vote":
        return vote(rotations), n
    raise ValueError(f"unknown position variant {variant!r}; choose from {', '.join(POSITION_VARIANTS)}")


def reversed_answer(record: dict[str, Any], variant: str) -> str | None:
    """The variant's answer to the reversed listing, where this run read it (module doc); else None."""
    keys = list(record["probabilities"])
    if variant == "plain":
        return keys[argmax(list(record["views"]["rev"].values()))]
    if variant == "canonical":
        return keys[argmax(list(record["views"]["canon"].values()))]
    return None


def answered(record: dict[str, Any], variant: str) -> dict[str, Any]:
    """The record as `variant` answers it, with `readouts` and `reversed` (its answer to the reversed
    listing, or None where not read)."""
    values, readouts = distribution(record, variant)
    keys = list(record["probabilities"])
    return {
        **record,
        "probabilities": dict(zip(keys, values, strict=True)),
        "choice": keys[argmax(values)],
        "readouts": readouts,
        "reversed": reversed_answer(record, variant),
    }
