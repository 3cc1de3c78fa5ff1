"""The request's journey from a validated Jev request to typed answers.

1. `prepare` (CPU only): render the conversation once (a conversation that extends one prepared
   before: only its new messages, `conversation_memo.py`), tokenize the shared prefix once and each
   question suffix on its own (each distinct text once per process: `encoding.py`), pick label ids,
   fix the content-free readouts it will make (`content_free.py`), and keep the token budgets
   (`budget.py`): every call within the branch limit, everything the first pass sends within the
   request's total, tokenizing stopped early once a prompt is certainly over. Nothing is truncated.
   Image assets (`image_marks.py`) become the model's vision spans where their placeholders stand,
   one pad per image in the ids, and every position an image takes counts in the budgets.
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
   Views, labels, cues per question type and the score and calibration corrections are readouts.py's;
   content-free readouts (contextual calibration) run beside the branches (content_free.py). A box
   question's branch is one constrained generation instead (`box_reading.py`), read into its box;
   its generated ids count as output tokens.
4. The thinking tier (a request naming OPENJEV_THINK_MODEL): `thinking.py` escalates its least
   confident questions within the same OPENJEV_REQUEST_TIMEOUT, slots and token budget, and its
   generated ids count as output tokens. An escalated question is read again in every view of its first
   pass, each with its content-free prior, so it keeps its type's corrections.

With a data-parallel backend (several ranks, each with its own prefix cache) every backend call of
one evaluation carries one rank, chosen from the conversation's key (`affinity.py`).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from openjev.affinity import RankRouter, pinned
from openjev.answering.answers import NonFiniteLogprob
from openjev.answering.box_reading import BoxReader, BoxReading
from openjev.answering.content_free import ContentFreePlan, ContentFreePriors
from openjev.answering.readouts import AnswerableQuestion, AnyQuestion, QuestionViews, Readout
from openjev.answering.thinking import Escalation, Limits, Reading, Thinker, View, share_cap
from openjev.backends.base import Backend, BackendError, BackendTimeout, LabelLogprobs, ReadoutCall, new_rid
from openjev.calibration import Calibration, load_calibration
from openjev.config import Settings
from openjev.errors import Issue, RequestRejected
from openjev.prompting.budget import TokenBudget
from openjev.prompting.conversation_memo import ConversationMemo, Lookup
from openjev.prompting.encoding import PromptEncoder, PromptTooLong
from openjev.prompting.image_marks import ImageMarks, PromptImages
from openjev.prompting.prompt_ids import PromptIds, SharedIds
from openjev.prompting.prompts import ANSWER_CUES, ConversationFrame, chat_messages, template_header_length
from openjev.prompting.tokenizer import ChatTokenizer, Segment, TemplateError
from openjev.request.images import ImageInput
from openjev.request.schema import BoxQuestion, NoulQuestion, SystemOneRequest
from openjev.request.sizes import question_bytes
from openjev.request.validation import check_request


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    shared_prefix_ids: list[int]
    branches: list[Branch]
    #: The content-free readouts of the branches (contextual calibration), fixed when the budget was checked.
    content_free: ContentFreePlan
    #: Names the conversation for rank affinity (`affinity.conversation_key`).
    affinity_key: int = 0
    #: The request names the thinking tier.
    thinking: bool = False
    #: The images of the shared prefix's pads, in order, and the positions they add beyond their pads.
    prefix_images: tuple[ImageInput, ...] = ()
    prefix_image_tokens: int = 0


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
        self.views = QuestionViews(settings, chat)
        self.content_free = ContentFreePriors(chat, settings.content_free_cache)
        self.encoder = PromptEncoder(chat, settings.tokenize_cache_bytes)
        self.memo = ConversationMemo(
            chat, settings.conversation_memo_bytes, exact_cuts=self.encoder.cuts_at_special_tokens
        )
        self.backend = backend
        self.budget = TokenBudget.of(settings.max_input_tokens, settings.max_total_input_tokens, backend.context_length)
        self._backend_slots = asyncio.Semaphore(settings.max_concurrent_branches)
        # Every id the tokenizer can make is at most its largest (ids need not be contiguous).
        vocab = backend.vocab_size
        largest = max(chat.tokenizer.get_vocab(with_added_tokens=True).values(), default=-1)
        self._ids_in_vocabulary = vocab is not None and largest < vocab
        ranks = backend.data_parallel_size
        #: Several data-parallel ranks: which one serves each evaluation (None: one rank, nothing routed).
        self.router: RankRouter | None = RankRouter(ranks) if ranks > 1 else None
        self._template_header = template_header_length(chat)
        self.thinker = Thinker(
            settings, chat, backend, self._backend_slots, [ANSWER_CUES[cue] for cue in set(self.views.cues.values())]
        )
        #: Box questions (`box_reading.py`), stopped where a turn ends; the views read its digits.
        self.boxes = BoxReader(chat, backend, self._backend_slots, self.thinker.end_ids)
        self.views.box_ids = self.boxes.read_ids
        self.calibration: Calibration | None = (
            load_calibration(settings.calibration_file) if settings.calibration_file is not None else None
        )
        #: The calibration file in force (its path as configured), for /health and /v1/limits.
        self.calibration_source: str | None = self.calibration.source if self.calibration else None
        #: The served model's images in prompts (`image_marks.py`); its `vision` is None for a text-only model.
        self.images = PromptImages(chat, backend.vision, settings)

    # -- 1. prepare -------------------------------------------------------------------------------

    def look_up(self, request: SystemOneRequest, body_bytes: int) -> tuple[Lookup | None, int]:
        """The conversation memo's lookup for `prepare`, and about how many bytes of text `prepare` will
        render and tokenize: for a conversation that extends one remembered, its new messages and every
        question's texts (counted no further than past OPENJEV_INLINE_PREPARATION_BYTES); anything else,
        its whole body of `body_bytes`. A JSON state that is not a chat is not looked up here: its text
        is rendered first, which is preparation's work (`prepare` looks it up)."""
        if not isinstance(request.state, str) and chat_messages(request.state) is None:
            return None, body_bytes
        lookup = self.memo.lookup(request.state)
        if lookup.new_text_bytes is None:
            return lookup, body_bytes
        limit = self.settings.inline_preparation_bytes - lookup.new_text_bytes
        return lookup, lookup.new_text_bytes + question_bytes(request, limit)

    def prepare(
        self,
        request: SystemOneRequest,
        *,
        checked: bool = False,
        lookup: Lookup | None = None,
        images: Mapping[str, ImageInput] | None = None,
    ) -> PreparedRequest:
        """`checked`: the caller has run `check_request` on this request already and found nothing;
        `lookup`: `look_up`'s, made just before (None: looked up here); `images`: each asset's image,
        made safe by `self.images.prepare` (in its own slot, before this)."""
        issues = [] if checked else check_request(request, self.settings, self.boxes.accepted)
        if issues:
            raise RequestRejected(issues)
        safe = images or {}
        marks = self.images.marks(safe)
        try:
            framing = self.images.framing(request.state, marks) if marks else self.memo.frame(request.state, lookup)
        except TemplateError as error:
            raise RequestRejected([Issue(("state",), str(error))]) from error
        known = framing.known_ids
        planned, prompts = self._plan(request, framing.frame, marks)
        # Per prompt: its images in pad order, and the positions they add beyond their pads.
        prompts, shown, extra = self.images.place(marks, prompts, safe)
        caps = self.budget.encode_limits(len(planned), len(known))
        try:
            new_prefix_ids, *suffixes = self.encoder.encode_many(
                prompts, [max(0, cap - more) for cap, more in zip(caps, extra, strict=True)]
            )
        except PromptTooLong as over:
            tokens = over.tokens + extra[over.index] + (len(known) if over.index == 0 else 0)
            question_ids = [question_id for question_id, *_ in planned]
            raise RequestRejected([self.budget.early_issue(over.index, tokens, question_ids)]) from None
        shared_prefix_ids = known + new_prefix_ids
        branches = [
            Branch(question_id, question, suffix_ids, ids, offset, images, more)
            for (question_id, question, offset, _, ids), suffix_ids, images, more in zip(
                planned, suffixes, shown[1:], extra[1:], strict=True
            )
        ]
        # A question's own image is no content-free text: its prior is not read.
        wanted = [self.views.wants_content_free(branch.question) and not branch.images for branch in branches]
        content_free = self.content_free.plan(branches, wanted)
        issues = self.budget.first_pass_issues(
            len(shared_prefix_ids) + extra[0],
            [(branch.question_id, len(branch.suffix_ids) + branch.image_tokens) for branch in branches],
            [(branches[index].question_id, tokens) for index, tokens in content_free.readouts],
            {b.question_id: self.boxes.max_tokens for b in branches if isinstance(b.question, BoxQuestion)},
        )
        if issues:
            raise RequestRejected(issues)
        if marks is None:
            self.memo.remember(framing, shared_prefix_ids)
        key = self.images.affinity_key(shared_prefix_ids, self._template_header, shown[0])
        thinking = request.model == self.settings.think_model
        return PreparedRequest(shared_prefix_ids, branches, content_free, key, thinking, shown[0], extra[0])

    def _plan(
        self, request: SystemOneRequest, frame: ConversationFrame, marks: ImageMarks | None
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Segment, ...]]]:
        """Each question view's (id, question, offset, text, label ids), and every prompt's segments,
        the shared prefix first; `marks`: the text shows the request's images (the question stays as sent)."""
        # The frame carries no cue: each question type's closes its turn, right before the label.
        questions: list[tuple[str, AnyQuestion]] = list(request.questions.items())
        planned = [
            (question_id, question, offset, *self.views.text(marks.question(question) if marks else question, offset))
            for question_id, question in questions
            for offset in self.views.views(question)
        ]
        suffixes = (
            frame.with_cue(self.views.cue_text(question)).question_suffix_segments(
                text, self.chat.spells_added_token(text)
            )
            for _, question, _, text, _ in planned
        )
        return planned, [frame.shared_prefix_segments, *suffixes]

    # -- 2. evaluate ------------------------------------------------------------------------------

    async def _call_backend(
        self,
        input_ids: Sequence[int],
        label_token_ids: tuple[int, ...],
        rank: int | None = None,
        images: tuple[ImageInput, ...] = (),
    ) -> LabelLogprobs:
        """One backend call; `rank` is the evaluation's data-parallel rank (None with one rank);
        `images`: one per image pad of `input_ids`, in order."""
        async with self._backend_slots:
            call = ReadoutCall(new_rid(), input_ids, label_token_ids, self._ids_in_vocabulary, rank, images)
            result = await self.backend.readout(call)
        if self.router is not None and rank is not None:
            self.router.record(rank, result.prompt_tokens, result.cached_tokens)
        return result

    async def _branch(
        self, prefix: SharedIds, branch: Branch, rank: int | None, seen: tuple[ImageInput, ...]
    ) -> LabelLogprobs | BoxReading:
        """A branch's call after the shared prefix (whose images are `seen`): a readout, or a box's generation."""
        ids, images = PromptIds(prefix, branch.suffix_ids), seen + branch.images
        if not isinstance(branch.question, BoxQuestion):
            return await self._call_backend(ids, branch.label_token_ids, rank, images)
        reading = await self.boxes.read(ids, images, rank)
        if self.router is not None and rank is not None:
            self.router.record(rank, reading.prompt_tokens, reading.cached_tokens)
        return reading

    async def evaluate(self, prepared: PreparedRequest) -> Evaluation:
        # One data-parallel rank for every backend call of the evaluation (None: one rank).
        with pinned(self.router, prepared.affinity_key, self._most_calls(prepared)) as rank:
            return await self._evaluate(prepared, rank)

    def _most_calls(self, prepared: PreparedRequest) -> int:
        """The backend calls an evaluation may make, the rank's load while it runs: the warm-up, the
        branches, the content-free readouts and, in the thinking tier, two calls for each view of as
        many questions as may escalate (those with the most views)."""
        calls = 1 + len(prepared.branches) + len(prepared.content_free.missing)
        if prepared.thinking:
            views = Counter(branch.question_id for branch in prepared.branches)
            cap = share_cap(self.settings.think_max_share, len(views))
            calls += 2 * sum(sorted(views.values(), reverse=True)[:cap])
        return calls

    async def _evaluate(self, prepared: PreparedRequest, rank: int | None) -> Evaluation:
        prefix = SharedIds(prepared.shared_prefix_ids)
        deadline = asyncio.get_running_loop().time() + self.settings.request_timeout
        try:
            async with asyncio.timeout(self.settings.request_timeout):
                started = time.perf_counter()
                # Any non-empty id list works: every call must carry one (SGLang #34719).
                seen = prepared.prefix_images
                warm = await self._call_backend(
                    PromptIds(prefix, []), prepared.branches[0].label_token_ids[:1], rank, seen
                )
                warmed = time.perf_counter()
                try:
                    async with asyncio.TaskGroup() as group:
                        tasks = [group.create_task(self._branch(prefix, b, rank, seen)) for b in prepared.branches]
                        content_free = group.create_task(
                            self.content_free.read(
                                prepared.content_free, lambda ids, labels: self._call_backend(ids, labels, rank)
                            )
                        )
                except* BackendError as failures:
                    raise failures.exceptions[0] from None
                finished = time.perf_counter()
        except TimeoutError as error:
            raise BackendTimeout(
                f"the backend did not finish within OPENJEV_REQUEST_TIMEOUT={self.settings.request_timeout:g}s"
            ) from error

        results = [task.result() for task in tasks]
        priors, prior_calls, prior_tokens = content_free.result()
        readouts: dict[str, list[Readout]] = {}
        boxes: dict[str, dict[str, Any]] = {}
        for branch, result, prior in zip(prepared.branches, results, priors, strict=True):
            if isinstance(result, BoxReading):
                boxes[branch.question_id] = result.answer
            else:
                readouts.setdefault(branch.question_id, []).append((branch.offset, result.logprobs, prior))
        questions = {branch.question_id: branch.question for branch in prepared.branches}
        try:
            answers = {
                qid: boxes[qid] if qid in boxes else self._answer(questions[qid], readouts[qid]) for qid in questions
            }
        except NonFiniteLogprob as error:
            raise BackendError(f"the backend returned unusable label logprobs: {error}") from error
        reported = [result.cached_tokens for result in results]
        evaluation = Evaluation(
            answers=answers,
            input_tokens=warm.prompt_tokens + sum(result.prompt_tokens for result in results) + prior_tokens,
            output_tokens=1 + prior_calls + sum(r.generated if isinstance(r, BoxReading) else 1 for r in results),
            prefix_tokens=len(prefix.ids) + prepared.prefix_image_tokens,
            cached_tokens=None if any(value is None for value in reported) else sum(reported),  # type: ignore[misc]
            prefill_seconds=warmed - started,
            branches_seconds=finished - warmed,
        )
        if not prepared.thinking:
            return evaluation
        return await self._think(prepared, evaluation, readouts, deadline, rank)

    async def _think(
        self,
        prepared: PreparedRequest,
        evaluation: Evaluation,
        first_pass: dict[str, list[Readout]],
        deadline: float,
        rank: int | None,
    ) -> Evaluation:
        """The thinking tier's escalations (`thinking.py`), merged into the first pass's evaluation: each
        escalated question is asked again in every view of its first pass, with the same priors."""
        questions = {branch.question_id: branch.question for branch in prepared.branches}

        def read(question_id: str) -> Reading:
            question = questions[question_id]
            views = tuple(
                View(offset, *self.views.text(question, offset), prior) for offset, _, prior in first_pass[question_id]
            )
            cue = ANSWER_CUES[self.views.cue(question)]
            return Reading(views, cue, lambda readouts: self._answer(question, readouts))

        sent = TokenBudget.first_pass_tokens(
            len(prepared.shared_prefix_ids) + prepared.prefix_image_tokens,
            [len(branch.suffix_ids) + branch.image_tokens for branch in prepared.branches],
            prepared.content_free.tokens,
        )
        limits = Limits(deadline, self.budget.branch_limit, self.budget.total_limit - sent, self.router)
        escalation = await self.thinker.escalate(evaluation.answers, prepared.shared_prefix_ids, read, limits, rank)
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

    def _answer(self, question: AnswerableQuestion, readouts: list[Readout]) -> dict[str, Any]:
        """`readouts`: (view, label logprobs, content-free logprobs or None) per branch, view 0 first."""
        return self.views.answer(question, readouts, self._temperature(question))
