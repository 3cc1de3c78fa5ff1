"""The readout maths, tested directly on worked examples."""

import math

import pytest

from openjev.answering.answers import (
    NonFiniteLogprob,
    argmax_first,
    by_option,
    choice_answer,
    choice_confidence,
    entropy_confidence,
    noul_answer,
    renormalise,
    rotated_order,
    score_answer,
    score_confidence,
    sharpen,
    shift_offsets,
)
from openjev.answering.debias import combine_views
from openjev.options import ConfidenceMode, RotationAverage


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


def test_one_option_or_level_is_certain_in_every_confidence_mode():
    # Each formula is 0/0 at n = 1; its limit is 1 (the choice formula is 1 for m = 1 at every n).
    assert [choice_confidence([1.0]), score_confidence([1.0]), entropy_confidence([1.0])] == [1.0, 1.0, 1.0]
    assert [choice_confidence([1.0] + [0.0] * n) for n in (1, 2, 254)] == [1.0, 1.0, 1.0]
    for mode in ConfidenceMode:
        assert choice_answer(["only"], [-7.5], 1.0, mode) == {
            "type": "choice", "choice": "only", "probabilities": {"only": 1.0}, "confidence": 1.0
        }  # fmt: skip
        assert score_answer(["Calm"], [-3.0], 0.5, mode) == {
            "type": "score", "score": 0.0, "legend": {"0": "Calm"}, "probabilities": {"0": 1.0}, "confidence": 1.0
        }  # fmt: skip


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


def test_shift_offsets_spread_evenly_and_never_repeat():
    assert shift_offsets(4, 4) == [0, 1, 2, 3]
    assert shift_offsets(10, 4) == [0, 2, 5, 7]
    assert shift_offsets(2, 4) == [0, 1]
    assert shift_offsets(5, 1) == [0]
    assert rotated_order(4, 1) == [1, 2, 3, 0]


def test_rotations_are_averaged_in_probability_or_log_space_on_a_hand_example():
    # Two options, two rotations, a model that adds a preference for the first position.
    by_options = [by_option([math.log(0.8), math.log(0.2)], 0), by_option([math.log(0.6), math.log(0.4)], 1)]
    assert by_options[0] == pytest.approx([0.8, 0.2]) and by_options[1] == pytest.approx([0.4, 0.6])  # (b, a)
    assert combine_views(by_options, RotationAverage.probability) == pytest.approx([0.6, 0.4])
    a, b = math.sqrt(0.8 * 0.4), math.sqrt(0.2 * 0.6)
    assert combine_views(by_options, RotationAverage.log) == pytest.approx([a / (a + b), b / (a + b)])


def test_a_letter_pull_is_spread_over_the_options_by_every_rotation():
    # The model's readout = content x position prior: content (0.1, 0.2, 0.3, 0.4), prior favours A.
    content, position = [0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]
    views = []
    for offset in shift_offsets(4, 4):
        shown = rotated_order(4, offset)
        views.append(by_option([math.log(content[o] * position[j]) for j, o in enumerate(shown)], offset))
    assert argmax_first(views[0]) == 0  # one readout: the first letter wins
    for average in RotationAverage:
        assert argmax_first(combine_views(views, average)) == 3  # every option saw the pull once


def test_views_that_agree_average_to_themselves():
    view = [0.05, 0.6, 0.35]
    for average in RotationAverage:
        assert combine_views([view, view, view], average) == pytest.approx(view)
        assert combine_views([view], average) == view


def test_temperature_keeps_a_choice_and_moves_noul_and_score_answers():
    """calibration.py: a temperature never changes a choice's option, but it moves P(yes) and a
    score's expected level (towards 0.5 and the middle as T grows)."""
    logprobs = [-0.2, -1.0, -2.5, -4.0]
    choices = {t: choice_answer(list("abcd"), logprobs, t, ConfidenceMode.typesafe) for t in (0.5, 1.0, 2.0)}
    assert {answer["choice"] for answer in choices.values()} == {"a"}
    assert choices[0.5]["confidence"] > choices[1.0]["confidence"] > choices[2.0]["confidence"]
    levels = [score_answer([1, 2, 3, 4], logprobs, t, ConfidenceMode.typesafe)["score"] for t in (0.5, 1.0, 2.0, 100.0)]
    assert levels[0] < levels[1] < levels[2] < levels[3] and levels[3] == pytest.approx(1.5, abs=0.02)
    yes = [noul_answer([-0.3, -1.5], t)["noul"] for t in (0.5, 1.0, 2.0)]
    assert yes[0] > yes[1] > yes[2] > 0.5


def test_one_unrotated_readout_is_the_plain_readout():
    logprobs = [-0.5, -1.5, -3.0]
    assert by_option(logprobs, 0) == renormalise(logprobs)
    assert sharpen(renormalise(logprobs), 2.0) == pytest.approx(renormalise(logprobs, 2.0))
    assert sharpen([0.25, 0.75], 1.0) == [0.25, 0.75]
