"""A task's learning curve: how accurate it gets with each count of labelled examples per label.

For each count c of `COUNTS` that every outer fold's training part allows (each label has c examples
among the other folds), each way of answering that learns from labels is fitted on the first c
examples of each label of the other folds (in the order posted) and answers the held-out fold:
`calibration` (`calibration.fit`) and, where the readouts carry hidden states, `head`
(`head_adoption.answered`, its strength chosen on folds cut from those c per label; from 2 per label,
since a strength needs two folds). `plain` (the readout as it is, learning nothing) is the same at
every count and given once. Each is the accuracy over every held-out example with its Wilson
interval, from the plain readouts the fit read anyway: no readout is asked for the curve.

It says what more labels would buy: a curve still rising at the count the task has is worth more
examples (`POST /v1/tasks` with them); one that is flat is not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from openjev.quality import metrics
from openjev.tasks import head_adoption
from openjev.tasks.adoption import HEAD_FOLDS, cut
from openjev.tasks.calibration import fit

#: The counts of examples per label the curve is drawn at (those the examples allow).
COUNTS = (1, 2, 5, 10, 20, 50, 100, 200, 500)


def _first(gold: Sequence[int], train: Sequence[int], count: int) -> list[int]:
    """The first `count` examples of each label among `train`, in order."""
    taken: dict[int, int] = {}
    chosen = []
    for index in train:
        if taken.get(gold[index], 0) < count:
            taken[gold[index]] = taken.get(gold[index], 0) + 1
            chosen.append(index)
    return chosen


def _top(distributions: Sequence[Sequence[float]]) -> list[int]:
    return [int(np.argmax(distribution)) for distribution in distributions]


def _answers(plain: np.ndarray, hidden: np.ndarray | None, gold: Sequence[int], train: list[int], test: list[int]):
    """Each way's top labels for `test`, fitted on `train` (module doc)."""
    calibration = fit(plain[train].tolist(), [gold[i] for i in train])
    found = {"calibration": _top([calibration.apply(plain[i].tolist()) for i in test])}
    if hidden is not None:
        inner = cut([gold[i] for i in train], [f"item:{i}" for i in train], HEAD_FOLDS)
        strength_folds = [[train[position] for position in fold] for fold in inner]
        found["head"] = _top(head_adoption.answered(plain, hidden, gold, train, test, strength_folds))
    return found


def learning_curve(
    plain: Sequence[Sequence[float]], hidden: np.ndarray | None, gold: Sequence[int], folds: Sequence[Sequence[int]]
) -> dict[str, Any]:
    """The curve (module doc): `plain` the plain readouts (n x K), `hidden` their hidden states or None,
    `folds` the outer folds; no counts with fewer than two folds."""
    readouts = np.asarray(plain, np.float64)
    labels = sorted(set(gold))
    order = sorted(index for fold in folds for index in fold)
    right_plain = [_top([readouts[i]])[0] == gold[i] for i in order]
    trains = [[i for other in folds if other is not fold for i in other] for fold in folds]
    most = min((min(sum(gold[i] == label for i in train) for label in labels) for train in trains), default=0)
    points = []
    for count in (c for c in COUNTS if c <= most and len(folds) > 1):
        right: dict[str, dict[int, bool]] = {}
        for fold, train in zip(folds, trains, strict=True):
            answered = _answers(readouts, hidden if count >= 2 else None, gold, _first(gold, train, count), list(fold))
            for name, tops in answered.items():
                right.setdefault(name, {}).update({i: top == gold[i] for i, top in zip(fold, tops, strict=True)})
        point: dict[str, Any] = {"per_label": count}
        for name in ("calibration", "head"):
            point[name] = metrics.accuracy_of([right[name][i] for i in order]) if name in right else None
        points.append(point)
    return {"plain": metrics.accuracy_of(right_plain), "points": points}
