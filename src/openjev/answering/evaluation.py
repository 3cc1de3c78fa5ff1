"""The journey's data between its stages: a request prepared (its shared prefix and one branch per
question view), and what evaluating it gave (answers, token counts, timings, the thinking tier's work).

`engine.py` makes and reads these; the API shapes an `Evaluation` into a response.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from openjev.answering.content_free import ContentFreePlan
from openjev.answering.readouts import AnyQuestion
from openjev.answering.thinking import Escalation
from openjev.answering.usage import Usage
from openjev.backends.base import LabelLogprobs
from openjev.request.images import ImageInput

#: Per question id, what rebuilds its answer after readout from the answer and the hidden state its
#: readout carried (None unless it asked): a task's calibration or head (`tasks/stage.py`).
Rewrites = Mapping[str, Callable[[dict[str, Any], np.ndarray | None], dict[str, Any]]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Branch:
    question_id: str
    question: AnyQuestion
    suffix_ids: list[int]
    label_token_ids: tuple[int, ...]
    #: The view shown in this branch (readouts.py): a choice's rotation, a score's reversed rubric; 0: as sent.
    offset: int = 0
    #: The images of the suffix's pads, in order; the positions they add beyond their pads.
    images: tuple[ImageInput, ...] = ()
    image_tokens: int = 0


def branches_of(
    planned: list[tuple[Any, ...]],
    suffixes: list[list[int]],
    images: list[tuple[ImageInput, ...]],
    extra: list[int],
) -> list[Branch]:
    """One branch per planned view (`QuestionViews.plan`): its suffix ids, and its images and the
    positions they add beyond their pads."""
    return [
        Branch(
            question_id=qid,
            question=question,
            suffix_ids=suffix,
            label_token_ids=ids,
            offset=offset,
            images=shown,
            image_tokens=more,
        )
        for (qid, question, offset, _, ids), suffix, shown, more in zip(planned, suffixes, images, extra, strict=True)
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedRequest:
    shared_prefix_ids: list[int]
    branches: list[Branch]
    #: The content-free readouts of the branches (contextual calibration), fixed when the budget was checked.
    content_free: ContentFreePlan
    #: The prompt tokens its thinking-tier escalations may compute: what the request budget leaves after the
    #: caller's text (`TokenBudget.check_first_pass`).
    tokens_left: int
    #: Names the conversation for rank affinity (`affinity.conversation_key`).
    affinity_key: int = 0
    #: The request names the thinking tier.
    thinking: bool = False
    #: The images of the shared prefix's pads, in order, and the positions they add beyond their pads.
    prefix_images: tuple[ImageInput, ...] = ()
    prefix_image_tokens: int = 0
    #: The request sent the long-context header: its calls are held to `Engine.long_budget`.
    long_context: bool = False
    #: How many of the shared prefix's ids a remembered conversation's prefix gave (the conversation memo).
    known_tokens: int = 0
    #: The answers `evaluate` rebuilds last (the questions a task rewrote).
    rewrites: Rewrites = field(default_factory=dict)
    #: The questions whose readout as sent (view 0) carries the hidden state at the answer position
    #: (`ReadoutCall.hidden_state`): a fit's plain readouts, a task's head. The others never ask.
    hidden: frozenset[str] = frozenset()

    @property
    def questions(self) -> dict[str, AnyQuestion]:
        return {branch.question_id: branch.question for branch in self.branches}


@dataclass(frozen=True, slots=True)
class Evaluation:
    answers: dict[str, dict[str, Any]]
    #: Prompt tokens sent to the backend over every call, and the tokens read or generated (openjev's work).
    input_tokens: int
    output_tokens: int
    prefix_tokens: int
    #: Sum of the branches' reused prompt tokens; None when the backend does not report them.
    cached_tokens: int | None
    prefill_seconds: float
    branches_seconds: float
    #: What the caller is billed (`usage.py`).
    usage: Usage
    #: The thinking tier's work; None for a request of the one-token tier.
    escalation: Escalation | None = None
    #: Per question, its readout's label mass and argmax (`diagnostics.py`), shown when a request asks.
    diagnostics: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Per question of `PreparedRequest.hidden`, the hidden state its readout as sent carried.
    hidden_states: dict[str, np.ndarray] = field(default_factory=dict)

    def rewritten(self, rewrites: Rewrites) -> Evaluation:
        """This evaluation with each rewritten question's answer rebuilt."""
        if not rewrites:
            return self
        answers = {
            key: rewrites[key](answer, self.hidden_states.get(key)) if key in rewrites else answer
            for key, answer in self.answers.items()
        }
        return replace(self, answers=answers)

    def escalated(self, escalation: Escalation) -> Evaluation:
        """This first pass with the thinking tier's new answers, and its calls counted."""
        cached, more = self.cached_tokens, escalation.cached_tokens
        return replace(
            self,
            answers={**self.answers, **escalation.answers},
            input_tokens=self.input_tokens + escalation.input_tokens,
            output_tokens=self.output_tokens + escalation.output_tokens,
            cached_tokens=None if cached is None or more is None else cached + more,
            usage=self.usage.with_reasoning(escalation.reasoning_tokens),
            escalation=escalation,
        )


def hidden_states(branches: Sequence[Branch], results: Sequence[object]) -> dict[str, np.ndarray]:
    """Per question, the hidden state its readout as sent (view 0) carried, where it asked for one."""
    return {
        branch.question_id: result.hidden_state
        for branch, result in zip(branches, results, strict=True)
        if branch.offset == 0 and isinstance(result, LabelLogprobs) and result.hidden_state is not None
    }
