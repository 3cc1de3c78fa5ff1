"""From label log-probabilities to typed answers. Pure functions, no I/O.

Renormalisation over the n labels of one question, with temperature T:

    p_i = exp((l_i - m) / T) / sum_j exp((l_j - m) / T),   m = max_j l_j

Subtracting the maximum keeps every exponent <= 0, so nothing overflows; a label the backend
reports as impossible (-inf, or SGLang's float32 floor) gets probability 0. If every label is
impossible the model expressed no preference and the distribution is uniform.

Confidence, `typesafe` (the official definition), for n options and probabilities p:
- choice: (m - 1/n) / (1 - 1/n) with m = max p_i;
- score, most likely level k: max(0, 1 - sum_i p_i |i - k| / D), D = (1/n) sum_i |i - (n-1)/2|,
  the mean distance of a uniform distribution from its centre.
Confidence, `entropy`: 1 - H(p) / log n with H(p) = -sum_i p_i log p_i.
Both are clamped to [0, 1]; every returned number is finite. With one option or level (n = 1) every
formula is 0/0 and its value is its limit, 1: the one outcome has probability 1, no spread and no
entropy, so it is certain (the choice formula is 1 for m = 1 at every n > 1 too).

Option rotations (choice questions, `OPENJEV_OPTION_SHIFTS=K`): the options are shown in K cyclic
rotations, spread evenly over the n positions (`shift_offsets`: s_j = floor(j n / K), j < min(K, n)).
Under shift s, position j shows option (j + s) mod n, so option o sits at position (o - s) mod n;
`by_option` maps a rotation's renormalised readout (T = 1) back to the options, q_s(o). The views are
then combined by averaging (`debias.combine_views`), and nothing else: an average of views that agree
is that view, so a model with no letter bias is served what a single readout serves.

Temperature comes last: p_T(o) ∝ p(o)^(1/T). With K = 1 this is exactly renormalise(logprobs, T), the
plain readout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from openjev.options import ConfidenceMode


class NonFiniteLogprob(ValueError):
    """The backend returned NaN (or +inf) for a label: its answer cannot be trusted."""


def renormalise(logprobs: Sequence[float], temperature: float = 1.0) -> list[float]:
    if any(math.isnan(value) or value == math.inf for value in logprobs):
        raise NonFiniteLogprob(f"label logprobs must be finite or -inf, got {list(logprobs)}")
    top = max(logprobs)
    if top == -math.inf:
        return [1.0 / len(logprobs)] * len(logprobs)
    weights = [math.exp((value - top) / temperature) for value in logprobs]
    total = math.fsum(weights)
    return [weight / total for weight in weights]


PROBABILITY_FLOOR = 1e-12


def shift_offsets(option_count: int, shifts: int) -> list[int]:
    """The cyclic shifts used for `shifts` rotations of `option_count` options, spread evenly."""
    count = max(1, min(shifts, option_count))
    return [j * option_count // count for j in range(count)]


def rotated_order(option_count: int, offset: int) -> list[int]:
    """Original option indices in the order shown under `offset`: position j shows (j + offset) mod n."""
    return [(position + offset) % option_count for position in range(option_count)]


def sharpen(probabilities: Sequence[float], temperature: float) -> list[float]:
    """p^(1/T), renormalised; T = 1 returns the distribution as it is."""
    if temperature == 1.0:
        return list(probabilities)
    return renormalise([math.log(p) if p > 0 else -math.inf for p in probabilities], temperature)


def _clamp_unit(value: float) -> float:
    return min(1.0, max(0.0, value))


def argmax_first(probabilities: Sequence[float]) -> int:
    """Index of the largest probability; ties go to the first in request order."""
    best = 0
    for index, value in enumerate(probabilities):
        if value > probabilities[best]:
            best = index
    return best


def entropy_confidence(probabilities: Sequence[float]) -> float:
    n = len(probabilities)
    if n == 1:
        return 1.0  # the limit (module doc)
    entropy = -math.fsum(p * math.log(p) for p in probabilities if p > 0)
    return _clamp_unit(1.0 - entropy / math.log(n))


def choice_confidence(probabilities: Sequence[float]) -> float:
    n = len(probabilities)
    if n == 1:
        return 1.0
    return _clamp_unit((max(probabilities) - 1.0 / n) / (1.0 - 1.0 / n))


def score_confidence(probabilities: Sequence[float]) -> float:
    n = len(probabilities)
    if n == 1:
        return 1.0
    k = argmax_first(probabilities)
    centre = (n - 1) / 2
    uniform_spread = math.fsum(abs(i - centre) for i in range(n)) / n
    spread = math.fsum(p * abs(i - k) for i, p in enumerate(probabilities))
    return _clamp_unit(1.0 - spread / uniform_spread)


def noul_answer(logprobs: Sequence[float], temperature: float) -> dict[str, Any]:
    """`logprobs` is (yes, no)."""
    p_yes, _ = renormalise(logprobs, temperature)
    return {"type": "noul", "noul": _clamp_unit(p_yes)}


def choice_answer(
    option_names: Sequence[str], logprobs: Sequence[float], temperature: float, mode: ConfidenceMode
) -> dict[str, Any]:
    return choice_from_probabilities(option_names, renormalise(logprobs, temperature), mode)


def by_option(logprobs: Sequence[float], offset: int) -> list[float]:
    """A rotation's readout (label logprobs by shown position under `offset`) as probabilities of the
    options in their original order."""
    by_position = renormalise(logprobs)
    probabilities = [0.0] * len(by_position)
    for position, option in enumerate(rotated_order(len(by_position), offset)):
        probabilities[option] = by_position[position]
    return probabilities


def choice_from_probabilities(
    option_names: Sequence[str], probabilities: Sequence[float], mode: ConfidenceMode
) -> dict[str, Any]:
    confidence = (
        choice_confidence(probabilities) if mode is ConfidenceMode.typesafe else entropy_confidence(probabilities)
    )
    return {
        "type": "choice",
        "choice": option_names[argmax_first(probabilities)],
        "probabilities": dict(zip(option_names, probabilities, strict=True)),
        "confidence": confidence,
    }


def score_answer(
    levels: Sequence[Any], logprobs: Sequence[float], temperature: float, mode: ConfidenceMode
) -> dict[str, Any]:
    probabilities = renormalise(logprobs, temperature)
    confidence = (
        score_confidence(probabilities) if mode is ConfidenceMode.typesafe else entropy_confidence(probabilities)
    )
    return {
        "type": "score",
        "score": math.fsum(i * p for i, p in enumerate(probabilities)),
        "legend": {str(i): level for i, level in enumerate(levels)},
        "probabilities": {str(i): p for i, p in enumerate(probabilities)},
        "confidence": confidence,
    }
