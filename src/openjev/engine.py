"""The request's journey from a validated Jev request to typed answers.

1. `prepare` (CPU only): render the conversation once, tokenize the shared prefix once and each
   question suffix on its own (each distinct text once per process: `encoding.py`), pick label ids,
   and enforce the token budgets. Nothing is truncated:
   a prompt over a limit is a 422 naming the limit and the count.
   - per branch: prefix + suffix + 1 output token <= min(OPENJEV_MAX_INPUT_TOKENS, backend context);
     a state that leaves no room for any question (prefix + 2 over that) is named as the state;
   - per request: prefix (warm-up) + sum of branch prompts <= OPENJEV_MAX_TOTAL_INPUT_TOKENS.
   Tokenizing stops as soon as a prompt is certainly over (`_encode_limits`), so text far over a
   budget costs one encoding round; the 422 then gives the count reached ("at least").
2. `evaluate` (backend I/O): one warm-up readout of the shared prefix, awaited so the backend's
   prefix cache holds it, then one readout per question, concurrently. Every backend call in the
   process shares `OPENJEV_MAX_CONCURRENT_BRANCHES` slots. The first failure cancels the siblings
   (each backend aborts its own cancelled work); the whole backend phase is bounded by
   OPENJEV_REQUEST_TIMEOUT.
3. Answer: `answers.py` turns each question's label logprobs into its typed answer. A choice
   question read in several rotations (OPENJEV_OPTION_SHIFTS) has one branch per rotation over the
   same cached prefix; its readouts are mapped back to the options and combined
   (OPENJEV_LABEL_PRIOR), then tempered by the calibration file's temperature for its type and
   option count, else OPENJEV_TEMPERATURE. `usage.output_tokens` counts every backend call.
4. The thinking tier (a request naming OPENJEV_THINK_MODEL): `thinking.py` escalates its least
   confident questions within the same OPENJEV_REQUEST_TIMEOUT and slots, and its generated ids
   count as output tokens.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Any

from openjev.answers import (
    NonFiniteLogprob,
    choice_answer,
    noul_answer,
    score_answer,
    shift_offsets,
    shifted_choice_answer,
)
from openjev.backends.base import Backend, BackendError, BackendTimeout, LabelLogprobs, ReadoutCall, new_rid
from openjev.calibration import Calibration, load_calibration
from openjev.config import Settings
from openjev.encoding import PromptEncoder, PromptTooLong
from openjev.errors import Issue, RequestRejected
from openjev.labels import build_label_set
from openjev.prompts import ANSWER_CUES, choice_text, frame_conversation, noul_text, score_text, state_messages
from openjev.schema import ChoiceQuestion, NoulQuestion, ScoreQuestion, SystemOneRequest
from openjev.thinking import Escalation, Thinker
from openjev.tokenizer import ChatTokenizer, TemplateError
from openjev.validation import check_request

AnswerableQuestion = NoulQuestion | ChoiceQuestion | ScoreQuestion


@dataclass(frozen=True, slots=True)
class Branch:
    question_id: str
    question: AnswerableQuestion
    suffix_ids: list[int]
    label_token_ids: tuple[int, ...]
    #: The cyclic rotation of a choice question's options shown in this branch (0: as sent).
    offset: int = 0


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    shared_prefix_ids: list[int]
    branches: list[Branch]
    #: The request names the thinking tier.
    thinking: bool = False


@dataclass(frozen=True, slots=True)
class Evaluation:
    answers: dict[str, dict[str, Any]]
    input_tokens: int
    output_tokens: int
    prefix_tokens: int
    #: Sum of the branches' reused prompt tokens; None when the backend does not report them.
    cached_tokens: int | None
    prefill_seconds: float
    branches_seconds: float
    #: The thinking tier's work; None for a request of the one-token tier.
    escalation: Escalation | None = None


class Engine:
    """Built once the backend is ready (its context length is known); checks the labels on creation."""

    def __init__(self, settings: Settings, chat: ChatTokenizer, backend: Backend) -> None:
        self.settings = settings
        self.chat = chat
        self.cue = ANSWER_CUES[settings.answer_cue]
        # Labels are checked where they are read: right after the answer cue of a question turn.
        answer_context = frame_conversation(chat, [{"role": "user", "content": "?"}], self.cue).turn_close
        self.labels = build_label_set(chat, answer_context, max(settings.max_choice_options, settings.max_score_levels))
        self.encoder = PromptEncoder(chat, settings.tokenize_cache_bytes)
        self.backend = backend
        context = backend.context_length
        self.max_branch_tokens = min(settings.max_input_tokens, context) if context else settings.max_input_tokens
        self._branch_limit_name = (
            "OPENJEV_MAX_INPUT_TOKENS"
            if self.max_branch_tokens == settings.max_input_tokens
            else "the backend's context length"
        )
        self._backend_slots = asyncio.Semaphore(settings.max_concurrent_branches)
        self.thinker = Thinker(settings, chat, backend, self._backend_slots, self.cue)
        self.calibration: Calibration | None = (
            load_calibration(settings.calibration_file) if settings.calibration_file is not None else None
        )
        #: The calibration file in force (its path as configured), for /health and /v1/limits.
        self.calibration_source: str | None = self.calibration.source if self.calibration else None

    # -- 1. prepare -------------------------------------------------------------------------------

    def prepare(self, request: SystemOneRequest) -> PreparedRequest:
        issues = check_request(request, self.settings)
        if issues:
            raise RequestRejected(issues)
        try:
            frame = frame_conversation(self.chat, state_messages(request.state), self.cue)
        except TemplateError as error:
            raise RequestRejected([Issue(("state",), str(error))]) from error

        questions: list[tuple[str, AnswerableQuestion]] = list(request.questions.items())  # type: ignore[arg-type]
        planned = [
            (question_id, question, offset, *self._question_text(question, offset))
            for question_id, question in questions
            for offset in self._offsets(question)
        ]
        try:
            shared_prefix_ids, *suffixes = self.encoder.encode_many(
                [
                    frame.shared_prefix_segments,
                    *(
                        frame.question_suffix_segments(text, self.chat.spells_special_token(text))
                        for *_, text, _ in planned
                    ),
                ],
                self._encode_limits(len(planned)),
            )
        except PromptTooLong as over:
            raise RequestRejected([self._early_budget_issue(over, planned)]) from None
        branches = [
            Branch(question_id, question, suffix_ids, ids, offset)
            for (question_id, question, offset, _, ids), suffix_ids in zip(planned, suffixes, strict=True)
        ]
        self._check_budget(shared_prefix_ids, branches)
        return PreparedRequest(shared_prefix_ids, branches, request.model == self.settings.think_model)

    def _offsets(self, question: AnswerableQuestion) -> list[int]:
        """The option rotations a question is read in: several for a choice, else just as sent."""
        if isinstance(question, ChoiceQuestion):
            return shift_offsets(len(question.criteria), self.settings.option_shifts)
        return [0]

    def _question_text(self, question: AnswerableQuestion, offset: int = 0) -> tuple[str, tuple[int, ...]]:
        labels = self.labels
        if isinstance(question, NoulQuestion):
            return noul_text(question), labels.yes_no_ids
        count = len(question.criteria)
        if isinstance(question, ChoiceQuestion):
            return choice_text(question, labels.option_labels[:count], offset), labels.option_label_ids[:count]
        return score_text(question, labels.option_labels[:count]), labels.option_label_ids[:count]

    def _encode_limits(self, branch_count: int) -> list[int]:
        """Per prompt, a length past which `_check_budget` must refuse whatever the others' lengths:
        every prompt (question suffixes and the prefix) has at least one token, and each branch adds one
        output token; the prefix counts once for the warm-up and once per branch."""
        suffix_limit = self.max_branch_tokens - 2
        total_share = (self.settings.max_total_input_tokens - branch_count) // (1 + branch_count)
        return [min(suffix_limit, total_share), *[suffix_limit] * branch_count]

    def _early_budget_issue(self, over: PromptTooLong, planned: list[tuple[Any, ...]]) -> Issue:
        """The issue for a prompt found over its `_encode_limits` entry before it was fully tokenized."""
        if over.index == 0 and over.tokens > self.max_branch_tokens - 2:
            return self._state_issue(over.tokens, "at least ")
        if over.index == 0:
            total = over.tokens * (1 + len(planned)) + len(planned)
            return self._total_issue(total, over.tokens, len(planned), "at least ")
        question_id = planned[over.index - 1][0]
        return self._question_issue(question_id, over.tokens + 2, f"its question text alone {over.tokens}")

    def _question_issue(self, question_id: str, needed: int, parts: str, bound: str = "at least ") -> Issue:
        return Issue(
            ("questions", question_id),
            f"this question needs {bound}{needed} tokens ({parts}), over the limit of {self.max_branch_tokens} "
            f"({self._branch_limit_name})",
            "too_long",
            {"limit": self.max_branch_tokens, "tokens": needed},
        )

    def _state_issue(self, prefix: int, bound: str = "") -> Issue:
        return Issue(
            ("state",),
            f"the state needs {bound}{prefix} tokens, leaving no room for a question within the limit of "
            f"{self.max_branch_tokens} ({self._branch_limit_name})",
            "too_long",
            {"limit": self.max_branch_tokens, "tokens": prefix},
        )

    def _total_issue(self, total: int, prefix: int, branch_count: int, bound: str = "") -> Issue:
        return Issue(
            ("questions",),
            f"the request submits {bound}{total} input tokens (warm-up {prefix} + {branch_count} question "
            f"prompts), over OPENJEV_MAX_TOTAL_INPUT_TOKENS={self.settings.max_total_input_tokens}",
            "too_long",
            {"limit": self.settings.max_total_input_tokens, "tokens": total},
        )

    def _check_budget(self, shared_prefix_ids: list[int], branches: list[Branch]) -> None:
        prefix = len(shared_prefix_ids)
        if prefix + 2 > self.max_branch_tokens:
            raise RequestRejected([self._state_issue(prefix)])
        issues = []
        refused: set[str] = set()
        for branch in branches:
            needed = prefix + len(branch.suffix_ids) + 1
            # A question read in several rotations is named once, by its first rotation over the limit.
            if needed > self.max_branch_tokens and branch.question_id not in refused:
                refused.add(branch.question_id)
                parts = f"state {prefix} + question {len(branch.suffix_ids)} + 1 output"
                issues.append(self._question_issue(branch.question_id, needed, parts, bound=""))
        total = prefix + sum(prefix + len(branch.suffix_ids) for branch in branches)
        if total > self.settings.max_total_input_tokens:
            issues.append(self._total_issue(total, prefix, len(branches)))
        if issues:
            raise RequestRejected(issues)

    # -- 2. evaluate ------------------------------------------------------------------------------

    async def _call_backend(self, input_ids: list[int], label_token_ids: tuple[int, ...]) -> LabelLogprobs:
        async with self._backend_slots:
            return await self.backend.readout(ReadoutCall(new_rid(), input_ids, label_token_ids))

    async def evaluate(self, prepared: PreparedRequest) -> Evaluation:
        prefix = prepared.shared_prefix_ids
        deadline = asyncio.get_running_loop().time() + self.settings.request_timeout
        try:
            async with asyncio.timeout(self.settings.request_timeout):
                started = time.perf_counter()
                # Any non-empty id list works: every call must carry one (SGLang #34719).
                warm = await self._call_backend(prefix, prepared.branches[0].label_token_ids[:1])
                warmed = time.perf_counter()
                try:
                    async with asyncio.TaskGroup() as group:
                        tasks = [
                            group.create_task(self._call_backend(prefix + branch.suffix_ids, branch.label_token_ids))
                            for branch in prepared.branches
                        ]
                except* BackendError as failures:
                    raise failures.exceptions[0] from None
                finished = time.perf_counter()
        except TimeoutError as error:
            raise BackendTimeout(
                f"the backend did not finish within OPENJEV_REQUEST_TIMEOUT={self.settings.request_timeout:g}s"
            ) from error

        results = [task.result() for task in tasks]
        readouts: dict[str, list[tuple[int, tuple[float, ...]]]] = {}
        for branch, result in zip(prepared.branches, results, strict=True):
            readouts.setdefault(branch.question_id, []).append((branch.offset, result.logprobs))
        questions = {branch.question_id: branch.question for branch in prepared.branches}
        try:
            answers = {
                question_id: self._answer(questions[question_id], read) for question_id, read in readouts.items()
            }
        except NonFiniteLogprob as error:
            raise BackendError(f"the backend returned unusable label logprobs: {error}") from error
        reported = [result.cached_tokens for result in results]
        evaluation = Evaluation(
            answers=answers,
            input_tokens=warm.prompt_tokens + sum(result.prompt_tokens for result in results),
            output_tokens=len(results) + 1,
            prefix_tokens=len(prefix),
            cached_tokens=None if any(value is None for value in reported) else sum(reported),  # type: ignore[misc]
            prefill_seconds=warmed - started,
            branches_seconds=finished - warmed,
        )
        return await self._think(prepared, evaluation, deadline) if prepared.thinking else evaluation

    async def _think(self, prepared: PreparedRequest, evaluation: Evaluation, deadline: float) -> Evaluation:
        """The thinking tier's escalations (`thinking.py`), merged into the first pass's evaluation."""
        questions = {branch.question_id: branch.question for branch in prepared.branches}

        def read(question_id: str) -> tuple[str, tuple[int, ...], Any]:
            question = questions[question_id]
            text, labels = self._question_text(question)
            return text, labels, lambda logprobs: self._answer(question, [(0, logprobs)])

        limits = (deadline, self.max_branch_tokens)
        escalation = await self.thinker.escalate(evaluation.answers, prepared.shared_prefix_ids, read, limits)
        cached = evaluation.cached_tokens
        return replace(
            evaluation,
            answers={**evaluation.answers, **escalation.answers},
            input_tokens=evaluation.input_tokens + escalation.input_tokens,
            output_tokens=evaluation.output_tokens + escalation.output_tokens,
            cached_tokens=None
            if cached is None or escalation.cached_tokens is None
            else cached + escalation.cached_tokens,
            escalation=escalation,
        )

    def _temperature(self, question: AnswerableQuestion) -> float:
        if self.calibration is not None:
            count = 2 if isinstance(question, NoulQuestion) else len(question.criteria)
            fitted = self.calibration.temperature(question.type, count)
            if fitted is not None:
                return fitted
        return self.settings.temperature

    def _answer(self, question: AnswerableQuestion, readouts: list[tuple[int, tuple[float, ...]]]) -> dict[str, Any]:
        """`readouts`: (rotation offset, label logprobs) per branch of the question, offset 0 first."""
        temperature, mode = self._temperature(question), self.settings.confidence
        offset, logprobs = readouts[0]
        if isinstance(question, NoulQuestion):
            return noul_answer(logprobs, temperature)
        if isinstance(question, ChoiceQuestion):
            if len(readouts) == 1 and offset == 0:
                return choice_answer(list(question.criteria), logprobs, temperature, mode)
            offsets, readings = zip(*readouts, strict=True)
            return shifted_choice_answer(
                list(question.criteria), readings, offsets, self.settings.label_prior, temperature, mode
            )
        return score_answer(question.criteria, logprobs, temperature, mode)
