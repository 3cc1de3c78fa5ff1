"""Jev answers in OpenAI's Decisions shape (`openai/types/decision.py` of the 3.63.0 SDK).

`decision_payload` turns one evaluation's answers (keyed by question position, `request/decisions.py`)
into the `Decision` body, answers in question order:
- noul → `{"type": "predicate", "name", "probability"}` (the probability of yes);
- choice → `{"type": "choice", "name", "choice", "confidence", "probabilities": [{"value",
  "probability"}]}`, values in the caller's type (a boolean stays a boolean), in request order;
- score → `{"type": "score", "name", "score", "confidence", "probabilities": [{"value": i, "label",
  "probability"}]}`, levels low to high.
`name` is the question's, null when it had none. Every question gets its typed answer: openjev never
answers a refusal.

Usage: `input_tokens` and `output_tokens` as `/v1/systemone` counts them (`usage.py`: what the caller
sent, once); `cached_tokens`, the part of `input_tokens` the backend held from earlier requests (0
where it reports none); `cache_write_tokens` 0 (no cache write is billed); `reasoning_tokens`, what the
thinking tier generated (within `output_tokens`); `total_tokens`, their sum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from openjev.answering.usage import Usage
from openjev.request.decisions import AskedQuestion


def decision_answer(answer: Mapping[str, Any], asked: AskedQuestion) -> dict[str, Any]:
    kind = answer["type"]
    if kind == "noul":
        return {"type": "predicate", "name": asked.name, "probability": answer["noul"]}
    probabilities = answer["probabilities"]
    if kind == "choice":
        return {
            "type": "choice",
            "name": asked.name,
            "choice": asked.value_of(answer["choice"]),
            "confidence": answer["confidence"],
            "probabilities": [
                {"value": asked.value_of(key), "probability": probability} for key, probability in probabilities.items()
            ],
        }
    return {
        "type": "score",
        "name": asked.name,
        "score": answer["score"],
        "confidence": answer["confidence"],
        "probabilities": [
            {"value": int(key), "label": asked.labels[int(key)], "probability": probability}
            for key, probability in probabilities.items()
        ],
    }


def _with_diagnostics(answer: Mapping[str, Any], asked: AskedQuestion) -> dict[str, Any]:
    """`decision_answer`, with the answer's `diagnostics` where it carries them (`x_diagnostics`)."""
    shaped = decision_answer(answer, asked)
    return {**shaped, "diagnostics": answer["diagnostics"]} if "diagnostics" in answer else shaped


def decision_usage(usage: Usage, reasoning: int) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens or 0, "cache_write_tokens": 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def decision_payload(
    model: str, answers: Mapping[str, Mapping[str, Any]], asked: Sequence[AskedQuestion], usage: dict[str, Any]
) -> dict[str, Any]:
    """`answers` keyed by question position ("0", "1", ...), one per entry of `asked`."""
    return {
        "model": model,
        "answers": [_with_diagnostics(answers[str(index)], about) for index, about in enumerate(asked)],
        "usage": usage,
    }
