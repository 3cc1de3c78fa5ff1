"""What both embedded runtimes (torch: `backend.py`, llama.cpp: `llama_backend.py`) share.

A model resolved from `local_model` and loaded by `start()` on a daemon thread of its own (`_load`,
which each runtime writes); one worker thread that runs all model work in arrival order: readouts
queued for its `_drain`, generations one at a time; cancellation that drops queued work and waits for
running work to stop, so no model work outlives it (`_stop_running` tells a runtime that can interrupt
a running step to do so); `health` with the facts every runtime reports; `hidden_states`, which both
return with a readout that asks; `aclose`.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from openjev.backends.base import (
    Backend,
    BackendHealth,
    BackendUnavailable,
    Generation,
    GenerationCall,
    HiddenStates,
    LabelLogprobs,
    ReadoutCall,
)
from openjev.backends.embedded.batching import Job
from openjev.backends.embedded.generation import GenerationJob
from openjev.backends.embedded.loading import load_on_thread
from openjev.backends.embedded.model_source import ResolvedModel
from openjev.backends.embedded.precision import physical_cores


class LocalModelBackend(Backend):
    """A model in this process, on the CPU; `threads` defaults to the physical cores it may use."""

    kind = "embedded"
    #: A CPU decodes a few to tens of tokens a second: a thinking budget of 1,024 would take minutes.
    default_think_budget = 64

    def __init__(self, local_model: str | None, cache_dir: Path | None, threads: int | None, worker: str) -> None:
        self.local_model = local_model
        self.cache_dir = cache_dir
        self.threads = threads or physical_cores()
        self.model: ResolvedModel | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=worker)
        self._worker = worker
        self._state = "created"
        self._error: str | None = None
        self._load_seconds: float | None = None
        self._readouts = self._batched_readouts = self._in_flight = 0
        self._running: list[Any] = []

    @property
    def hidden_states(self) -> HiddenStates:
        """Both runtimes read the output of the model's final norm at the prompt's last token, in the
        forward that computes the label logprobs."""
        return HiddenStates(True, layer="final")

    @property
    def model_name(self) -> str | None:
        return self.model.name if self.model else None

    @property
    def tokenizer_dir(self) -> Path | None:
        return self.model.path if self.model else None

    async def start(self) -> None:
        if self._state != "created":
            return
        self._state = "starting"
        try:
            await load_on_thread(self._load, f"{self._worker}-load")
        except BaseException as exc:
            self._state, self._error = "failed", f"{type(exc).__name__}: {exc}"
            raise
        if self._state == "loading":  # not closed meanwhile
            self._state = "ready"

    async def health(self) -> BackendHealth:
        detail: dict[str, Any] = {
            "state": self._state,
            "model": self.model_name,
            "source": self.model.source if self.model else self.local_model,
            "threads": self.threads,
            "context_length": self.context_length,
            "load_seconds": self._load_seconds,
            "readouts": self._readouts,
            "batched_readouts": self._batched_readouts,
            "in_flight": self._in_flight,
            **self._facts(),
        }
        if self._error:
            detail["error"] = self._error
        return BackendHealth(ready=self._state == "ready", detail=detail)

    async def readout(self, call: ReadoutCall) -> LabelLogprobs:
        self.refuse_hidden_states([call])
        job = Job(self._check(call))
        self._in_flight += 1
        try:
            self._enqueue(job)
            self._executor.submit(self._drain)
            try:
                result = await asyncio.wrap_future(job.future)
            except asyncio.CancelledError:
                job.cancelled = True
                if not self._withdraw(job) and not job.future.cancelled():
                    # Already running: it stops early once every job of its batch is cancelled. Wait
                    # for that, so no model work outlives the cancellation.
                    self._stop_running()
                    with contextlib.suppress(Exception):
                        await asyncio.wrap_future(job.future)
                raise
        finally:
            self._in_flight -= 1
        assert result is not None  # only a cancelled job yields None
        return result

    async def generate(self, call: GenerationCall) -> Generation:
        job = GenerationJob(self._check(call))
        self._in_flight += 1
        future = self._executor.submit(self._decode, job)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            job.cancelled = True
            if not future.cancel():
                # Running: it stops before its next token (or sooner); wait, so nothing outlives us.
                self._stop_running()
                with contextlib.suppress(BaseException):
                    await asyncio.wrap_future(future)
            raise
        finally:
            self._in_flight -= 1

    async def aclose(self) -> None:
        if self._state == "closed":
            return
        self._state = "closed"
        # Queued work is dropped and running work waited for, so no model work outlives this call.
        await asyncio.to_thread(self._executor.shutdown, wait=True, cancel_futures=True)
        self._release()

    def _ready(self) -> None:
        if self._state != "ready":
            raise BackendUnavailable(f"the embedded model is not ready ({self._state})")

    def _stop_running(self) -> None:
        """Called when the running work may have lost its last caller (the default: it checks by itself)."""

    @abc.abstractmethod
    def _load(self) -> None:
        """Load the model (on the loader thread): set `model`, then `_state` to "loading" while "starting"."""

    @abc.abstractmethod
    def _check(self, call: Any) -> Any:
        """`call` checked against the loaded model, ready to run."""

    @abc.abstractmethod
    def _decode(self, job: GenerationJob) -> Generation:
        """Worker thread: one generation."""

    @abc.abstractmethod
    def _facts(self) -> dict[str, Any]:
        """What `health` reports of this runtime: its name, precision, model path and prefix cache."""

    @abc.abstractmethod
    def _enqueue(self, job: Job) -> None:
        """Queue a readout for the worker's next `_drain`."""

    @abc.abstractmethod
    def _withdraw(self, job: Job) -> bool:
        """Take a queued readout back; False when the worker has it already."""

    @abc.abstractmethod
    def _drain(self) -> None:
        """Worker thread: run the waiting readouts."""

    @abc.abstractmethod
    def _release(self) -> None:
        """Free the model and its caches (after the worker has stopped)."""
