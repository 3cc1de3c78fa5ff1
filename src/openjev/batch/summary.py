"""The figures `openjev eval` reports for judged rows, per question type and over all rows.

For each type: n, accuracy with its 95% Wilson interval, pair accuracy (both halves of a contrastive
pair right) where rows carry `pair`, the multiclass Brier score, the expected calibration error over
ten equal-mass bins of the predicted label's probability, the confusion counts gold → predicted with
each gold label's recall, and the reliability bins themselves. Choice rows add the position error:
for each option position i, (share of rows predicted at i) - (share whose gold is at i), and the worst
absolute gap. Score rows add the mean absolute error in levels, mean |score - gold|, with a normal
95% interval (mean ± 1.96·s/√n).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from openjev.batch.judging import Judged
from openjev.quality.metrics import accuracy_of, brier, ece, equal_mass_bins, mean_interval, pair_accuracy

BINS = 10


def summarize(judged: Sequence[Judged], positions: dict[str, list[str]]) -> dict[str, Any]:
    """`types`: the figures per type (`noul`, `choice`, `score`); `all`: accuracy over every row.
    `positions` maps a choice row's id to its options in order."""
    kinds = sorted({item.kind for item in judged})
    return {
        "types": {kind: type_figures([item for item in judged if item.kind == kind], positions) for kind in kinds},
        "all": accuracy_of([item.correct for item in judged]),
    }


def type_figures(items: Sequence[Judged], positions: dict[str, list[str]]) -> dict[str, Any]:
    correct = [item.correct for item in items]
    confidences = [item.confidence for item in items]
    figures: dict[str, Any] = accuracy_of(correct)
    figures["pairs"] = pair_accuracy(correct, [item.pair for item in items])
    figures["brier"] = brier([item.distribution for item in items], [item.gold for item in items])
    figures["ece"] = ece(confidences, correct, BINS)
    figures["reliability"] = [vars(b) for b in equal_mass_bins(confidences, correct, BINS)]
    figures["confusion"] = confusion(items)
    if items[0].kind == "choice":
        figures["position_error"] = position_error(items, positions)
    if items[0].kind == "score":
        figures["level_mae"] = mean_interval([item.level_error or 0.0 for item in items])
    return figures


def confusion(items: Sequence[Judged]) -> dict[str, Any]:
    """{gold: {predicted: count}} and each gold label's recall."""
    counts: dict[str, Counter[str]] = {}
    for item in items:
        counts.setdefault(item.gold, Counter())[item.predicted] += 1
    return {
        "counts": {gold: dict(row) for gold, row in sorted(counts.items())},
        "recall": {gold: row[gold] / sum(row.values()) for gold, row in sorted(counts.items())},
    }


def position_error(items: Sequence[Judged], positions: dict[str, list[str]]) -> dict[str, Any]:
    """Per option position: predicted share minus gold share (rows of any option count), and the worst gap."""
    predicted: Counter[int] = Counter()
    gold: Counter[int] = Counter()
    for item in items:
        order = positions[item.id]
        predicted[order.index(item.predicted)] += 1
        gold[order.index(item.gold)] += 1
    n = len(items)
    gaps = {str(i + 1): (predicted[i] - gold[i]) / n for i in range(max(len(positions[item.id]) for item in items))}
    return {"gaps": gaps, "worst": max(abs(gap) for gap in gaps.values())}
