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
- `runtime().check_model(name)` accepts the compatibility alias, the served name, configured aliases
  (OPENJEV_MODEL_ALIASES, OPENJEV_OPENAI_MODEL_ALIASES) and the thinking tier's name (OPENJEV_THINK_MODEL).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from openjev import metrics
from openjev.backends.base import Backend
from openjev.config import COMPAT_MODEL_ALIAS, Settings, answer_settings, served_model_name
from openjev.engine import Engine
from openjev.errors import ModelNotFound, NotReady, Overloaded
from openjev.prompting.tokenizer import ChatTokenizer
from openjev.prompting.tokenizer_source import resolve_tokenizer_dir

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


class Service:
    def __init__(
        self, settings: Settings, backend: Backend, *, on_fatal: Callable[[BaseException], None] | None = None
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.started_at = time.monotonic()
        self.started_wall = time.time()
        self.active_evaluations = 0
        self.active_preparations = 0
        self.startup_error: str | None = None
        #: Read once, as the engine reads the calibration file once (see `config.answer_settings`).
        self.answer_settings = answer_settings(settings)
        self._runtime: Runtime | None = None
        self._on_fatal = on_fatal

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
            engine = await asyncio.to_thread(Engine, self.settings, chat, self.backend)
        except Exception as error:
            self.startup_error = str(error) or type(error).__name__
            log.exception("openjev could not start")
            if self._on_fatal is not None:
                self._on_fatal(error)
            return
        served = served_model_name(self.settings, self.backend.model_name)
        accepted = frozenset({COMPAT_MODEL_ALIAS, served, *self.aliases, self.settings.think_model})
        self._runtime = Runtime(engine, served, accepted, time.monotonic() - started)
        log.info("openjev is ready: serving %s (startup %.1fs)", served, self._runtime.startup_seconds)

    async def aclose(self) -> None:
        await self.backend.aclose()

    def prepares_inline(self, new_bytes: int) -> bool:
        """Whether a request that brings `new_bytes` of new text (`Engine.look_up`) is prepared on the event loop."""
        return new_bytes <= self.settings.inline_preparation_bytes

    async def prepare(self, work: Callable[[], T], *, inline: bool = False) -> T:
        """Run `work` on a worker thread (`inline`: here, on the event loop) in one of the preparation
        slots (`Overloaded` when none is free). A thread cannot be stopped: if the caller is cancelled,
        the slot stays taken until the thread has finished, so the limit holds for the CPU actually in use."""
        limit = self.settings.max_concurrent_preparations
        if self.active_preparations >= limit:
            raise Overloaded(
                f"{self.active_preparations} requests are being prepared "
                f"(OPENJEV_MAX_CONCURRENT_PREPARATIONS={limit}); retry shortly"
            )
        self.active_preparations += 1
        if inline:
            try:
                return work()
            finally:
                self.active_preparations -= 1
        future = asyncio.ensure_future(asyncio.to_thread(work))
        future.add_done_callback(self._prepared)
        return await asyncio.shield(future)

    def _prepared(self, future: asyncio.Future[Any]) -> None:
        self.active_preparations -= 1
        if not future.cancelled():
            future.exception()  # retrieved here too, in case the caller was cancelled and never reads it

    @contextlib.contextmanager
    def admit(self) -> Iterator[None]:
        limit = self.settings.max_concurrent_requests
        if self.active_evaluations >= limit:
            raise Overloaded(
                f"{self.active_evaluations} evaluations are in progress (OPENJEV_MAX_CONCURRENT_REQUESTS={limit}); "
                "retry shortly"
            )
        self.active_evaluations += 1
        metrics.IN_FLIGHT.inc()
        try:
            yield
        finally:
            self.active_evaluations -= 1
            metrics.IN_FLIGHT.dec()
