"""The request's journey from a validated Jev request to typed answers; each step's contract is its module's.

0. Tasks (`tasks/stage.py`): a question using a task is asked as the task asks it (its worked
   examples in its criteria), and its answer rebuilt from the task's calibration or head last, after step 4.
1. `prepare` (CPU only): render the conversation once (a conversation that extends one prepared
   before: only its new messages, `conversation_memo.py`), tokenize the shared prefix once and each
   question view's suffix on its own (each distinct text once per process: `encoding.py`), with the
   views, texts, cues and label ids of `readouts.py`; fix the content-free readouts it will make
   (`content_free.py`) and keep the token budgets (`budget.py`) on the caller's text alone: each
   question as sent within the per-question limit, the prefix once and every question within the
   request's, tokenizing stopped at the first certain excess; openjev's own views and readouts are
   a capacity matter (529), never the caller's. Nothing is truncated. Image
   assets (`image_marks.py`) become the model's vision spans where their placeholders stand, and
   every position they take counts.
2. `evaluate` (backend I/O; the branches sent by `branch_reading.py`): one warm-up readout of the shared
   prefix, awaited so the backend's prefix cache holds it, then one readout per question view and the
   content-free readouts, all together as one `Backend.readout_batch` (SGLang: one `/generate`, whose
   readouts reach its scheduler at once), beside one constrained generation per box question
   (`box_reading.py`). A choice's deferred rotations (`readouts.py`, OPENJEV_ROTATION_SKIP_ABOVE) follow
   as a second batch, with their content-free readouts, for the questions whose first readout is unsure;
   the budget and the rank's load counted them from the start. The warm-up is skipped while the prefix is
   certainly cached already (`warm_prefixes.py`): the branches go out at once. Every readout in the
   process holds one of `OPENJEV_MAX_CONCURRENT_BRANCHES` slots (`backends/slots.py`): a batch goes out
   in chunks of the slots free, never holding one idle. The first failure cancels the siblings (each
   backend aborts its own cancelled work); the whole backend phase is bounded by OPENJEV_REQUEST_TIMEOUT.
   With a data-parallel backend every call of one evaluation carries one rank, chosen from the
   conversation's key (`affinity.py`).
3. Answer: `readouts.py` turns each question's readouts into its typed answer (views combined,
   content-free priors divided out, the temperature applied). `usage` bills what the caller sent,
   counted once (`usage.py`); every call's tokens are the evaluation's own counts, for the headers.
4. The thinking tier (a request naming OPENJEV_THINK_MODEL): `thinking.py` escalates its least
   confident questions within the same OPENJEV_REQUEST_TIMEOUT and slots, and what the request
   budget leaves after the caller's text, each read
   again in every view of its first pass with the same priors; its generated ids count as output.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from functools import partial

from openjev.affinity import Pin, RankRouter, pinned
from openjev.answering.box_reading import BoxReader, BoxReading
from openjev.answering.branch_reading import BranchReader
from openjev.answering.content_free import ContentFreePlan, ContentFreePriors
from openjev.answering.diagnostics import question_diagnostics
from openjev.answering.escalation import escalation_calls
from openjev.answering.evaluation import Branch, Evaluation, PreparedRequest, Rewrites, branches_of, hidden_states
from openjev.answering.readouts import QuestionViews, Readout
from openjev.answering.thinking import Limits, Thinker, reading
from openjev.answering.usage import billed
from openjev.backends.base import Backend, BackendError, BackendTimeout
from openjev.backends.slots import BackendSlots
from openjev.backends.warm_prefixes import WarmPrefixes
from openjev.config import Settings
from openjev.errors import Issue, RequestRejected
from openjev.prompting.budget import TokenBudget
from openjev.prompting.conversation_memo import ConversationMemo, Lookup
from openjev.prompting.encoding import PromptEncoder
from openjev.prompting.image_marks import PromptImages
from openjev.prompting.prompt_ids import SharedIds
from openjev.prompting.prompts import template_header_length
from openjev.prompting.question_texts import ANSWER_CUES
from openjev.prompting.tokenizer import ChatTokenizer, TemplateError
from openjev.request.images import ImageInput
from openjev.request.schema import BoxQuestion, SystemOneRequest
from openjev.request.sizes import question_bytes
from openjev.request.validation import check_request
from openjev.tasks.stage import TaskStage


class Engine:
    """Built once the backend is ready (its context length is known); checks the labels on creation."""

    def __init__(
        self, settings: Settings, chat: ChatTokenizer, backend: Backend, tasks: TaskStage | None = None
    ) -> None:
        self.settings = settings
        #: The tasks stage (`tasks/stage.py`): questions rewritten before prompting, answers calibrated after.
        self.tasks = tasks
        self.chat = chat
        self.views = QuestionViews(settings, chat)
        self.content_free = ContentFreePriors(chat, settings.content_free_cache_bytes)
        self.encoder = PromptEncoder(chat, settings.tokenize_cache_bytes)
        self.memo = ConversationMemo(chat, settings.conversation_memo_bytes, self.encoder.cuts_at_special_tokens)
        self.backend = backend
        #: The budgets of a request without and with the long-context header (`budget.py`).
        self.budget = TokenBudget.of(settings, backend.context_length, long_context=False)
        self.long_budget = TokenBudget.of(settings, backend.context_length, long_context=True)
        slots = BackendSlots(settings.max_concurrent_branches)
        #: Several data-parallel ranks: which one serves each evaluation (None: one rank, nothing routed).
        self.router = RankRouter.of(backend.data_parallel_size)
        self._template_header = template_header_length(chat)
        self.warm_prefixes = WarmPrefixes(backend.prefix_cache_tokens, settings.warm_prefix_share)
        self.thinker = Thinker(
            settings, chat, backend, slots, [ANSWER_CUES[cue] for cue in set(self.views.cues.values())]
        )
        #: Box questions (`box_reading.py`), stopped where a turn ends; the views read its digits.
        self.boxes = BoxReader(chat, backend, slots, self.thinker.end_ids)
        self.views.box_ids = self.boxes.read_ids
        self.reader = BranchReader(
            self.views, self.content_free, self.boxes, backend, slots, chat.ids_below(backend.vocab_size)
        )
        #: The calibration file in force (its path as configured), for /health and /v1/limits.
        self.calibration_source: str | None = self.views.calibration.source if self.views.calibration else None
        #: The served model's images in prompts (`image_marks.py`); its `vision` is None for a text-only model.
        self.images = PromptImages(chat, backend.vision, settings)

    def budget_for(self, long_context: bool) -> TokenBudget:
        return self.long_budget if long_context else self.budget

    # -- 1. prepare -------------------------------------------------------------------------------

    def look_up(self, request: SystemOneRequest, body_bytes: int) -> tuple[Lookup | None, int]:
        """The memo's lookup for `prepare` (`ConversationMemo.early_lookup`), and about how many bytes of
        text `prepare` will render and tokenize: for a conversation that extends one remembered, its new
        messages (with the template's markup around each) and every question's texts (counted to just
        past OPENJEV_INLINE_PREPARATION_BYTES); anything else, its whole body of `body_bytes`. Either
        way, with the worked questions of the tasks it uses."""
        lookup = self.memo.early_lookup(request.state)
        added = self.tasks.added_bytes(request) if self.tasks is not None else 0
        if lookup is None or lookup.new_text_bytes is None:
            return lookup, body_bytes + added
        limit = self.settings.inline_preparation_bytes - lookup.new_text_bytes
        return lookup, lookup.new_text_bytes + question_bytes(request, limit) + added

    def prepare(
        self,
        request: SystemOneRequest,
        *,
        checked: bool = False,
        lookup: Lookup | None = None,
        images: Mapping[str, ImageInput] | None = None,
        long_context: bool = False,
        tasks: bool = True,
        hidden: frozenset[str] = frozenset(),
    ) -> PreparedRequest:
        """`checked`: the caller ran `check_request` on it and found nothing; `lookup`: `look_up`'s, made just
        before (None: looked up here); `images`: each asset's image, made safe by `self.images.prepare` (in its
        own slot); `long_context`: the long-context header was sent; `tasks`: apply the tasks stage (False: a
        fit's raw readouts); `hidden`: questions read with their hidden state (a task's head adds its own)."""
        budget = self.budget_for(long_context)
        rewrites: Rewrites = {}
        if tasks and self.tasks is not None:
            request, rewrites, headed = self.tasks.apply(request)
            checked, hidden = checked and not rewrites, hidden | headed
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
        planned, prompts = self.views.plan(request.questions, framing.frame, marks)
        # Per prompt: its images in pad order, and the positions they add beyond their pads.
        prompts, shown, extra = self.images.place(marks, prompts, safe)
        question_ids = [question_id for question_id, *_ in planned]
        asked = [view == 0 for _, _, view, *_ in planned]
        new_prefix_ids, *suffixes = budget.encode_within(self.encoder, prompts, len(known), extra, question_ids, asked)
        shared_prefix_ids = known + new_prefix_ids
        branches = branches_of(planned, suffixes, shown[1:], extra[1:])
        # A question's own image is no content-free text: its prior is not read.
        wanted = [self.views.wants_content_free(branch.question) and not branch.images for branch in branches]
        content_free = self.content_free.plan(branches, wanted)
        tokens_left = self._first_pass_left(budget, len(shared_prefix_ids) + extra[0], branches, asked, content_free)
        if marks is None:
            self.memo.remember(framing, shared_prefix_ids)
        return PreparedRequest(
            shared_prefix_ids=shared_prefix_ids,
            branches=branches,
            content_free=content_free,
            tokens_left=tokens_left,
            affinity_key=self.images.affinity_key(shared_prefix_ids, self._template_header, shown[0]),
            thinking=request.model == self.settings.think_model,
            prefix_images=shown[0],
            prefix_image_tokens=extra[0],
            long_context=long_context,
            known_tokens=len(known),
            rewrites=rewrites,
            hidden=hidden,
        )

    def _first_pass_left(
        self, budget: TokenBudget, prefix: int, branches: list[Branch], asked: list[bool], content_free: ContentFreePlan
    ) -> int:
        """The request budget left after the first pass: the caller's questions (`asked`: the view the
        caller sent) are counted; openjev's own calls (other views, content-free readouts) count whole,
        a capacity matter (budget.py)."""
        sent = [(branch.question_id, len(branch.suffix_ids) + branch.image_tokens) for branch in branches]
        own = [(qid, prefix + tokens) for (qid, tokens), view in zip(sent, asked, strict=True) if not view]
        own += [(branches[index].question_id, tokens) for index, tokens in content_free.readouts]
        return budget.check_first_pass(
            prefix,
            [counted for counted, view in zip(sent, asked, strict=True) if view],
            own,
            {b.question_id: self.boxes.max_tokens for b in branches if isinstance(b.question, BoxQuestion)},
        )

    # -- 2. evaluate ------------------------------------------------------------------------------

    async def evaluate(self, prepared: PreparedRequest) -> Evaluation:
        """The first pass and, in the thinking tier, its escalations, on one data-parallel rank whose
        load counts every call the evaluation may make."""
        # A task's answer is fit on plain first-pass readouts: its questions keep it and never think.
        thinkers = [b.question_id for b in prepared.branches if b.question_id not in prepared.rewrites]
        thinking = escalation_calls(thinkers, self.settings.think_max_share) if prepared.thinking else 0
        calls = 1 + len(prepared.branches) + len(prepared.content_free.missing) + thinking
        with pinned(self.router, prepared.affinity_key, calls) as pin:
            deadline = asyncio.get_running_loop().time() + self.settings.request_timeout
            evaluation, first_pass = await self._first_pass(prepared, pin)
            if not prepared.thinking:
                return evaluation.rewritten(prepared.rewrites)
            read = partial(reading, self.views, prepared.questions, first_pass)
            limits = Limits(deadline, self.budget_for(prepared.long_context).branch_limit, prepared.tokens_left)
            plain = {qid: answer for qid, answer in evaluation.answers.items() if qid not in prepared.rewrites}
            escalation = await self.thinker.escalate(plain, prepared.shared_prefix_ids, read, limits, pin)
            self.warm_prefixes.spend(pin.rank, escalation.input_tokens + escalation.output_tokens)
            return evaluation.escalated(escalation).rewritten(prepared.rewrites)

    def _cache_tokens(self, prepared: PreparedRequest) -> int:
        """The most an evaluation's first pass adds to the backend's prefix cache: the shared prefix once,
        each branch's suffix and output ids, the content-free readouts."""
        branches = sum(
            len(b.suffix_ids) + b.image_tokens + (self.boxes.max_tokens if isinstance(b.question, BoxQuestion) else 1)
            for b in prepared.branches
        )
        return len(prepared.shared_prefix_ids) + prepared.prefix_image_tokens + branches + prepared.content_free.tokens

    async def _first_pass(self, prepared: PreparedRequest, pin: Pin) -> tuple[Evaluation, dict[str, list[Readout]]]:
        """The warm-up (unless the prefix is cached), then every branch and content-free readout at once,
        answered; and the readouts."""
        prefix, seen = SharedIds(prepared.shared_prefix_ids), prepared.prefix_images
        use = self.warm_prefixes.begin(prefix, seen, pin.rank, self._cache_tokens(prepared), prepared.known_tokens)
        try:
            async with asyncio.timeout(self.settings.request_timeout):
                started = time.perf_counter()
                warm = None if use.cached else await self.reader.warm_up(prefix, prepared, pin)
                warmed = time.perf_counter()
                try:
                    read, results, priors, prior_calls, prior_tokens = await self.reader.fan_out(prefix, prepared, pin)
                except* BackendError as failures:
                    raise failures.exceptions[0] from None
                finished = time.perf_counter()
        except TimeoutError as error:
            raise BackendTimeout(
                f"the backend did not finish within OPENJEV_REQUEST_TIMEOUT={self.settings.request_timeout:g}s"
            ) from error
        reported = [result.cached_tokens for result in results]
        self.warm_prefixes.settle(use, reported)
        readouts, answers = self.views.answers(read, results, priors)
        written = [r.generated if isinstance(r, BoxReading) else 1 for r in results]
        # Each question as sent: its first view (`readouts.py`: view 0 shows the options as sent).
        asked = [
            (len(b.suffix_ids) + b.image_tokens, out, cached)
            for b, out, cached in zip(read, written, reported, strict=True)
            if b.offset == 0
        ]
        prefix_tokens = len(prefix.ids) + prepared.prefix_image_tokens
        evaluation = Evaluation(
            answers=answers,
            input_tokens=(warm.prompt_tokens if warm else 0)
            + sum(result.prompt_tokens for result in results)
            + prior_tokens,
            output_tokens=(1 if warm else 0) + prior_calls + sum(written),
            prefix_tokens=prefix_tokens,
            cached_tokens=None if any(value is None for value in reported) else sum(reported),  # type: ignore[misc]
            prefill_seconds=warmed - started,
            branches_seconds=finished - warmed,
            usage=billed(prefix_tokens, asked, warm is not None, warm.cached_tokens if warm else None),
            diagnostics=question_diagnostics(read, results),
            hidden_states=hidden_states(read, results),
        )
        return evaluation, readouts
