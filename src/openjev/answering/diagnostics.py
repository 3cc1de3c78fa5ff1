"""Per question, how much of the model's next-token distribution its labels held (vLLM 0.34's
`diagnostics: {label_mass, argmax_is_label}`), shown when a request asks (`x_diagnostics: true`).

Both are read from the question's readout as sent (view 0: a choice's options in their order, a
score's rubric as sent), before any renormalisation, calibration or temperature:

    label_mass      = sum over the labels l of exp(log P(first token = l | prompt))

where each log-probability is a log-softmax over the whole vocabulary (`backends/base.py`), so
label_mass is in [0, 1] and 1 - label_mass is the mass the model put on tokens that are no label;

    argmax_is_label = whether the most probable first token over the whole vocabulary is a label

(null where the backend does not say which token that is). A box has no label readout and gets
none. A question the thinking tier re-answered keeps its first readout's figures: they describe
how the one-token tier found the question.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

from openjev.backends.base import LabelLogprobs


class ReadBranch(Protocol):
    """A branch as read: its question, its view and the ids it read."""

    question_id: str
    offset: int
    label_token_ids: tuple[int, ...]


def label_diagnostics(branch: ReadBranch, result: LabelLogprobs) -> dict[str, Any]:
    """`{label_mass, argmax_is_label}` of one readout."""
    mass = math.fsum(math.exp(logprob) for logprob in result.logprobs)
    top = result.top_token
    return {
        "label_mass": min(1.0, mass),
        "argmax_is_label": None if top is None else top in branch.label_token_ids,
    }


def question_diagnostics(branches: Sequence[ReadBranch], results: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Per question id, the diagnostics of its readout as sent; boxes (whose result is no
    `LabelLogprobs`) have none."""
    return {
        branch.question_id: label_diagnostics(branch, result)
        for branch, result in zip(branches, results, strict=True)
        if branch.offset == 0 and isinstance(result, LabelLogprobs)
    }


def with_diagnostics(answers: dict[str, dict[str, Any]], diagnostics: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each answer with its question's `diagnostics` added where it has some."""
    return {
        key: {**answer, "diagnostics": diagnostics[key]} if key in diagnostics else answer
        for key, answer in answers.items()
    }
