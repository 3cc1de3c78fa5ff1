"""A task's head (`tasks/head.py`) and the nested choice among plain, calibration and head
(`tasks/adoption.py`, `tasks/head_adoption.py`), on synthetic readouts and hidden states whose answers are known."""

from __future__ import annotations

import base64
import json
import math

import numpy as np
import pytest

from openjev.tasks import adoption, head_adoption
from openjev.tasks.adoption import HEAD, Candidate, cut, unit_ids
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


def packed(values: np.ndarray) -> str:
    """An array as a stored head keeps it: float32, little-endian, base64."""
    return base64.b64encode(np.asarray(values, "<f4").tobytes()).decode()


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
    # Kept as float32: the same answers to float32's precision, and a small file.
    assert again.probabilities(hidden[5], np.log(readouts[5])) == pytest.approx(
        head.probabilities(hidden[5], np.log(readouts[5])), abs=1e-5
    )
    assert len(json.dumps(stored)) < 6 * (WIDTH + LABELS) * (LABELS + 2) + 300
    broken = {
        "kind": ({**stored, "kind": "lda"}, "kind 'ridge'"),
        "width": ({**stored, "hidden_size": 10**7}, f"more than {MAX_VALUES}"),
        "nan": ({**stored, "bias": packed(np.full(LABELS, np.nan))}, "finite"),
        "list": ({**stored, "bias": [0.0] * LABELS}, "bias must be"),
        "base64": ({**stored, "bias": "!" * len(stored["bias"])}, "bias must be"),
        "shape": ({**stored, "weights": stored["weights"][:-1]}, "weights must be"),
        "text": ({**stored, "mean": "x"}, "mean must be"),
        "temperature": ({**stored, "temperature": 0}, "temperature must be"),
        "sd": ({**stored, "sd": packed(np.zeros(WIDTH + LABELS))}, "sd must be at least"),
        "layer": ({**stored, "layer": "middle"}, "final layer"),
    }
    for name, (value, reason) in broken.items():
        with pytest.raises(HeadError, match=reason):
            RidgeHead.from_json(value, LABELS)
        assert name
    with pytest.raises(HeadError, match="not"):
        head.probabilities(hidden[0][:10], np.log(readouts[0]))


CANDIDATES = [Candidate(0, True), HEAD]


def nested(readouts: np.ndarray, hidden: np.ndarray, gold: list[int], k: int) -> dict:
    """The adoption's nested report with one readout (w = 0) per example, calibration and head the candidates."""
    return adoption.nested(
        readouts[:, None, :].tolist(), gold, [None] * len(gold), folds_of(gold, k), CANDIDATES, k, hidden
    )


def test_nested_adopts_the_head_where_it_wins_on_outer_folds() -> None:
    hidden, readouts, gold = problem(80, seed=4, signal=0.6)
    report = nested(readouts, hidden, gold, 5)
    assert report["adopted"] and all(pick["head"] for pick in report["chosen_per_fold"])
    assert report["chosen"]["accuracy"] >= 0.85 > 0.45 >= report["plain"]["accuracy"]
    assert report["difference"]["ci95"][0] > 0
    chosen = adoption.choose(readouts[:, None, :].tolist(), gold, folds_of(gold), CANDIDATES, hidden)
    assert chosen == HEAD


def test_without_hidden_states_no_head_is_chosen() -> None:
    _, readouts, gold = problem(80, seed=4, signal=0.6)
    assert adoption.choose(readouts[:, None, :].tolist(), gold, folds_of(gold), [Candidate(0, True)]) != HEAD
    with pytest.raises(ValueError, match="hidden states"):
        adoption.choose(readouts[:, None, :].tolist(), gold, folds_of(gold), CANDIDATES)


def test_a_candidate_answering_one_label_for_everything_is_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    # 34 of 40 examples are label 0, the hidden state and readouts carry nothing: answering 0 for all
    # would be 85% accurate against a random plain readout's 25% or so, and worthless.
    gold = [0] * 34 + [1] * 3 + [2] * 3
    hidden, readouts, gold = problem(40, seed=5, signal=0.0, gold=gold)
    assert head_adoption.one_label([0] * 40, gold) and not head_adoption.one_label([i % 3 for i in range(40)], gold)
    report = nested(readouts, hidden, gold, 3)
    assert not report["one_label_for_all"] and max(report["chosen"]["predicted_counts"]) < 40
    assert not any(pick["head"] for pick in report["chosen_per_fold"])
    # Without the rule, a candidate that answers the majority for everything wins.
    monkeypatch.setattr(head_adoption, "one_label", lambda answers, gold: False)
    unguarded = nested(readouts, hidden, gold, 3)
    assert all(pick["head"] for pick in unguarded["chosen_per_fold"])
    assert unguarded["chosen"]["predicted_counts"] == [40, 0, 0, 0]
