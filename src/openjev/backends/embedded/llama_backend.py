"""The embedded backend on llama.cpp: the packaged GGUF run as it is (Q4_K_M weights, no conversion).

Same contract as `EmbeddedBackend` (`backend.py`), on another runtime (`llama_runtime.py`):
`readout(call)` returns the log-softmax over the whole vocabulary after the prompt, gathered at the
label ids; `generate(call)` decodes greedily or sampled with a seed, under a `constraint` when given.

Prefix reuse: every evaluated prompt stays resident as a sequence of llama.cpp's unified KV memory
(`sequence_cache.py`); a call shares the longest matching prefix into a fresh sequence and evaluates
only the rest. Batching: the worker takes every waiting readout at once (lingering 2 ms for the
siblings of a branch: the engine submits a request's branches together) and evaluates them in one
`llama_decode`, each branch a sequence of its own over the shared prefix cells, the output head only
at each branch's last token. A readout that asks for the hidden state gets the final norm's output at
that token, read in the same decode (`llama_hidden.py`).

Threading: the model loads on a daemon thread; readouts and generations run on one worker thread in
arrival order. Cancelling the awaiting task drops a waiting call; a running decode whose every call
is cancelled is stopped by llama.cpp's abort callback, and the cancellation propagates once it has.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from openjev.backends.base import (
    BackendError,
    Generation,
    GenerationCall,
    LabelLogprobs,
    ReadoutCall,
)
from openjev.backends.embedded.batching import Job
from openjev.backends.embedded.generation import GenerationJob
from openjev.backends.embedded.llama_generation import decode_tokens
from openjev.backends.embedded.llama_runtime import Aborted, LlamaError, LlamaRuntime, NoRoom, Piece, in_batches
from openjev.backends.embedded.local import LocalModelBackend
from openjev.backends.embedded.model_source import resolve_gguf
from openjev.backends.embedded.sequence_cache import SequenceCache

if TYPE_CHECKING:
    from openjev.config import Settings

logger = logging.getLogger(__name__)

CallT = TypeVar("CallT", ReadoutCall, GenerationCall)

#: Sequence ids of the context: resident prompts plus one request's branches.
SEQUENCES = 256
#: Cells of resident prompts a batch does not build on, kept for later reuse (`sequence_cache.trim`):
#: each new token attends over every cell in use, so 1,024 costs a prefill about a tenth more at most.
RESIDENT_TOKENS = 1024
#: How long the worker waits for a branch's siblings when it finds it alone.
LINGER_SECONDS = 0.002


class LlamaCppBackend(LocalModelBackend):
    """Label readout with llama.cpp on the CPU over a GGUF (`local_model`: packaged:<key> or a .gguf).

    `context` caps the KV memory in tokens (0: the model's trained context); `threads` defaults to the
    physical cores this process may use; `library`: a self-built llama.cpp (None: the `cpu` extra's).
    """

    def __init__(
        self,
        local_model: str | None = None,
        *,
        cache_dir: Path | None = None,
        threads: int | None = None,
        context: int = 0,
        library: Path | None = None,
    ) -> None:
        super().__init__(local_model, cache_dir, threads, "openjev-llama")
        self.context = context
        self.library = library
        self.dtype = "gguf"
        self.runtime: LlamaRuntime | None = None
        self.sequences = SequenceCache(SEQUENCES)
        self._waiting: deque[Job] = deque()
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> LlamaCppBackend:
        return cls(settings.local_model, cache_dir=settings.cache_dir, library=settings.llama_lib)

    @property
    def context_length(self) -> int | None:
        return self.runtime.shape.context_length if self.runtime else None

    def _facts(self) -> dict[str, Any]:
        return {
            "runtime": "llama.cpp",
            "path": str(self.model.gguf) if self.model else None,
            "dtype": self.dtype,
            "prefix_cache": self.sequences.stats(),
            "hidden_states": self.hidden_states.layer,
        }

    def _enqueue(self, job: Job) -> None:
        with self._lock:
            self._waiting.append(job)

    def _withdraw(self, job: Job) -> bool:
        with self._lock:
            if job in self._waiting:
                self._waiting.remove(job)
                return True
        return False

    def _release(self) -> None:
        for job in self._waiting:
            job.future.cancel()
        if self.runtime is not None:
            self.runtime.close()
            self.runtime = None

    # ---- worker thread -------------------------------------------------------------------------

    def _load(self) -> None:
        model = resolve_gguf(self.local_model, cache_dir=self.cache_dir)
        self.model = model
        if self._state == "starting":
            self._state = "loading"
        started = time.monotonic()
        assert model.gguf is not None
        logger.info("loading %s with llama.cpp from %s", model.name, model.gguf)
        self.runtime = LlamaRuntime(
            model.gguf, threads=self.threads, context=self.context, sequences=SEQUENCES, library=self.library
        )
        self._load_seconds = round(time.monotonic() - started, 2)
        logger.info(
            "loaded %s in %.1f s (llama.cpp, %d threads, context %d)",
            model.name,
            self._load_seconds,
            self.threads,
            self.runtime.shape.context_length,
        )

    def _take(self) -> list[Job]:
        """The waiting jobs, each marked running (so a cancellation waits for it) unless already cancelled."""
        with self._lock:
            jobs = [job for job in self._waiting if job.future.set_running_or_notify_cancel()]
            self._waiting.clear()
        return jobs

    def _drain(self) -> None:
        jobs = self._take()
        if len(jobs) == 1 and self.sequences.match(tuple(jobs[0].call.input_ids), record=False).length:
            time.sleep(LINGER_SECONDS)  # a branch: its siblings are on their way
            jobs += self._take()
        if not jobs or self.runtime is None:
            return
        # Cleared before the jobs are seen running: a cancellation from now on sets it for them.
        self.runtime.abort.clear()
        self._running = jobs
        self._stop_running()  # one cancelled while it was taken
        try:
            results = self._answer(jobs)
        except Aborted:
            results = [None] * len(jobs)
        except Exception as exc:
            if not isinstance(exc, BackendError):
                logger.exception("llama.cpp readout failed")
                exc = BackendError(f"embedded model failed: {type(exc).__name__}: {exc}")
            for job in jobs:
                job.future.set_exception(exc)
            return
        finally:
            self._running = []
        if results[0] is not None:  # answered, not abandoned
            self._readouts += len(jobs)
            self._batched_readouts += len(jobs) if len(jobs) > 1 else 0
        for job, result in zip(jobs, results, strict=True):
            job.future.set_result(result)

    def _answer(self, jobs: list[Job]) -> list[LabelLogprobs | None]:
        rows: list[np.ndarray] = [np.empty(0)] * len(jobs)
        states: list[np.ndarray | None] = [None] * len(jobs)
        reused = [0] * len(jobs)
        pending: list[tuple[int, tuple[int, ...]]] = []
        hidden = any(job.call.hidden_state for job in jobs)
        for index, job in enumerate(jobs):
            ids = tuple(job.call.input_ids)
            match = self.sequences.match(ids)
            if match.answers(ids, hidden=job.call.hidden_state):
                assert match.entry is not None
                rows[index], states[index], reused[index] = match.entry.logprobs, match.entry.hidden, len(ids)
            else:
                pending.append((index, ids))
        for group in in_batches(pending, self.runtime.batch_tokens if self.runtime else 0):
            evaluated = self._evaluate([ids for _, ids in group], hidden=hidden)
            for (index, _), (row, state, length, _seq) in zip(group, evaluated, strict=True):
                rows[index], states[index], reused[index] = row, state, length
        return [
            LabelLogprobs(
                logprobs=tuple(float(row[token]) for token in job.call.label_token_ids),
                prompt_tokens=len(job.call.input_ids),
                cached_tokens=cached,
                hidden_state=state if job.call.hidden_state else None,
                top_token=int(np.argmax(row)),
            )
            for job, row, state, cached in zip(jobs, rows, states, reused, strict=True)
        ]

    def _evaluate(
        self, prompts: list[tuple[int, ...]], *, hidden: bool = False
    ) -> list[tuple[np.ndarray, np.ndarray | None, int, int]]:
        """Each prompt over its longest resident prefix, in one decode, then resident itself:
        (distribution, hidden state or None, reused tokens, sequence) per prompt; with `hidden` the
        decode reads every prompt's final hidden state, and a resident prompt without one is evaluated
        again from its last token. Where the KV memory has no room, the least recently used entries go,
        one per try, until it has (or nothing is left to evict)."""
        runtime = self.runtime
        assert runtime is not None
        while True:
            matches = [self.sequences.match(ids, record=False).evaluable(ids) for ids in prompts]
            sources = [match.entry.seq for match in matches if match.entry is not None]
            dropped: list[int] = []
            self.sequences.trim(RESIDENT_TOKENS, sources, dropped)
            for gone in dropped:
                runtime.drop(gone)
            dropped.clear()
            pieces: list[Piece] = []
            for ids, match in zip(prompts, matches, strict=True):
                seq = self.sequences.allocate([piece.seq for piece in pieces] + sources, dropped)
                if seq is None:
                    raise BackendError(f"{len(prompts)} prompts at once exceed the {SEQUENCES} sequences")
                for gone in dropped:
                    runtime.drop(gone)
                dropped.clear()
                runtime.drop(seq)
                if match.entry is not None:
                    runtime.copy(match.entry.seq, seq, match.length)
                pieces.append(Piece(seq, match.length, ids[match.length :]))
            try:
                # Kept as they are stored, so a prompt asked again reads the very same values.
                if hidden:
                    found, states = runtime.run_hidden(pieces)
                else:
                    found, states = runtime.run(pieces), [None] * len(pieces)
                rows = [row.astype(np.float32) for row in found]
            except BaseException as exc:
                for piece in pieces:
                    runtime.drop(piece.seq)
                    self.sequences.release(piece.seq)
                if not isinstance(exc, NoRoom):
                    raise
                if not self.sequences.evict_one([], dropped):
                    tokens = sum(len(piece.tokens) for piece in pieces)
                    raise BackendError(
                        f"{tokens} tokens do not fit the KV memory ({runtime.shape.context_length} tokens)"
                    ) from None
                for gone in dropped:
                    runtime.drop(gone)
                continue
            for piece, ids, row, state, match in zip(pieces, prompts, rows, states, matches, strict=True):
                parent = match.entry.seq if match.entry is not None else None
                self.sequences.put(piece.seq, ids, row, parent, piece.start, state)
            return [
                (row, state, piece.start, piece.seq) for row, state, piece in zip(rows, states, pieces, strict=True)
            ]

    def _decode(self, job: GenerationJob) -> Generation:
        """Worker thread: one generation, token by token in a sequence of its own over the prompt's."""
        runtime, call, ids = self.runtime, job.call, tuple(job.call.input_ids)
        assert runtime is not None
        runtime.abort.clear()
        self._running = [job]
        try:
            match = self.sequences.match(ids)
            if match.entry is not None and match.whole(ids):
                source, logprobs, start = match.entry.seq, match.entry.logprobs, len(ids)
            else:
                [(logprobs, _state, start, source)] = self._evaluate([ids])
            seq = self._generation_sequence(source, len(ids))
            output, read = self._steps(runtime, (source, seq), ids, logprobs, job)
        except Aborted:
            raise BackendError("the generation was cancelled") from None
        except BackendError:
            raise
        except Exception as exc:
            logger.exception("llama.cpp generation failed")
            raise BackendError(f"embedded generation failed: {type(exc).__name__}: {exc}") from exc
        finally:
            self._running = []
        complete = call.constraint is not None and not call.constraint.allowed_after(output)
        finish = "stop" if output[-1] in set(call.stop_token_ids) or complete else "length"
        return Generation(tuple(output), len(ids), start, finish, tuple(read))

    def _generation_sequence(self, source: int, length: int) -> int:
        runtime, dropped = self.runtime, []
        assert runtime is not None
        self.sequences.trim(RESIDENT_TOKENS, [source], dropped)
        seq = self.sequences.allocate([source], dropped)
        if seq is None:
            raise BackendError("no sequence free for a generation")
        for gone in dropped:
            runtime.drop(gone)
        runtime.drop(seq)
        runtime.copy(source, seq, length)
        return seq

    def _steps(
        self, runtime: LlamaRuntime, sequences: tuple[int, int], ids: tuple[int, ...], logprobs: Any, job: Any
    ) -> tuple[list[int], list[tuple[float, ...]]]:
        """`llama_generation.decode_tokens` in the generation's sequence (`sequences`: the prompt's and its
        own, sharing the prompt's cells); the state after the prompt and every generated id but the last
        stays resident for the readout that follows."""
        source, seq = sequences
        try:
            output, read, last = decode_tokens(runtime, seq, len(ids), logprobs, job.call, lambda: job.cancelled)
        except BaseException:
            runtime.drop(seq)
            self.sequences.release(seq)
            raise
        self.sequences.put(seq, ids + tuple(output[:-1]), last.astype(np.float32), source, len(ids))
        return output, read

    def _stop_running(self) -> None:
        running = self._running
        if running and all(job.cancelled for job in running) and self.runtime is not None:
            self.runtime.abort.set()

    def _check(self, call: CallT) -> CallT:
        self._ready()
        assert self.runtime is not None
        named = call.label_token_ids if isinstance(call, ReadoutCall) else call.stop_token_ids
        if call.images:
            raise BackendError(f"the embedded model {self.model_name} reads text only; it was sent images")
        try:
            self.runtime.check(call.input_ids, named)
        except LlamaError as exc:
            raise BackendError(str(exc)) from None
        return call
