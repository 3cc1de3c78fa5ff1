"""The readout maths, tested directly on worked examples."""

import math

import pytest

from openjev.answers import (
    NonFiniteLogprob,
    argmax_first,
    choice_answer,
    choice_confidence,
    entropy_confidence,
    noul_answer,
    renormalise,
    score_answer,
    score_confidence,
)
from openjev.config import ConfidenceMode


def test_renormalise_matches_softmax_and_is_stable_for_huge_magnitudes():
    probs = renormalise([math.log(0.2), math.log(0.6)])
    assert probs == pytest.approx([0.25, 0.75])
    # Exponentiating these directly would underflow to 0/0.
    far = renormalise([-1000.0, -1001.0])
    assert far == pytest.approx([1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1))])


def test_temperature_divides_logprobs():
    hot = renormalise([0.0, -1.0], temperature=2.0)
    assert hot[0] == pytest.approx(1 / (1 + math.exp(-0.5)))


def test_impossible_labels_get_zero_and_all_impossible_is_uniform():
    float32_floor = -3.4028234663852886e38
    assert renormalise([-0.5, float32_floor, -math.inf]) == [1.0, 0.0, 0.0]
    assert renormalise([-math.inf, -math.inf]) == [0.5, 0.5]


def test_nan_logprob_is_refused():
    with pytest.raises(NonFiniteLogprob):
        renormalise([-1.0, math.nan])
    with pytest.raises(NonFiniteLogprob):
        renormalise([-1.0, math.inf])


def test_ties_go_to_the_first_option_in_request_order():
    assert argmax_first([0.25, 0.5, 0.5, 0.25]) == 1
    answer = choice_answer(["b", "a"], [-1.0, -1.0], 1.0, ConfidenceMode.typesafe)
    assert answer["choice"] == "b"


def test_choice_confidence_official_worked_examples():
    assert choice_confidence([0.5, 0.5]) == 0.0
    assert choice_confidence([1.0, 0.0, 0.0]) == 1.0
    # (0.7 - 1/3) / (1 - 1/3) = 0.55
    assert choice_confidence([0.7, 0.2, 0.1]) == pytest.approx(0.55)


def test_score_confidence_official_definition():
    # n = 3: D = (1 + 0 + 1) / 3; mass 0.2 at distance 1 from k = 1.
    probs = [0.1, 0.8, 0.1]
    assert score_confidence(probs) == pytest.approx(1 - 0.2 / (2 / 3))
    assert score_confidence([0.0, 0.0, 1.0]) == 1.0
    # Mass far from the mode clamps at 0 rather than going negative.
    assert score_confidence([0.34, 0.0, 0.0, 0.33, 0.33]) == 0.0


def test_entropy_confidence_bounds():
    assert entropy_confidence([0.25] * 4) == pytest.approx(0.0, abs=1e-12)
    assert entropy_confidence([1.0, 0.0]) == 1.0


def test_noul_reads_probability_of_yes():
    answer = noul_answer([math.log(0.9), math.log(0.1)], 1.0)
    assert answer == {"type": "noul", "noul": pytest.approx(0.9)}
    assert set(answer) == {"type", "noul"}


def test_score_is_expected_level_of_the_returned_probabilities():
    levels = ["low", {"text": "mid"}, ["high"]]
    answer = score_answer(levels, [math.log(0.2), math.log(0.3), math.log(0.5)], 1.0, ConfidenceMode.entropy)
    probs = answer["probabilities"]
    assert list(probs) == ["0", "1", "2"]
    assert answer["score"] == pytest.approx(sum(int(k) * v for k, v in probs.items()), abs=1e-15)
    assert answer["legend"] == {"0": "low", "1": {"text": "mid"}, "2": ["high"]}
    assert math.fsum(probs.values()) == pytest.approx(1.0)


def test_choice_probabilities_keyed_by_exact_option_names():
    names = ["naïve café", "日本語", "a.b-c d"]
    answer = choice_answer(names, [-3.0, -1.0, -2.0], 1.0, ConfidenceMode.typesafe)
    assert list(answer["probabilities"]) == names
    assert answer["choice"] == "日本語"
    assert 0.0 <= answer["confidence"] <= 1.0
