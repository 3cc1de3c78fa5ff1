"""The service behind the HTTP routes: one backend, its start-up, and admission of evaluations.

Contract:
- `start()` starts the backend, resolves the tokenizer and builds the `Engine` (which checks the
  answer labels). Until it has finished, `runtime()` raises `NotReady`. A start-up failure is logged
  with its traceback, kept in `startup_error` (shown by `/health`) and handed to `on_fatal`, so the
  process can stop instead of answering 503 forever.
- `prepare(work)` holds one of OPENJEV_MAX_CONCURRENT_PREPARATIONS slots while a request is rendered
  and tokenized on a worker thread (`inline`: on the event loop, for a body of at most
  OPENJEV_INLINE_PREPARATION_BYTES, whose preparation takes less than a thread's hand-off), and
  `admit()` one of OPENJEV_MAX_CONCURRENT_REQUESTS evaluation slots; with none free either raises
  `Overloaded` at once: work is refused, never queued. Their own limit keeps the CPU spent on
  preparations (a 2 MB state tokenizes for seconds) bounded whatever the evaluation limit.
- `prepare_images(work)` decodes a request's images on a worker thread in slots of their own
  (OPENJEV_MAX_CONCURRENT_IMAGE_PREPARATIONS), before the request takes any other slot, with a short
  queue (OPENJEV_IMAGE_PREPARATION_QUEUE, first come first served) and `Overloaded` past it: seconds
  of image decoding never hold a slot a text request needs, and each kind is refused on its own.
- A fit's readouts (`api/task_fits.py`) hold one of OPENJEV_TASK_FIT_READOUTS slots shared by every
  fit (`fit_readouts`, waited for in turn, never refused) and, within it, `admit(fit=True)` and
  `prepare(..., fit=True)` take no caller's slot: fits never make a caller's request a 529, and the
  backend sees at most OPENJEV_MAX_CONCURRENT_REQUESTS + OPENJEV_TASK_FIT_READOUTS evaluations.
- `runtime().check_model(name)` accepts the compatibility alias, the served name, configured aliases
  (OPENJEV_MODEL_ALIASES, OPENJEV_OPENAI_MODEL_ALIASES) and the thinking tier's name (OPENJEV_THINK_MODEL).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from openjev import metrics
from openjev.answering.answer_settings import answer_settings
from openjev.backends.base import Backend
from openjev.config import Settings, default_cache_dir, served_model_name
from openjev.endpoints import COMPAT_MODEL_ALIAS
from openjev.engine import Engine
from openjev.errors import ModelNotFound, NotReady, Overloaded
from openjev.prompting.tokenizer import ChatTokenizer
from openjev.prompting.tokenizer_source import resolve_tokenizer_dir
from openjev.tasks.deciding import shut_down as shut_down_fits
from openjev.tasks.jobs import FitJobs
from openjev.tasks.stage import TaskStage
from openjev.tasks.store import TaskStore

log = logging.getLogger("openjev")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Runtime:
    """Everything that exists only once the backend is ready."""

    engine: Engine
    served_model_name: str
    #: What the request's `model` may say: the compatibility alias, the served name, configured aliases.
    accepted_models: frozenset[str]
    startup_seconds: float

    def check_model(self, name: str) -> None:
        if name not in self.accepted_models:
            raise ModelNotFound(f"model {name!r} is not served here; use one of {sorted(self.accepted_models)}")


class Slots:
    """`limit` holders at once and at most `queue` waiting, first come first served; past that
    `Overloaded` with `refusal(active, waiting)`. A thread cannot be stopped: if the caller is cancelled,
    its slot stays taken until the thread has finished, so the limit holds for the CPU actually in use."""

    def __init__(self, limit: int, queue: int, refusal: Callable[[int, int], str]) -> None:
        self.limit = limit
        self.queue = queue
        self.refusal = refusal
        self.active = 0
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()

    async def acquire(self) -> None:
        if self.active < self.limit and not self._waiting:
            self.active += 1
            return
        if len(self._waiting) >= self.queue:
            raise Overloaded(self.refusal(self.active, len(self._waiting)))
        turn = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        try:
            await turn  # `release` hands its slot over: `active` stays as it is
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release()  # the slot was handed over as the caller left: pass it on
            else:
                self._waiting.remove(turn)
            raise

    def release(self) -> None:
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self.active -= 1

    async def run(self, work: Callable[[], T], *, inline: bool = False) -> T:
        """`work` in a slot: on a worker thread, or here on the event loop (`inline`)."""
        await self.acquire()
        if inline:
            try:
                return work()
            finally:
                self.release()
        future = asyncio.ensure_future(asyncio.to_thread(work))
        future.add_done_callback(self._finished)
        return await asyncio.shield(future)

    def _finished(self, future: asyncio.Future[Any]) -> None:
        self.release()
        if not future.cancelled():
            future.exception()  # retrieved here too, in case the caller was cancelled and never reads it


class Service:
    def __init__(
        self, settings: Settings, backend: Backend, *, on_fatal: Callable[[BaseException], None] | None = None
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.started_at = time.monotonic()
        self.started_wall = time.time()
        self.active_evaluations = 0
        self.preparations = Slots(
            settings.max_concurrent_preparations,
            0,
            lambda active, _: (
                f"{active} requests are being prepared "
                f"(OPENJEV_MAX_CONCURRENT_PREPARATIONS={settings.max_concurrent_preparations}); retry shortly"
            ),
        )
        self.image_preparations = Slots(
            settings.max_concurrent_image_preparations,
            settings.image_preparation_queue,
            lambda active, waiting: (
                f"{active} requests' images are being prepared and {waiting} wait "
                f"(OPENJEV_MAX_CONCURRENT_IMAGE_PREPARATIONS={settings.max_concurrent_image_preparations}, "
                f"OPENJEV_IMAGE_PREPARATION_QUEUE={settings.image_preparation_queue}); retry shortly"
            ),
        )
        self.fit_readouts = asyncio.Semaphore(settings.task_fit_readouts)
        self.fit_evaluations = 0
        self.startup_error: str | None = None
        #: Read once, as the engine reads the calibration file once (see `answering.answer_settings`).
        self.answer_settings = answer_settings(settings)
        self._runtime: Runtime | None = None
        self._on_fatal = on_fatal
        #: Tasks (`POST /v1/tasks`), read from their directory now: a restart keeps them.
        directory = settings.tasks_dir or (settings.cache_dir or default_cache_dir()) / "tasks"
        self.tasks = TaskStore(directory, settings.task_max_tasks, settings.task_max_bytes)
        #: Fits running or finished since start (`/v1/tasks/fits`), their readouts kept beside the tasks.
        self.fit_jobs = FitJobs(directory, settings.task_max_fits, self.answer_settings)

    @property
    def current(self) -> Runtime | None:
        return self._runtime

    def runtime(self) -> Runtime:
        if self._runtime is None:
            raise NotReady("openjev is starting: the backend is not ready yet")
        return self._runtime

    def model_names(self) -> tuple[str | None, tuple[str, ...]]:
        """(served name if known yet, configured aliases)."""
        if self._runtime is not None:
            return self._runtime.served_model_name, self.aliases
        return self.settings.served_model_name or self.backend.model_name, self.aliases

    @property
    def aliases(self) -> tuple[str, ...]:
        """Every configured alias of the served model: openjev's own, then OpenAI's model names."""
        return tuple(dict.fromkeys([*self.settings.model_aliases, *self.settings.openai_model_aliases]))

    async def start(self) -> None:
        started = time.monotonic()
        try:
            await self.backend.start()
            tokenizer_dir = await asyncio.to_thread(
                resolve_tokenizer_dir,
                self.settings.tokenizer,
                self.backend.tokenizer_dir,
                self.settings.model,
                self.settings.revision,
            )
            chat = await asyncio.to_thread(ChatTokenizer, tokenizer_dir, self.settings.cache_dir)
            served = served_model_name(self.settings, self.backend.model_name)
            stage = TaskStage(
                self.tasks,
                served,
                self.answer_settings,
                self.settings.task_match_questions,
                self.settings.confidence,
                lambda: self.backend.hidden_states,
            )
            engine = await asyncio.to_thread(Engine, self.settings, chat, self.backend, stage)
        except Exception as error:
            self.startup_error = str(error) or type(error).__name__
            log.exception("openjev could not start")
            if self._on_fatal is not None:
                self._on_fatal(error)
            return
        accepted = frozenset({COMPAT_MODEL_ALIAS, served, *self.aliases, self.settings.think_model})
        self._runtime = Runtime(engine, served, accepted, time.monotonic() - started)
        log.info("openjev is ready: serving %s (startup %.1fs)", served, self._runtime.startup_seconds)

    async def aclose(self) -> None:
        shut_down_fits()
        await self.backend.aclose()

    def prepares_inline(self, new_bytes: int) -> bool:
        """Whether a request that brings `new_bytes` of new text (`Engine.look_up`) is prepared on the event loop."""
        return new_bytes <= self.settings.inline_preparation_bytes

    async def prepare(self, work: Callable[[], T], *, inline: bool = False, fit: bool = False) -> T:
        """Run `work` on a worker thread (`inline`: here, on the event loop) in one of the preparation
        slots (`Overloaded` when none is free); a fit's readout (`fit`) in the fit slot it holds."""
        if fit:
            return work() if inline else await asyncio.to_thread(work)
        return await self.preparations.run(work, inline=inline)

    async def prepare_images(self, work: Callable[[], T]) -> T:
        """Run `work` (a request's image decoding) on a worker thread in an image preparation slot, after
        waiting in the short queue if need be (`Overloaded` when that is full too)."""
        return await self.image_preparations.run(work)

    @contextlib.contextmanager
    def admit(self, *, fit: bool = False) -> Iterator[None]:
        """One of OPENJEV_MAX_CONCURRENT_REQUESTS evaluation slots (`Overloaded` when none is free); a fit's
        readout (`fit`) is counted apart, in the fit slot it holds (module doc)."""
        limit = self.settings.max_concurrent_requests
        if not fit and self.active_evaluations >= limit:
            raise Overloaded(
                f"{self.active_evaluations} evaluations are in progress (OPENJEV_MAX_CONCURRENT_REQUESTS={limit}); "
                "retry shortly"
            )
        self._count(fit, 1)
        try:
            yield
        finally:
            self._count(fit, -1)

    def _count(self, fit: bool, change: int) -> None:
        if fit:
            self.fit_evaluations += change
        else:
            self.active_evaluations += change
        metrics.IN_FLIGHT.inc(change)
