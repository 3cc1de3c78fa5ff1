"""The thinking tier: think when unsure, within a share cap, then read the answer as usual.

A request naming OPENJEV_THINK_MODEL is first answered exactly like any other (the one-token readout).
Then:

1. Who escalates (`EscalationPolicy`, pure: `escalation.py`): questions whose top-two margin is
   below OPENJEV_THINK_MARGIN, least confident first, within OPENJEV_THINK_MAX_SHARE of the window.
2. How it thinks (`Thinker`). Call 1 (`Backend.generate`, greedy) decodes at most the budget
   (OPENJEV_THINK_BUDGET_TOKENS, else the backend's default) after the shared prefix and the
   question turn. Where the chat template has a thinking mode (it reads `enable_thinking` and the
   vocabulary has `</think>`), the turn is rendered with thinking on and call 1 stops at the
   think-close id read from the tokenizer; otherwise the question asks for brief step-by-step
   reasoning first and call 1 stops at the end of the turn. Call 2 is a readout of call 1's prompt +
   its generated ids (never re-tokenised text), minus a trailing end-of-turn id, + the think-close id
   if it is not there yet (thinking mode: the budget ran out) + the tail that follows the thinking
   block in the one-token prompt (`\n\n` and the answer cue); prompted mode appends `\n\n` + cue.
   The budget shrinks to keep call 2 within the branch limit; a question with no room keeps its answer.
   An escalated question thinks once per view its first pass read (`reading`: `Reading.views`), and
   each call 2 readout goes to the answer with that view's content-free prior: the same corrections
   as the first pass.
3. Bounded. Both calls hold the engine's backend slots and run before the request's deadline
   (OPENJEV_REQUEST_TIMEOUT, counted from the start of its backend work). Every escalation is planned
   before any is sent (`Plan`) and made only while its worst-case prompt tokens beyond the shared
   prefix (`TokenBudget.escalation_cost`, summed over its views) fit what the request's budget leaves
   after the caller's text; the rest keep their answers (`Escalation.over_budget`). A question whose
   thinking fails or runs out of time keeps its first-pass answer, and what its calls generated and
   read still counts (`Spent`), a failed call's prompt in the backend's input tokens too; a cancelled
   request cancels both calls (each backend aborts its own work).

Cost model: latency ~ first pass + (budget / decode speed) for the slowest escalated question, since
escalated questions think concurrently; the backend's output tokens add each generated id and each call 2,
`usage.output_tokens` each generated id (`usage.py`).
Every call is recorded on the evaluation's data-parallel rank (`affinity.Pin`); while it is pinned,
the rank counts the most calls the tier may make (`escalation.escalation_calls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from openjev.affinity import Pin
from openjev.answering.answers import NonFiniteLogprob
from openjev.answering.escalation import EscalationPolicy, margin
from openjev.answering.readouts import AnswerableQuestion, AnyQuestion, QuestionViews, Readout
from openjev.backends.base import Backend, BackendError, GenerationCall, ReadoutCall, new_rid
from openjev.backends.slots import BackendSlots
from openjev.config import Settings
from openjev.prompting.budget import TokenBudget
from openjev.prompting.prompts import frame_conversation
from openjev.prompting.question_texts import ANSWER_CUES
from openjev.prompting.tokenizer import ChatTokenizer

log = logging.getLogger("openjev.answering.thinking")

THINK_CLOSE = "</think>"
REASONING_REQUEST = "Before you answer, reason step by step in a few short sentences."


@dataclass(slots=True)
class Spent:
    """What one escalated question's calls cost, kept as each call returns: a call 2 that fails after
    its call 1 generated still counts call 1's ids and prompt."""

    reasoning_tokens: int = 0
    input_tokens: int = 0
    readouts: int = 0
    cached_tokens: int | None = 0

    def add(self, prompt_tokens: int, cached_tokens: int | None, generated: int = 0, readout: bool = False) -> None:
        self.reasoning_tokens += generated
        self.input_tokens += prompt_tokens
        self.readouts += readout
        self.cached_tokens = (
            None if self.cached_tokens is None or cached_tokens is None else (self.cached_tokens + cached_tokens)
        )


@dataclass(frozen=True, slots=True)
class Thought:
    """One escalated question's new answer (None: its first-pass answer stays) and what its calls cost."""

    answer: dict[str, Any] | None
    spent: Spent


@dataclass(frozen=True, slots=True)
class Escalation:
    """What the thinking tier changed in a request: the new answers and the calls' costs. `escalated`
    questions were chosen; `over_budget` of them were not asked (their calls would have passed
    OPENJEV_MAX_TOTAL_INPUT_TOKENS, or call 1 would have had no room to think within the per-call
    limit); `thought` got a new answer (the others kept their first pass)."""

    escalated: int = 0
    thought: int = 0
    over_budget: int = 0
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    reasoning_tokens: int = 0
    input_tokens: int = 0
    #: Output tokens of the calls: every generated id plus one per readout.
    output_tokens: int = 0
    cached_tokens: int | None = 0
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        """Escalations asked whose thinking failed or ran out of time."""
        return self.escalated - self.over_budget - self.thought


@dataclass(frozen=True, slots=True)
class View:
    """One view an escalated question was read in by the first pass: its offset, text, label ids and
    content-free logprobs (None: its type is not calibrated)."""

    offset: int
    text: str
    labels: tuple[int, ...]
    prior: Sequence[float] | None


@dataclass(frozen=True, slots=True)
class Reading:
    """How an escalated question is asked again: every view of its first pass (each thinks and is read
    with the same corrections), its answer cue, and its answer from (view, logprobs, prior) readouts."""

    views: tuple[View, ...]
    cue: str
    answer: Callable[[list[tuple[int, Sequence[float], Sequence[float] | None]]], dict[str, Any]]


def reading(
    views: QuestionViews,
    questions: Mapping[str, AnyQuestion],
    first_pass: Mapping[str, Sequence[Readout]],
    question_id: str,
) -> Reading:
    """How a question is asked again: in every view of its first-pass readouts, each with its prior,
    after its type's cue, answered as the first pass was (the tier never sees a box question)."""
    question = cast(AnswerableQuestion, questions[question_id])
    shown = tuple(View(offset, *views.text(question, offset), prior) for offset, _, prior in first_pass[question_id])
    return Reading(shown, ANSWER_CUES[views.cue(question)], lambda readouts: views.answer(question, readouts))


@dataclass(frozen=True, slots=True)
class Limits:
    """An escalation's bounds: the deadline on the loop's clock, the branch token limit, and the prompt
    tokens the request may still send."""

    deadline: float
    branch_limit: int
    tokens_left: int


@dataclass(frozen=True, slots=True)
class Plan:
    """One escalated question's calls, fixed before any is sent: per view its call 1 prompt and budget."""

    question_id: str
    reading: Reading
    call_ones: tuple[list[int], ...]
    budgets: tuple[int, ...]
    #: The shared prefix's length: every call 1 starts with it, computed once by the first pass.
    shared: int = 0

    def cost(self, tail: int) -> int:
        return sum(
            TokenBudget.escalation_cost(len(ids) - self.shared, budget, tail)
            for ids, budget in zip(self.call_ones, self.budgets, strict=True)
        )


def _tail(chat: ChatTokenizer, cue: str, thinking_mode: bool) -> str:
    """What follows the thinking in call 2: in thinking mode, what follows `</think>` in the one-token
    question turn (the template's blank lines and `cue`); prompted, a blank line and `cue`."""
    one_token = frame_conversation(chat, [{"role": "user", "content": "?"}], cue).turn_close
    after_close = one_token.rfind(THINK_CLOSE)
    return one_token[after_close + len(THINK_CLOSE) :] if thinking_mode and after_close >= 0 else "\n\n" + cue


class Thinker:
    """Runs the escalations of the thinking tier for an engine (module doc, steps 2 and 3)."""

    def __init__(
        self, settings: Settings, chat: ChatTokenizer, backend: Backend, slots: BackendSlots, cues: Sequence[str]
    ) -> None:
        """`cues`: the answer cues in use (each question type's), each with its own tail."""
        self.backend, self.slots, self.chat = backend, slots, chat
        self.model_name = settings.think_model
        self.budget = settings.think_budget_tokens or backend.default_think_budget
        self.policy = EscalationPolicy(settings.think_margin, settings.think_max_share, settings.think_window)
        question = [{"role": "user", "content": "?"}]
        close_id = chat.tokenizer.token_to_id(THINK_CLOSE) if chat.thinking_switch else None
        self.close_id: int | None = close_id
        frame = frame_conversation(chat, question, "", thinking=close_id is not None)
        self.turn_open, self.turn_close = frame.turn_open, frame.turn_close
        self.tails = {cue: chat.encode(_tail(chat, cue, close_id is not None)) for cue in cues}
        ends = [chat.eos_token, *(token for token in chat.special_tokens if token in frame.turn_close)]
        self.end_ids = [i for token in ends if token and (i := chat.tokenizer.token_to_id(token)) is not None]
        self.stop_ids = list(dict.fromkeys([*([close_id] if close_id is not None else []), *self.end_ids]))

    @property
    def mode(self) -> str:
        return "template" if self.close_id is not None else "prompted"

    def call_one_suffix(self, question_text: str) -> list[int]:
        """The question turn of call 1 (thinking on, or asking for reasoning first)."""
        text = question_text if self.close_id is not None else f"{question_text}\n\n{REASONING_REQUEST}"
        quoted = self.chat.spells_added_token(text)
        return self.chat.encode_segments(((self.turn_open, False), (text, quoted), (self.turn_close, False)))

    def call_two_ids(self, call_one: Sequence[int], generated: Sequence[int], cue: str) -> list[int]:
        """Call 1's prompt + its ids (a trailing end-of-turn id dropped) + the close if missing + the
        tail of `cue`."""
        kept = list(generated)
        if kept and kept[-1] in self.end_ids and kept[-1] != self.close_id:
            kept.pop()
        if self.close_id is not None and (not kept or kept[-1] != self.close_id):
            kept.append(self.close_id)
        return [*call_one, *kept, *self.tails[cue]]

    def plan(self, question_id: str, reading: Reading, prefix: list[int], branch_limit: int) -> Plan | None:
        """The calls of one escalation; None where a view leaves call 1 no room to think."""
        call_ones = tuple(prefix + self.call_one_suffix(view.text) for view in reading.views)
        tail = len(self.tails[reading.cue])
        budgets = tuple(min(self.budget, branch_limit - len(ids) - tail - 2) for ids in call_ones)
        return Plan(question_id, reading, call_ones, budgets, len(prefix)) if min(budgets) >= 1 else None

    async def escalate(
        self,
        answers: dict[str, dict[str, Any]],
        prefix: list[int],
        read: Callable[[str], Reading],
        limits: Limits,
        pin: Pin,
    ) -> Escalation:
        """`answers`: the first pass's; `read(question id)`: how to ask and answer it again (`reading`);
        `pin`: the evaluation's data-parallel rank. Escalations are planned least confident first and
        made while their worst-case prompt tokens fit `limits.tokens_left`."""
        chosen = self.policy.select([(qid, margin(answer)) for qid, answer in answers.items()])
        started = time.perf_counter()
        planned = await asyncio.to_thread(
            lambda: [self.plan(qid, read(qid), prefix, limits.branch_limit) for qid in chosen]
        )
        runs, over_budget, left = [], planned.count(None), limits.tokens_left
        for plan in filter(None, planned):
            cost = plan.cost(len(self.tails[plan.reading.cue]))
            if cost > left:
                over_budget += 1
                continue
            left -= cost
            runs.append(plan)
        async with asyncio.TaskGroup() as group:
            tasks = {plan.question_id: group.create_task(self._think(plan, limits, pin)) for plan in runs}
        thoughts = {qid: task.result() for qid, task in tasks.items()}
        spent = [thought.spent for thought in thoughts.values()]
        cached = [item.cached_tokens for item in spent]
        reasoning = sum(item.reasoning_tokens for item in spent)
        new = {qid: thought.answer for qid, thought in thoughts.items() if thought.answer is not None}
        return Escalation(
            escalated=len(chosen),
            thought=len(new),
            over_budget=over_budget,
            answers=new,
            reasoning_tokens=reasoning,
            input_tokens=sum(item.input_tokens for item in spent),
            output_tokens=reasoning + sum(item.readouts for item in spent),
            cached_tokens=None if None in cached else sum(cached),  # type: ignore[arg-type]
            seconds=time.perf_counter() - started,
        )

    async def _think(self, plan: Plan, limits: Limits, pin: Pin) -> Thought:
        """Both calls for each view of one question; the answer is None (the first-pass answer stays)
        when any fails or time runs out, and whatever was spent is counted all the same."""
        spent = Spent()

        def record(prompt_tokens: int, cached_tokens: int | None, generated: int = 0, readout: bool = False) -> None:
            spent.add(prompt_tokens, cached_tokens, generated, readout)
            pin.record(prompt_tokens, cached_tokens)

        @contextlib.contextmanager
        def sent(prompt: list[int]) -> Iterator[None]:
            """A call that fails once its prompt is sent (an error, the deadline) has still sent it."""
            try:
                yield
            except BaseException:
                spent.add(len(prompt), None)
                raise

        async def view_readout(view: View, call_one: list[int], budget: int) -> tuple[int, Sequence[float], Any]:
            async with self.slots:
                call = GenerationCall(new_rid(), call_one, budget, self.stop_ids, routed_dp_rank=pin.rank)
                with sent(call_one):
                    generated = await self.backend.generate(call)
            record(generated.prompt_tokens, generated.cached_tokens, len(generated.output_ids))
            call_two = self.call_two_ids(call_one, generated.output_ids, plan.reading.cue)
            async with self.slots:
                with sent(call_two):
                    readout = await self.backend.readout(
                        ReadoutCall(new_rid(), call_two, view.labels, routed_dp_rank=pin.rank)
                    )
            record(readout.prompt_tokens, readout.cached_tokens, readout=True)
            return view.offset, readout.logprobs, view.prior

        try:
            async with asyncio.timeout_at(limits.deadline), asyncio.TaskGroup() as group:
                tasks = [
                    group.create_task(view_readout(view, call_one, budget))
                    for view, call_one, budget in zip(plan.reading.views, plan.call_ones, plan.budgets, strict=True)
                ]
            return Thought(plan.reading.answer([task.result() for task in tasks]), spent)
        except* (BackendError, TimeoutError, NonFiniteLogprob) as failures:
            error = failures.exceptions[0]
            log.warning("thinking failed, the first-pass answer stays: %s", str(error) or type(error).__name__)
        return Thought(None, spent)
