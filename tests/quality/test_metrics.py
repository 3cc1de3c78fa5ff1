"""The metric functions against values computed by hand (the working is in each test)."""

from __future__ import annotations

import math

import pytest

from openjev.quality import metrics


def test_wilson_interval_by_hand() -> None:
    # k=8, n=10, z²=3.8415: centre = (0.8 + 0.19207)/1.38415 = 0.71681,
    # half = 1.95996/1.38415 · √(0.016 + 0.0096037) = 1.41600 · 0.16001 = 0.22657.
    low, high = metrics.wilson_interval(8, 10)
    assert low == pytest.approx(0.49016, abs=1e-4)
    assert high == pytest.approx(0.94332, abs=1e-4)
    # k=0: the interval is [0, z²/(n + z²)] = [0, 3.8415/13.8415].
    assert metrics.wilson_interval(0, 10) == pytest.approx((0.0, 0.27753), abs=1e-4)


@pytest.mark.parametrize(
    ("right", "published"),
    [(829, (0.804, 0.851)), (577, (0.546, 0.607)), (588, (0.557, 0.618)), (600, (0.569, 0.630))],
)
def test_wilson_interval_matches_the_published_figures(right: int, published: tuple[float, float]) -> None:
    low, high = metrics.wilson_interval(right, 1000)
    assert (round(low, 3), round(high, 3)) == published


def test_wilson_interval_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError):
        metrics.wilson_interval(3, 2)
    with pytest.raises(ValueError):
        metrics.wilson_interval(0, 0)


def test_nll_by_hand() -> None:
    # (ln 2 + ln 4 + ln 1)/3 = 3 ln 2 / 3 = ln 2.
    assert metrics.nll([0.5, 0.25, 1.0]) == pytest.approx(math.log(2))
    # A zero probability counts as 1e-12: 12 ln 10 = 27.631.
    assert metrics.nll([0.0]) == pytest.approx(27.631021, abs=1e-6)
    with pytest.raises(ValueError):
        metrics.nll([])


def test_brier_by_hand() -> None:
    # (0.7-1)² + 0.2² + 0.1² = 0.14 and 0.5² + (0.5-1)² = 0.5; mean 0.32.
    distributions = [{"A": 0.7, "B": 0.2, "C": 0.1}, {"A": 0.5, "B": 0.5}]
    assert metrics.brier(distributions, ["A", "B"]) == pytest.approx(0.32)
    # The worst case: all mass on a wrong option, the gold one absent: 1² + 1² = 2.
    assert metrics.brier([{"A": 1.0}], ["B"]) == pytest.approx(2.0)


def test_equal_mass_bins_sizes() -> None:
    sizes = [group.n for group in metrics.equal_mass_bins([i / 23 for i in range(23)], [True] * 23, bins=10)]
    assert sizes == [3, 3, 3, 2, 2, 2, 2, 2, 2, 2]
    assert [group.n for group in metrics.equal_mass_bins([0.5, 0.6, 0.7], [True] * 3, bins=10)] == [1, 1, 1]


def test_ece_equal_mass_bins_by_hand() -> None:
    # Sorted: 0.55 ✗, 0.6 ✓, 0.8 ✓ | 0.9 ✗, 0.95 ✓ (5 items in 2 bins: 3 then 2).
    # Bin 1: confidence 0.65, accuracy 2/3, gap 1/60, weight 3/5 -> 0.01.
    # Bin 2: confidence 0.925, accuracy 1/2, gap 0.425, weight 2/5 -> 0.17. ECE = 0.18.
    confidences = [0.9, 0.8, 0.6, 0.55, 0.95]
    correct = [False, True, True, False, True]
    groups = metrics.equal_mass_bins(confidences, correct, bins=2)
    assert [(g.n, g.confidence, g.accuracy) for g in groups] == [
        (3, pytest.approx(0.65), pytest.approx(2 / 3)),
        (2, pytest.approx(0.925), pytest.approx(0.5)),
    ]
    assert metrics.ece(confidences, correct, bins=2) == pytest.approx(0.18)
    # One bin: |0.7 - 0.7| = 0. Ten bins of one item each: 7 · 0.1 · 0.3 + 3 · 0.1 · 0.7 = 0.42.
    assert metrics.ece([0.7] * 10, [True] * 7 + [False] * 3, bins=1) == pytest.approx(0.0)
    assert metrics.ece([0.7] * 10, [True] * 7 + [False] * 3, bins=10) == pytest.approx(0.42)


def test_automate_at_by_hand() -> None:
    confidences = [0.99, 0.95, 0.9, 0.8, 0.7]
    correct = [True, True, False, True, False]
    # Error of the top-k: 0, 0, 1/3, 1/4, 2/5.
    assert metrics.automate_at(confidences, correct, 0.34) == metrics.Automation(coverage=0.8, threshold=0.8)
    assert metrics.automate_at(confidences, correct, 0.01) == metrics.Automation(coverage=0.4, threshold=0.95)
    assert metrics.automate_at(confidences, correct, 0.5) == metrics.Automation(coverage=1.0, threshold=0.7)


def test_automate_at_keeps_ties_together_and_can_recover() -> None:
    # 0.9 and 0.9 go together (error 1/2), all three: 1/3; nothing qualifies at 10%.
    assert metrics.automate_at([0.9, 0.9, 0.5], [True, False, True], 0.1) == metrics.Automation(0.0, None)
    # Error of the top-k: 1, 1/2, 1/3, 1/4: only the whole set qualifies at 25%.
    result = metrics.automate_at([0.9, 0.8, 0.7, 0.6], [False, True, True, True], 0.25)
    assert result == metrics.Automation(coverage=1.0, threshold=0.6)


def test_quantile_interpolates() -> None:
    assert metrics.quantile([4, 1, 3, 2], 0.5) == pytest.approx(2.5)
    # Position 0.95 · 3 = 2.85: 3 + 0.85 · (4 - 3).
    assert metrics.quantile([1, 2, 3, 4], 0.95) == pytest.approx(3.85)
    assert metrics.quantile([5.0], 0.95) == 5.0


def test_paired_bootstrap_is_deterministic_and_centred() -> None:
    # 50 both right, 10 only A, 20 only B, 20 both wrong: B - A = (20 - 10)/100 = +0.10; its standard
    # error √((0.1 + 0.2 - 0.1²)/100) = 0.0539, so the interval is about 0.10 ± 0.106.
    a = [True] * 50 + [True] * 10 + [False] * 20 + [False] * 20
    b = [True] * 50 + [False] * 10 + [True] * 20 + [False] * 20
    first = metrics.paired_bootstrap(a, b, draws=10_000, seed=0)
    assert first == metrics.paired_bootstrap(a, b, draws=10_000, seed=0)
    assert (first.both_right, first.only_a_right, first.only_b_right, first.both_wrong) == (50, 10, 20, 20)
    assert (first.accuracy_a, first.accuracy_b, first.difference) == pytest.approx((0.6, 0.7, 0.1))
    assert first.ci95[0] == pytest.approx(-0.006, abs=0.015)
    assert first.ci95[1] == pytest.approx(0.206, abs=0.015)
    assert metrics.paired_bootstrap(a, b, seed=1).ci95 != first.ci95
    assert metrics.paired_bootstrap(a, a).ci95 == (0.0, 0.0)


def test_paired_bootstrap_needs_the_same_items() -> None:
    with pytest.raises(ValueError):
        metrics.paired_bootstrap([True, False], [True])


def test_accuracy_of_gives_n_share_and_wilson_interval() -> None:
    summary = metrics.accuracy_of([True, True, False, True])
    assert summary["n"] == 4 and summary["accuracy"] == 0.75
    assert summary["accuracy_ci95"] == pytest.approx(list(metrics.wilson_interval(3, 4)))
    with pytest.raises(ValueError):
        metrics.accuracy_of([])


def test_pair_accuracy_counts_groups_whose_every_item_is_right() -> None:
    # Groups a (both right), b (one wrong), c (a single item: no pair), and an ungrouped item.
    correct = [True, True, True, False, True, False]
    groups = ["a", "a", "b", "b", "c", None]
    summary = metrics.pair_accuracy(correct, groups)
    assert summary is not None
    assert summary["pairs"] == 2 and summary["pair_accuracy"] == 0.5
    assert metrics.pair_accuracy([True, False], [None, "x"]) is None


def test_mean_interval_by_hand() -> None:
    # Values 0, 1, 2: mean 1, s = 1, half-width 1.96 / √3 ≈ 1.1316; the lower end is floored at 0.
    figures = metrics.mean_interval([0.0, 1.0, 2.0])
    assert figures["mean"] == 1.0
    assert figures["ci95"] == pytest.approx([0.0, 1.0 + metrics.Z95 / math.sqrt(3)])
    assert metrics.mean_interval([0.5])["ci95"] == [0.5, 0.5]
    with pytest.raises(ValueError):
        metrics.mean_interval([])


def test_label_report_by_hand() -> None:
    # gold a a a b b c, predicted a a b b c c. a: tp 2, predicted 2, gold 3 -> P 1, R 2/3, F1 0.8;
    # b: tp 1, predicted 2, gold 2 -> P 0.5, R 0.5, F1 0.5; c: tp 1, predicted 2, gold 1 -> P 0.5, R 1, F1 2/3.
    # `d` is neither gold nor predicted, so it is left out.
    report = metrics.label_report(list("aaabbc"), list("aabbcc"), ["a", "b", "c", "d"])
    assert list(report["labels"]) == ["a", "b", "c"]
    assert report["labels"]["a"] == pytest.approx({"precision": 1.0, "recall": 2 / 3, "f1": 0.8, "support": 3})
    assert report["labels"]["c"] == pytest.approx({"precision": 0.5, "recall": 1.0, "f1": 2 / 3, "support": 1})
    assert report["macro"]["recall"] == pytest.approx((2 / 3 + 0.5 + 1) / 3)
    assert report["weighted"]["f1"] == pytest.approx((3 * 0.8 + 2 * 0.5 + 2 / 3) / 6)
    assert report["confusion"] == {"labels": ["a", "b", "c"], "matrix": [[2, 1, 0], [0, 1, 1], [0, 0, 1]]}
    with pytest.raises(ValueError, match="not among the labels"):
        metrics.label_report(["a"], ["z"], ["a"])
