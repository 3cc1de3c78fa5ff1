"""Pure metric functions of answer quality: the eval harness's, a task's fit report, `openjev` commands'.

Contract: every function takes plain sequences (one entry per scored item, in any fixed order), never
reads files or the clock, and is deterministic (the bootstrap too, for a given seed). Probabilities
are the ones the server returned; `correct` flags are exact matches of the returned choice with the
gold answer. Empty inputs are refused with ValueError rather than answered with NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The standard normal quantile for a two-sided 95% interval.
Z95 = 1.959963984540054
#: Probabilities below this count as this in the NLL, so one confident miss cannot make it infinite.
PROBABILITY_FLOOR = 1e-12


def _require(values: Sequence[object], what: str) -> int:
    if not values:
        raise ValueError(f"{what}: no items")
    return len(values)


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion p̂ = k/n.

    centre = (p̂ + z²/2n) / (1 + z²/n),  half-width = z/(1 + z²/n) · √(p̂(1-p̂)/n + z²/4n²);
    the interval is centre ± half-width (it stays inside [0, 1] and is sound at p̂ = 0 or 1).
    """
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"wilson_interval: need 0 <= successes <= n and n > 0, got {successes}/{n}")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def accuracy_of(flags: Sequence[bool]) -> dict[str, Any]:
    """n, accuracy k/n and its 95% Wilson interval."""
    n = _require(flags, "accuracy_of")
    right = sum(bool(flag) for flag in flags)
    return {"n": n, "accuracy": right / n, "accuracy_ci95": list(wilson_interval(right, n))}


def pair_accuracy(correct: Sequence[bool], groups: Sequence[str | None]) -> dict[str, Any] | None:
    """Contrastive pairs: the share of groups (items sharing a non-null group id, two or more of them)
    whose every item is right, with its Wilson interval; None when no group has two items."""
    if len(groups) != len(correct):
        raise ValueError("pair_accuracy: one group id per item")
    members: dict[str, list[bool]] = {}
    for flag, group in zip(correct, groups, strict=True):
        if group is not None:
            members.setdefault(group, []).append(bool(flag))
    pairs = [all(flags) for flags in members.values() if len(flags) > 1]
    if not pairs:
        return None
    right = sum(pairs)
    return {"pairs": len(pairs), "pair_accuracy": right / len(pairs), "ci95": list(wilson_interval(right, len(pairs)))}


def nll(gold_probabilities: Sequence[float]) -> float:
    """Mean negative log-likelihood of the gold answer, in nats: (1/n) Σ -ln max(p_gold, 1e-12)."""
    n = _require(gold_probabilities, "nll")
    return sum(-math.log(max(p, PROBABILITY_FLOOR)) for p in gold_probabilities) / n


def brier(distributions: Sequence[Mapping[str, float]], gold: Sequence[str]) -> float:
    """Multiclass Brier score: (1/n) Σ_items Σ_k (p_k - y_k)², y the one-hot gold; 0 best, 2 worst.

    A gold label missing from a distribution counts as probability 0 for it.
    """
    n = _require(distributions, "brier")
    if len(gold) != n:
        raise ValueError("brier: one gold label per distribution")
    total = 0.0
    for distribution, label in zip(distributions, gold, strict=True):
        total += sum((p - (key == label)) ** 2 for key, p in distribution.items())
        if label not in distribution:
            total += 1.0
    return total / n


def mean_interval(values: Sequence[float], z: float = Z95) -> dict[str, Any]:
    """The mean and its normal 95% interval, floored at 0 (the values are absolute errors):
    mean ± z·s/√n, s the sample standard deviation (0 for a single value)."""
    n = _require(values, "mean_interval")
    mean = sum(values) / n
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    half = z * spread / math.sqrt(n)
    return {"mean": mean, "ci95": [max(0.0, mean - half), mean + half]}


@dataclass(frozen=True)
class Bin:
    """One reliability bin: its item count, mean top probability and accuracy."""

    n: int
    confidence: float
    accuracy: float


def equal_mass_bins(confidences: Sequence[float], correct: Sequence[bool], bins: int = 10) -> list[Bin]:
    """Items sorted by top probability (stable), cut into `bins` consecutive groups of equal size.

    With n = q·bins + r, the first r groups hold q + 1 items and the others q; empty groups (n < bins)
    are left out. Equal items may fall on both sides of a cut.
    """
    n = _require(confidences, "equal_mass_bins")
    if len(correct) != n:
        raise ValueError("equal_mass_bins: one correct flag per confidence")
    order = sorted(range(n), key=lambda i: confidences[i])
    size, extra = divmod(n, bins)
    result: list[Bin] = []
    start = 0
    for index in range(bins):
        members = order[start : start + size + (index < extra)]
        start += len(members)
        if members:
            result.append(
                Bin(
                    n=len(members),
                    confidence=sum(confidences[i] for i in members) / len(members),
                    accuracy=sum(bool(correct[i]) for i in members) / len(members),
                )
            )
    return result


def ece(confidences: Sequence[float], correct: Sequence[bool], bins: int = 10) -> float:
    """Expected calibration error over equal-mass bins of the top probability: Σ_b (n_b/n)·|acc_b - conf_b|."""
    groups = equal_mass_bins(confidences, correct, bins)
    n = sum(group.n for group in groups)
    return sum(group.n / n * abs(group.accuracy - group.confidence) for group in groups)


@dataclass(frozen=True)
class Automation:
    """The share of items answered automatically at a threshold, and that threshold (None: no share qualifies)."""

    coverage: float
    threshold: float | None


def automate_at(confidences: Sequence[float], correct: Sequence[bool], max_error: float) -> Automation:
    """The largest coverage whose error stays within `max_error` when automating items with top probability ≥ t.

    For every threshold t among the observed top probabilities, S_t = {i : conf_i ≥ t}; t qualifies
    when (wrong answers in S_t) / |S_t| ≤ max_error. Returns max |S_t|/n over qualifying t and the t
    that reaches it, or coverage 0 and threshold None when none qualifies.
    """
    n = _require(confidences, "automate_at")
    if len(correct) != n:
        raise ValueError("automate_at: one correct flag per confidence")
    order = sorted(range(n), key=lambda i: -confidences[i])
    best = Automation(coverage=0.0, threshold=None)
    wrong = 0
    for position, i in enumerate(order):
        wrong += not correct[i]
        is_group_end = position + 1 == n or confidences[order[position + 1]] != confidences[i]
        covered = position + 1
        if is_group_end and wrong <= max_error * covered and covered / n > best.coverage:
            best = Automation(coverage=covered / n, threshold=confidences[i])
    return best


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (position q·(n-1), 0-based)."""
    n = _require(values, "quantile")
    ordered = sorted(values)
    position = q * (n - 1)
    low = math.floor(position)
    high = min(low + 1, n - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class PairedComparison:
    """Run B against run A on the same items: accuracies, B - A, its bootstrap 95% interval and the 2x2 table."""

    n: int
    accuracy_a: float
    accuracy_b: float
    difference: float
    ci95: tuple[float, float]
    both_right: int
    only_a_right: int
    only_b_right: int
    both_wrong: int


def paired_bootstrap(
    correct_a: Sequence[bool], correct_b: Sequence[bool], draws: int = 10_000, seed: int = 0
) -> PairedComparison:
    """Paired bootstrap of accuracy(B) - accuracy(A) over the 2x2 right/wrong table.

    Resampling n items with replacement is a multinomial draw of n over the four cells with the
    observed frequencies; each draw's difference is (only_B - only_A)/n. The interval is the 2.5th and
    97.5th percentiles (linear interpolation) of `draws` such differences from numpy's default
    generator seeded with `seed`.
    """
    n = _require(correct_a, "paired_bootstrap")
    if len(correct_b) != n:
        raise ValueError("paired_bootstrap: the runs must score the same items")
    both = sum(bool(a) and bool(b) for a, b in zip(correct_a, correct_b, strict=True))
    only_a = sum(bool(a) and not b for a, b in zip(correct_a, correct_b, strict=True))
    only_b = sum(bool(b) and not a for a, b in zip(correct_a, correct_b, strict=True))
    neither = n - both - only_a - only_b
    table = np.random.default_rng(seed).multinomial(n, [both / n, only_a / n, only_b / n, neither / n], size=draws)
    differences = (table[:, 2] - table[:, 1]) / n
    low, high = np.percentile(differences, [2.5, 97.5])
    return PairedComparison(
        n=n,
        accuracy_a=(both + only_a) / n,
        accuracy_b=(both + only_b) / n,
        difference=(only_b - only_a) / n,
        ci95=(float(low), float(high)),
        both_right=both,
        only_a_right=only_a,
        only_b_right=only_b,
        both_wrong=neither,
    )


def label_report(gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str]) -> dict[str, Any]:
    """Per-label precision, recall, F1 and support, their macro and weighted averages, and the confusion
    matrix (rows gold, columns predicted), by scikit-learn's `precision_recall_fscore_support` and
    `confusion_matrix` over the `labels` that occur in `gold` or `predicted`, in the order given.

    A label never predicted has precision 0 (and one never gold recall 0), as scikit-learn's
    `zero_division=0` counts them.
    """
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

    n = _require(gold, "label_report")
    if len(predicted) != n:
        raise ValueError("label_report: one prediction per gold label")
    present = [label for label in labels if label in set(gold) | set(predicted)]
    if len(present) < len(set(gold) | set(predicted)):
        raise ValueError("label_report: a gold or predicted label is not among the labels")
    per_label = precision_recall_fscore_support(gold, predicted, labels=present, zero_division=0)
    report: dict[str, Any] = {
        "labels": {
            label: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
            for label, p, r, f, s in zip(present, *per_label, strict=True)
        }
    }
    for average in ("macro", "weighted"):
        p, r, f, _ = precision_recall_fscore_support(gold, predicted, labels=present, average=average, zero_division=0)
        report[average] = {"precision": float(p), "recall": float(r), "f1": float(f), "support": n}
    matrix = confusion_matrix(gold, predicted, labels=present)
    report["confusion"] = {"labels": present, "matrix": matrix.tolist()}
    return report
