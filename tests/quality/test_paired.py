"""`quality/paired.py` against independent implementations: McNemar's exact p against scipy's binomial
test, each run's figure against `quality/metrics.py` (scikit-learn for macro-F1) on the whole sample
and on a resample, and the bootstrap's interval on a case known by hand."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy.stats import binomtest

from openjev.quality import metrics
from openjev.quality.paired import ece_of, macro_f1_of, mcnemar_exact, mean_of, paired_figures

LABELS = ["billing", "technical", "sales", "legal"]


def sample(n: int, seed: int) -> tuple[list[str], list[str], list[float]]:
    chance = random.Random(seed)
    gold = [chance.choice(LABELS) for _ in range(n)]
    predicted = [label if chance.random() < 0.6 else chance.choice(LABELS) for label in gold]
    # Confidences on a coarse grid, so equal confidences (ties in the sort) occur.
    return gold, predicted, [round(chance.random(), 1) for _ in range(n)]


@pytest.mark.parametrize(("only_a", "only_b"), [(0, 0), (3, 9), (9, 3), (0, 7), (25, 40), (500, 560)])
def test_mcnemar_exact_is_the_two_sided_binomial_test_of_the_discordant_pairs(only_a: int, only_b: int) -> None:
    expected = binomtest(min(only_a, only_b), only_a + only_b, 0.5).pvalue if only_a + only_b else 1.0
    assert mcnemar_exact(only_a, only_b) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("n", "seed"), [(7, 1), (13, 2), (57, 3), (400, 4)])
def test_each_figure_is_the_one_metrics_computes_on_the_sample_and_on_a_resample(n: int, seed: int) -> None:
    gold, predicted, confidence = sample(n, seed)
    correct = [g == p for g, p in zip(gold, predicted, strict=True)]
    resample = np.random.default_rng(seed).integers(0, n, size=n)
    # A resample's items in the order the figure reads them: by confidence, ties by item.
    ordered = sorted(resample.tolist(), key=lambda i: (confidence[i], i))
    for items in (list(range(n)), ordered):
        at = np.asarray(items)[None, :]
        g, p = [gold[i] for i in items], [predicted[i] for i in items]
        assert macro_f1_of(gold, predicted)(at)[0] == pytest.approx(metrics.label_report(g, p, LABELS)["macro"]["f1"])
        flags, sure = [correct[i] for i in items], [confidence[i] for i in items]
        assert ece_of(confidence, correct)(at)[0] == pytest.approx(metrics.ece(sure, flags, 10))
        assert mean_of([float(flag) for flag in correct])(at)[0] == pytest.approx(np.mean(flags))


def test_the_bootstrap_interval_of_a_constant_difference_is_that_difference_and_is_seeded() -> None:
    gold, predicted, _ = sample(50, 5)
    figures = {"f1": (macro_f1_of(gold, predicted), macro_f1_of(gold, gold)), "same": (mean_of([0.5] * 50),) * 2}
    result = paired_figures(figures, 50, draws=2000, seed=3)
    # B predicts gold everywhere: its macro-F1 is 1 in every resample, so B - A is 1 - A's, below 1.
    assert result["f1"].b == 1.0 and result["f1"].difference == 1.0 - result["f1"].a
    assert 0 < result["f1"].ci95[0] <= result["f1"].difference <= result["f1"].ci95[1] < 1
    assert result["same"].ci95 == (0.0, 0.0)
    assert paired_figures(figures, 50, draws=2000, seed=3) == result
    with pytest.raises(ValueError):
        paired_figures(figures, 0)
