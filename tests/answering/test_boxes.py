"""The box readout's maths (answering/boxes.py), checked against sums written out by hand."""

from __future__ import annotations

import math

import pytest

from openjev.answering.boxes import Edge, box_answer, digit_distribution, edges_of


def one_hot(digit: int, mass: float = 1.0) -> tuple[float, ...]:
    rest = (1 - mass) / 9
    return tuple(mass if d == digit else rest for d in range(10))


def test_digit_logprobs_are_renormalised_over_the_ten_digits() -> None:
    probabilities = digit_distribution([math.log(0.2), math.log(0.2)] + [math.log(0.05)] * 8)
    assert probabilities[:2] == pytest.approx([0.25, 0.25]) and sum(probabilities) == pytest.approx(1)


def test_a_certain_edge_is_its_number_with_no_spread() -> None:
    edge = Edge((4, 2, 7), (one_hot(4), one_hot(2), one_hot(7)))
    assert edge.greedy == 427 and edge.expected == pytest.approx(427) and edge.variance == pytest.approx(0)
    assert edge.error_bound == pytest.approx(0)


def test_the_expectation_along_the_greedy_path_by_hand() -> None:
    # "35": the tens digit is 3 (0.6) or 4 (0.4); the units digit 5 (0.5) or 0 (0.5).
    tens = tuple(0.6 if d == 3 else 0.4 if d == 4 else 0.0 for d in range(10))
    units = tuple(0.5 if d in (5, 0) else 0.0 for d in range(10))
    edge = Edge((3, 5), (tens, units))
    assert edge.expected == pytest.approx(10 * (3 * 0.6 + 4 * 0.4) + (5 * 0.5))  # 36.5
    tens_var = 0.6 * (3 - 3.4) ** 2 + 0.4 * (4 - 3.4) ** 2
    assert edge.variance == pytest.approx(100 * tens_var + 6.25)
    # The units digit is read given a greedy tens digit (probability 0.6): off by at most 9 x 0.4.
    assert edge.error_bound == pytest.approx(9 * 0.4)


def test_a_box_maps_to_fractions_sorted_and_clamped_with_its_confidence() -> None:
    digits = [(1, 0, 0), (2, 0, 0), (9, 0, 0), (5, 0)]
    certain = [[one_hot(d) for d in number] for number in digits]
    edges = edges_of(
        digits, [[[math.log(p) if p else -math.inf for p in dist] for dist in number] for number in certain]
    )
    answer = box_answer(edges, (1000, 1000))
    assert answer["box"] == pytest.approx({"left": 0.1, "right": 0.9, "top": 0.05, "bottom": 0.2})
    assert answer["type"] == "box" and answer["confidence"] == pytest.approx(1.0)
    # Absolute pixels of a 448 x 224 image: x over 448, y over 224, clamped to [0, 1].
    pixels = box_answer([Edge((5, 0, 0), ()), Edge((1, 1, 2), ()), Edge((2, 2, 4), ()), Edge((0,), ())], (448, 224))
    assert pixels["box"] == pytest.approx({"left": 0.5, "right": 1.0, "top": 0.0, "bottom": 0.5})
    assert pixels["confidence"] is None


def test_confidence_falls_with_the_spread() -> None:
    spread = tuple(0.1 for _ in range(10))  # a uniform digit: sd 2.87 of its place
    sure = [Edge((5, 0, 0), (one_hot(5), one_hot(0), one_hot(0))) for _ in range(4)]
    unsure = [Edge((5, 0, 0), (one_hot(5), spread, one_hot(0))) for _ in range(4)]
    sigma = math.sqrt(100 * 8.25) / 1000
    assert box_answer(unsure, (1000, 1000))["confidence"] == pytest.approx(math.exp(-20 * sigma))
    assert box_answer(sure, (1000, 1000))["confidence"] > box_answer(unsure, (1000, 1000))["confidence"]
