"""A task's head (`tasks/head.py`) and the nested choice among plain, calibration and head
(`tasks/head_adoption.py`), on synthetic readouts and hidden states whose answers are known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from openjev.tasks import head_adoption
from openjev.tasks.adoption import cut, unit_ids
from openjev.tasks.head import MAX_VALUES, STRENGTHS, HeadError, RidgeHead, fit_head

LABELS = 4
WIDTH = 64


def problem(n: int, seed: int, signal: float, gold: list[int] | None = None):
    """Hidden states whose label shows in their mean (`signal` of the noise's scale), readouts that know
    nothing (random distributions)."""
    rng = np.random.default_rng(seed)
    gold = gold if gold is not None else [i % LABELS for i in range(n)]
    centres = rng.normal(size=(LABELS, WIDTH))
    hidden = centres[gold] * signal + rng.normal(size=(len(gold), WIDTH)) + 5.0  # an offset standardizing removes
    readouts = rng.dirichlet(np.ones(LABELS), size=len(gold))
    return hidden, readouts, gold


def folds_of(gold: list[int], k: int = 5) -> list[list[int]]:
    return cut(gold, unit_ids([None] * len(gold)), k)


def fitted(hidden: np.ndarray, readouts: np.ndarray, gold: list[int]) -> RidgeHead:
    return fit_head(hidden, np.log(readouts), gold, LABELS, folds_of(gold))


def test_a_head_learns_what_the_hidden_state_carries_and_the_readout_does_not() -> None:
    hidden, readouts, gold = problem(200, seed=1, signal=0.6)
    head = fitted(hidden[:120], readouts[:120], gold[:120])
    assert head.strength in STRENGTHS and 0 < head.temperature < math.inf
    answered = [head.probabilities(hidden[i], np.log(readouts[i])) for i in range(120, 200)]
    accuracy = np.mean([int(np.argmax(p)) == gold[120 + i] for i, p in enumerate(answered)])
    plain = np.mean(readouts[120:].argmax(axis=1) == np.asarray(gold[120:]))
    assert accuracy >= 0.9 and plain <= 0.45
    assert all(abs(sum(p) - 1) < 1e-9 for p in answered)


def test_without_a_signal_the_strongest_ridge_and_a_hot_temperature_are_chosen() -> None:
    hidden, readouts, gold = problem(80, seed=2, signal=0.0)
    head = fitted(hidden, readouts, gold)
    probabilities = head.probabilities(hidden[0], np.log(readouts[0]))
    # Nothing to learn: the held-out log-loss is best near uniform answers.
    assert max(probabilities) < 0.5


def test_a_stored_head_answers_the_same_and_every_check_holds() -> None:
    hidden, readouts, gold = problem(60, seed=3, signal=0.6)
    head = fitted(hidden, readouts, gold)
    stored = head.to_json()
    again = RidgeHead.from_json(stored, LABELS)
    assert again.probabilities(hidden[5], np.log(readouts[5])) == head.probabilities(hidden[5], np.log(readouts[5]))
    broken = {
        "kind": ({**stored, "kind": "lda"}, "kind 'ridge'"),
        "width": ({**stored, "hidden_size": 10**7}, f"more than {MAX_VALUES}"),
        "nan": ({**stored, "bias": [math.nan] * LABELS}, "bias must be"),
        "shape": ({**stored, "weights": stored["weights"][:-1]}, "weights must be"),
        "text": ({**stored, "mean": "x"}, "mean must be"),
        "temperature": ({**stored, "temperature": 0}, "temperature must be"),
        "sd": ({**stored, "sd": [0.0] * len(stored["sd"])}, "sd must be at least"),
        "layer": ({**stored, "layer": "middle"}, "final layer"),
    }
    for name, (value, reason) in broken.items():
        with pytest.raises(HeadError, match=reason):
            RidgeHead.from_json(value, LABELS)
        assert name
    with pytest.raises(HeadError, match="not"):
        head.probabilities(hidden[0][:10], np.log(readouts[0]))


def test_nested_adopts_the_head_where_it_wins_on_outer_folds() -> None:
    hidden, readouts, gold = problem(80, seed=4, signal=0.6)
    report = head_adoption.nested(readouts, hidden, gold, [None] * 80, folds_of(gold), 5)
    assert report["adopted"] and set(report["chosen_per_fold"]) == {"head"}
    assert report["chosen_accuracy"] >= 0.85 > 0.45 >= report["plain_accuracy"]
    assert report["difference"]["ci95"][0] > 0
    assert head_adoption.choose(readouts, hidden, gold, LABELS, folds_of(gold)) == "head"


def test_a_candidate_answering_one_label_for_everything_is_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    # 34 of 40 examples are label 0, the hidden state and readouts carry nothing: answering 0 for all
    # would be 85% accurate against a random plain readout's 25% or so, and worthless.
    gold = [0] * 34 + [1] * 3 + [2] * 3
    hidden, readouts, gold = problem(40, seed=5, signal=0.0, gold=gold)
    answers = {"same": np.zeros(40, dtype=int), "varied": np.arange(40) % 3}
    assert head_adoption.one_label(answers["same"], gold) and not head_adoption.one_label(answers["varied"], gold)
    report = head_adoption.nested(readouts, hidden, gold, [None] * 40, folds_of(gold, 3), 3)
    assert not report["one_label_for_all"] and "head" not in report["chosen_per_fold"]
    # Without the rule, the head that answers the majority for everything wins.
    monkeypatch.setattr(head_adoption, "one_label", lambda answers, gold: False)
    unguarded = head_adoption.nested(readouts, hidden, gold, [None] * 40, folds_of(gold, 3), 3)
    assert "head" in unguarded["chosen_per_fold"]
