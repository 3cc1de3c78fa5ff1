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
Both are clamped to [0, 1]; every returned number is finite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from openjev.config import ConfidenceMode


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
    entropy = -math.fsum(p * math.log(p) for p in probabilities if p > 0)
    return _clamp_unit(1.0 - entropy / math.log(n))


def choice_confidence(probabilities: Sequence[float]) -> float:
    n = len(probabilities)
    return _clamp_unit((max(probabilities) - 1.0 / n) / (1.0 - 1.0 / n))


def score_confidence(probabilities: Sequence[float]) -> float:
    n = len(probabilities)
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
    probabilities = renormalise(logprobs, temperature)
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
