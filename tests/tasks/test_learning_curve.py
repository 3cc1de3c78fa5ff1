"""A task's learning curve (`tasks/learning_curve.py`) on synthetic readouts and hidden states of known answers."""

from __future__ import annotations

import numpy as np

from openjev.tasks.adoption import cut, unit_ids
from openjev.tasks.learning_curve import learning_curve
from tests.tasks.test_head import problem


def folds_of(gold: list[int], k: int = 5) -> list[list[int]]:
    return cut(gold, unit_ids([None] * len(gold)), k)


def test_the_curve_rises_with_labels_where_the_hidden_state_knows_and_the_readout_does_not() -> None:
    hidden, readouts, gold = problem(120, seed=7, signal=0.6)  # 30 of each of 4 labels
    curve = learning_curve(readouts, hidden, gold, folds_of(gold))
    # Every count the training folds allow (24 per label among the other 4 folds), and no more.
    assert [point["per_label"] for point in curve["points"]] == [1, 2, 5, 10, 20]
    assert curve["plain"]["n"] == 120 and curve["plain"]["accuracy"] < 0.4
    first, *_, last = curve["points"]
    assert first["head"] is None and first["calibration"]["n"] == 120  # one per label: no strength folds
    heads = [point["head"]["accuracy"] for point in curve["points"][1:]]
    assert heads[-1] >= 0.9 and heads[-1] > heads[0]
    assert last["calibration"]["accuracy"] < 0.5  # the readouts carry nothing a calibration can use


def test_without_hidden_states_the_curve_has_no_head_and_too_few_examples_no_points() -> None:
    _, readouts, gold = problem(40, seed=8, signal=0.6)
    curve = learning_curve(readouts, None, gold, folds_of(gold))
    assert curve["points"] and all(point["head"] is None for point in curve["points"])
    assert learning_curve(readouts, None, gold, [list(range(40))])["points"] == []
    assert np.isclose(curve["plain"]["accuracy"], np.mean(np.argmax(readouts, axis=1) == np.asarray(gold)))
