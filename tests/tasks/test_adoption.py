"""What a task adopts: stratified folds that keep pairs whole, cross-validated calibration, and the nested
rule that never adopts what answers worse than the plain readout."""

from __future__ import annotations

import numpy as np

from openjev.tasks import adoption
from openjev.tasks.calibration import quality


def test_folds_keep_pairs_together_spread_labels_and_cover_every_example_once() -> None:
    groups = ["a", "a", None, "b", "b", None, "c", "c"]
    gold = [0, 1, 0, 0, 1, 1, 0, 1]
    cut = adoption.cut(gold, adoption.unit_ids(groups), 3)
    assert sorted(i for fold in cut for i in fold) == list(range(8))
    for pair in ((0, 1), (3, 4), (6, 7)):
        assert sum(pair[0] in fold and pair[1] in fold for fold in cut) == 1
    assert len(adoption.cut([0, 1, 0, 1], adoption.unit_ids([None] * 4), 5)) == 2  # no more than a label has
    assert len(adoption.cut([0, 1, 0, 1, 0, 1], ["x", "x", "y", "y", "z", "z"], 5)) == 3  # nor than units
    assert adoption.cut([0, 1], ["x", "x"], 5) == [[0, 1]]


def test_cross_validated_calibration_beats_a_biased_readout_on_held_out_examples() -> None:
    # The readout favours label 0 by a constant; gold follows the unbiased distribution.
    rng = np.random.default_rng(7)
    distributions, gold = [], []
    for _ in range(120):
        logits = rng.normal(0, 1.0, 3)
        truth = np.exp(logits) / np.exp(logits).sum()
        gold.append(int(rng.choice(3, p=truth)))
        biased = np.exp(logits + np.array([2.0, 0.0, 0.0]))
        distributions.append([list(biased / biased.sum())])
    groups = [None] * len(gold)
    folds = adoption.cut(gold, adoption.unit_ids(groups), 5)
    before = quality([d[0] for d in distributions], gold, groups)
    answered = adoption.cross_validated(distributions, gold, adoption.Candidate(0, True), folds)
    after = quality([answered[i] for i in range(len(gold))], gold, groups)
    assert after["accuracy"] > before["accuracy"] and after["brier"] < before["brier"]
    report = adoption.nested(distributions, gold, groups, folds, [adoption.Candidate(0, True)], 5)
    assert report["adopted"] and report["chosen"]["accuracy"] > report["plain"]["accuracy"]
    assert adoption.choose(distributions, gold, folds, [adoption.Candidate(0, True)]) == adoption.Candidate(0, True)


def overconfident_case() -> tuple[list[list[list[float]]], list[int]]:
    """Readouts right 50 times in 60, but their 10 errors are certain: calibrating flattens them and
    shifts the labels, which helps Brier and loses accuracy."""
    rows = [([0.99, 0.01], 1)] * 10 + [([0.4, 0.6], 1)] * 25 + [([0.6, 0.4], 0)] * 25
    return [[distribution] for distribution, _ in rows], [label for _, label in rows]


def test_a_calibration_that_helps_brier_and_hurts_accuracy_is_not_adopted() -> None:
    readouts, gold = overconfident_case()
    groups = [None] * len(gold)
    folds = adoption.cut(gold, adoption.unit_ids(groups), 5)
    plain = quality([r[0] for r in readouts], gold, groups)
    calibrated = adoption.cross_validated(readouts, gold, adoption.Candidate(0, True), folds)
    after = quality([calibrated[i] for i in range(len(gold))], gold, groups)
    # Brier alone (the rule this replaces) would adopt it, at a loss of accuracy.
    assert after["brier"] < plain["brier"] and after["accuracy"] < plain["accuracy"]
    candidates = [adoption.Candidate(0, True)]
    assert adoption.choose(readouts, gold, folds, candidates) == adoption.PLAIN
    report = adoption.nested(readouts, gold, groups, folds, candidates, 5)
    assert report["chosen"]["accuracy"] >= report["plain"]["accuracy"]
    assert report["chosen"]["accuracy"] == plain["accuracy"]  # what is reported is plain's, not a maximum
    assert all(not pick["calibrated"] for pick in report["chosen_per_fold"])


def test_a_worked_example_count_is_adopted_only_when_it_answers_better_held_out() -> None:
    rng = np.random.default_rng(3)
    gold = [int(g) for g in rng.integers(0, 2, 40)]
    noise = [[float(p), 1 - float(p)] for p in rng.uniform(0.3, 0.7, 40)]
    sharp = [[0.9, 0.1] if g == 0 else [0.1, 0.9] for g in gold]
    readouts = [[n, s] for n, s in zip(noise, sharp, strict=True)]
    groups = [None] * 40
    folds = adoption.cut(gold, adoption.unit_ids(groups), 5)
    candidates = [adoption.Candidate(w, c) for w in (0, 1) for c in (False, True)]
    report = adoption.nested(readouts, gold, groups, folds, candidates, 5)
    assert report["adopted"] and report["chosen"]["accuracy"] == 1.0
    assert adoption.choose(readouts, gold, folds, candidates).worked == 1
    # The same readouts with the order swapped: w = 1 is the noise now, and no worked example is shown.
    swapped = [[s, n] for n, s in zip(noise, sharp, strict=True)]
    assert adoption.choose(swapped, gold, folds, candidates).worked == 0
