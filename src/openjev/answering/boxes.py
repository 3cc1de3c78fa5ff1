"""A box question's answer from one short constrained generation: each edge's expected position.

The model writes its grounding answer in its own format, `{"bbox_2d": [x1, y1, x2, y2]}`, one token
per digit; the frame is forced and only the digits are free, generated greedily while the logprobs of
the ten digit ids are read at every generated position. An edge is the number at one of the four
places: its greedy digits g_1 .. g_L (L digits, most significant first) and, at each digit position
k, the distribution p_k over the ten digits (softmax of their logprobs, renormalised over the digits).

Expected value. The number is V = sum_k 10^(L-k) d_k, so

    E[V] ~ sum_k 10^(L-k) sum_d d p_k(d),

where p_k is the model's distribution at position k *given the greedy digits before it*. That is the
expectation along the greedy path: exact for the first digit, and for a later digit exact on the event
that the digits before it are greedy. With P_k = prod_{j<k} p_j(g_j) the probability of that event,
|E[d_k] - sum_d d p_k(d)| <= 9 (1 - P_k) (a digit lies in [0, 9] whatever the earlier digits were), so

    |error| <= sum_{k=2..L} 10^(L-k) 9 (1 - P_k)                       (`Edge.error_bound`).

The number's length is taken as generated (L); a digit position's probability of ending the number
there instead is not in the sum. The value maps to a fraction of the image side by the model's
grounding scale (`vision.GroundingScale`: Qwen3-VL writes 0-1000 relative to the image; Qwen2.5-VL absolute
pixels of the image as its processor resized it), clamped to [0, 1]; left <= right and top <= bottom
(a pair the model wrote the other way round is sorted).

Confidence. Treating the digit positions as independent, Var[V] ~ sum_k 10^(2(L-k)) Var_k[d]; an
edge's spread is sigma = sqrt(Var[V]) / scale, a fraction of the image side, and

    confidence = exp(-20 * mean of the four sigmas),

so a box whose edges are each uncertain by a twentieth of the image gets e^-1 ~ 0.37, a certain one 1.
`confidence` is None where the backend gave no digit distributions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DIGITS = "0123456789"
#: How sharply confidence falls with the edges' mean spread (a fraction of the image side).
CONFIDENCE_RATE = 20.0


def digit_distribution(logprobs: Sequence[float]) -> list[float]:
    """The ten digits' logprobs (index = digit) renormalised into probabilities."""
    top = max(logprobs)
    weights = [math.exp(value - top) for value in logprobs]
    total = sum(weights)
    return [weight / total for weight in weights]


@dataclass(frozen=True, slots=True)
class Edge:
    """One number of the box: its greedy digits and, per digit, the distribution over the ten digits
    (none where the backend gave no logprobs: the number is then read as generated)."""

    digits: tuple[int, ...]
    distributions: tuple[tuple[float, ...], ...]

    @property
    def greedy(self) -> int:
        return int("".join(map(str, self.digits)))

    @property
    def expected(self) -> float:
        if not self.distributions:
            return float(self.greedy)
        places = len(self.digits)
        return sum(
            10 ** (places - 1 - k) * sum(d * p for d, p in enumerate(dist)) for k, dist in enumerate(self.distributions)
        )

    @property
    def variance(self) -> float:
        places, total = len(self.digits), 0.0
        for k, dist in enumerate(self.distributions):
            mean = sum(d * p for d, p in enumerate(dist))
            total += 10 ** (2 * (places - 1 - k)) * sum((d - mean) ** 2 * p for d, p in enumerate(dist))
        return total

    @property
    def error_bound(self) -> float:
        """The bound on `expected`'s distance from the expectation at this length (module doc)."""
        places, bound, on_path = len(self.digits), 0.0, 1.0
        for k in range(1, places):
            on_path *= self.distributions[k - 1][self.digits[k - 1]]
            bound += 10 ** (places - 1 - k) * 9 * (1 - on_path)
        return bound


def edges_of(text_digits: Sequence[tuple[int, ...]], distributions: Sequence[Sequence[Sequence[float]]]) -> list[Edge]:
    """The four edges from their greedy digits and, per edge and digit, the ten digits' logprobs."""
    if len(text_digits) != 4 or len(distributions) != 4:
        raise ValueError("a box has four numbers")
    return [
        Edge(tuple(digits), tuple(tuple(digit_distribution(logprobs)) for logprobs in per_digit))
        for digits, per_digit in zip(text_digits, distributions, strict=True)
    ]


def _fraction(value: float, scale: float) -> float:
    return min(1.0, max(0.0, value / scale))


def box_answer(edges: Sequence[Edge], scales: tuple[float, float]) -> dict[str, Any]:
    """The Jev box answer of the edges x1, y1, x2, y2; `scales`: (width, height) of the coordinate
    space (1000, 1000 for relative coordinates; the resized image's pixels for absolute ones). Edges
    without distributions (a backend that gives none) are read as generated, with no confidence."""
    width, height = scales
    x1, y1, x2, y2 = edges
    left, right = sorted((_fraction(x1.expected, width), _fraction(x2.expected, width)))
    top, bottom = sorted((_fraction(y1.expected, height), _fraction(y2.expected, height)))
    confidence = None
    if all(edge.distributions for edge in edges):
        spreads = [math.sqrt(edge.variance) / scale for edge, scale in zip(edges, (width, height) * 2, strict=True)]
        confidence = math.exp(-CONFIDENCE_RATE * sum(spreads) / len(spreads))
    return {
        "type": "box",
        "box": {"top": top, "bottom": bottom, "left": left, "right": right},
        "confidence": confidence,
    }
