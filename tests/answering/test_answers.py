"""The readout maths, tested directly on worked examples."""

import math

import pytest

from openjev.answering.answers import (
    NonFiniteLogprob,
    argmax_first,
    choice_answer,
    choice_confidence,
    combine_shifts,
    entropy_confidence,
    noul_answer,
    renormalise,
    rotated_order,
    score_answer,
    score_confidence,
    sharpen,
    shift_offsets,
    shifted_choice_answer,
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


def test_average_and_prior_on_a_hand_example():
    # Two options, two rotations, a model that adds a preference for the first position.
    by_option = [[0.8, 0.2], [0.4, 0.6]]  # rotation 0 shows (a, b); rotation 1 shows (b, a)
    assert combine_shifts(by_option, [0, 1], prior=False) == pytest.approx([0.6, 0.4])
    # Position priors: pi(0) = sqrt(0.8 * 0.6), pi(1) = sqrt(0.2 * 0.4); dividing them out of each
    # rotation gives a: 0.8/pi0 vs b: 0.2/pi1 in rotation 0, the same odds in rotation 1.
    pi0, pi1 = math.sqrt(0.8 * 0.6), math.sqrt(0.2 * 0.4)
    odds = (0.8 / pi0) / (0.2 / pi1)
    assert combine_shifts(by_option, [0, 1], prior=True) == pytest.approx([odds / (1 + odds), 1 / (1 + odds)])


def test_a_pure_letter_prior_is_removed_by_the_prior_correction():
    # The model's readout = content x position prior: content (0.1, 0.2, 0.3, 0.4), prior favours A.
    content, position = [0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]
    readouts, offsets = [], shift_offsets(4, 4)
    for offset in offsets:
        shown = rotated_order(4, offset)
        readouts.append([math.log(content[o] * position[j]) for j, o in enumerate(shown)])
    answer = shifted_choice_answer(list("abcd"), readouts, offsets, True, 1.0, ConfidenceMode.typesafe)
    assert list(answer["probabilities"].values()) == pytest.approx(content)
    biased = choice_answer(list("abcd"), readouts[0], 1.0, ConfidenceMode.typesafe)
    assert biased["choice"] == "a" and answer["choice"] == "d"


def test_the_prior_can_change_the_letter_even_with_every_rotation():
    """README: with 4 options and all 4 rotations the prior correction is not a mere re-weighting:
    each rotation is renormalised after the division and the rotations averaged arithmetically."""
    rows = [[0.05, 0.55, 0.15, 0.95], [0.75, 0.75, 0.75, 0.05], [0.05, 0.65, 1.05, 0.95], [0.75, 0.75, 0.25, 0.85]]
    by_option = [[value / sum(row) for value in row] for row in rows]
    offsets = shift_offsets(4, 4)
    assert argmax_first(combine_shifts(by_option, offsets, prior=False)) == 3
    assert argmax_first(combine_shifts(by_option, offsets, prior=True)) == 1


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


def test_one_unrotated_readout_is_the_plain_answer():
    logprobs = [-0.5, -1.5, -3.0]
    plain = choice_answer(list("xyz"), logprobs, 2.0, ConfidenceMode.entropy)
    shifted = shifted_choice_answer(list("xyz"), [logprobs], [0], False, 2.0, ConfidenceMode.entropy)
    assert shifted["choice"] == plain["choice"]
    assert list(shifted["probabilities"].values()) == pytest.approx(list(plain["probabilities"].values()))
    assert sharpen([0.25, 0.75], 1.0) == [0.25, 0.75]
