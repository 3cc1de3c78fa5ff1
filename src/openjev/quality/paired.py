"""Two runs scored on the same items: McNemar's exact test and paired bootstrap intervals of the
difference B - A of any per-run figure (accuracy, macro-F1, Brier, ECE).

Contract: items are paired by position (item i of run A is item i of run B); every function is
deterministic (the bootstrap for a given seed) and refuses empty input with ValueError, as
`quality/metrics.py` does. Each figure's point value equals the one `metrics.py` computes for the run
alone: macro-F1 as `label_report`'s macro average, ECE as `metrics.ece` over 10 equal-mass bins.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: A figure of one run, computed for many resamples at once: an index matrix (draws x n) -> one value a draw.
Figure = Callable[[np.ndarray], np.ndarray]
#: At most this many resampled indices are held at once (draws are made in chunks under it).
INDICES_PER_CHUNK = 2_000_000


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value of the discordant pairs b (only A right) and c (only B right):
    under H0 each of the n = b + c discordant pairs goes either way with probability 1/2, so
    p = min(1, 2 · Σ_{i=0}^{min(b,c)} C(n, i) / 2ⁿ); 1 when there is no discordant pair."""
    if only_a < 0 or only_b < 0:
        raise ValueError("mcnemar_exact: counts must be >= 0")
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1))
    return min(1.0, 2 * tail / 2**n)


def mean_of(values: Sequence[float]) -> Figure:
    """The mean of a per-item value (accuracy: 1 right, 0 wrong; the Brier score: each item's own)."""
    array = np.asarray(values, dtype=float)
    return lambda indices: array[indices].mean(axis=1)


def macro_f1_of(gold: Sequence[str], predicted: Sequence[str]) -> Figure:
    """Macro-averaged F1 over the labels that occur in a resample's gold or predictions:
    F1_l = 2·TP_l / (2·TP_l + FP_l + FN_l) (0 where TP_l = 0), as scikit-learn with zero_division=0."""
    names = sorted({*gold, *predicted})
    codes = {name: code for code, name in enumerate(names)}
    gold_codes = np.asarray([codes[label] for label in gold])
    predicted_codes = np.asarray([codes[label] for label in predicted])

    def figure(indices: np.ndarray) -> np.ndarray:
        g, p = gold_codes[indices], predicted_codes[indices]
        total, present = np.zeros(len(indices)), np.zeros(len(indices))
        for code in range(len(names)):
            is_gold, is_predicted = g == code, p == code
            tp = (is_gold & is_predicted).sum(axis=1)
            denominator = is_gold.sum(axis=1) + is_predicted.sum(axis=1)
            total += np.divide(2 * tp, denominator, out=np.zeros(len(indices)), where=denominator > 0)
            present += denominator > 0
        return total / present

    return figure


def ece_of(confidences: Sequence[float], correct: Sequence[bool], bins: int = 10) -> Figure:
    """Expected calibration error over `bins` equal-mass bins of the confidence (`metrics.ece`):
    items sorted stably by confidence (ties in a resample by the items' order), the first n mod bins
    groups one item larger, ECE = Σ_b |Σ_{i∈b} correct_i - Σ_{i∈b} conf_i| / n."""
    confidence = np.asarray(confidences, dtype=float)
    order = np.argsort(confidence, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    # Each item's gap, in confidence order: a resample sorts its items' ranks (integers) and reads these.
    gap = (np.asarray(correct, dtype=float) - confidence)[order]

    def figure(indices: np.ndarray) -> np.ndarray:
        n = indices.shape[1]
        size, extra = divmod(n, bins)
        edges = np.cumsum([0] + [size + (b < extra) for b in range(bins)])[:-1]
        gaps = np.add.reduceat(gap[np.sort(rank[indices], axis=1)], edges[edges < n], axis=1)
        return np.abs(gaps).sum(axis=1) / n

    return figure


@dataclass(frozen=True)
class PairedFigure:
    """One figure of each run on the same items, B - A and the difference's bootstrap 95% interval."""

    a: float
    b: float
    difference: float
    ci95: tuple[float, float]


def paired_figures(
    figures: Mapping[str, tuple[Figure, Figure]], n: int, draws: int = 10_000, seed: int = 0
) -> dict[str, PairedFigure]:
    """For each named pair of figures (run A's, run B's): both values on all n items and the paired
    bootstrap of B - A. Every draw resamples n item positions with replacement (numpy's default
    generator seeded with `seed`), the same positions for both runs and every figure; the interval
    is the 2.5th and 97.5th percentiles (linear interpolation) of the `draws` differences."""
    if n <= 0:
        raise ValueError("paired_figures: no items")
    rng = np.random.default_rng(seed)
    whole = np.arange(n)[None, :]
    differences: dict[str, list[np.ndarray]] = {name: [] for name in figures}
    chunk = max(1, INDICES_PER_CHUNK // n)
    for start in range(0, draws, chunk):
        indices = rng.integers(0, n, size=(min(chunk, draws - start), n))
        for name, (figure_a, figure_b) in figures.items():
            differences[name].append(figure_b(indices) - figure_a(indices))
    result = {}
    for name, (figure_a, figure_b) in figures.items():
        a, b = float(figure_a(whole)[0]), float(figure_b(whole)[0])
        low, high = np.percentile(np.concatenate(differences[name]), [2.5, 97.5])
        result[name] = PairedFigure(a, b, b - a, (float(low), float(high)))
    return result
