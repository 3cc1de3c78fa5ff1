"""The embedded backend: a causal LM run in-process on the CPU with transformers + torch.

`EmbeddedBackend.readout(call)` runs the prompt through the model once (prefill only, nothing is
generated) and returns the log-softmax over the whole vocabulary at the position after the prompt,
gathered at `call.label_token_ids`. `generate(call)` decodes over the cached prefix KV
(`generation.py`) on the same worker thread, so generations and readouts take turns.

Prefix reuse. openjev's engine first reads out the shared prefix of a request alone (the warm-up),
then one prompt per question that starts with that prefix. The backend keeps the KV cache after each
prompt in a `PrefixCache` (bounded in bytes, keyed by the prompt's token ids). A call restores a copy
of the longest cached entry whose ids are a prefix of its own and runs only the remaining tokens;
`cached_tokens` reports how many prompt tokens were reused (0 when none). A call whose ids equal a
cached entry is answered from the entry's stored final-position distribution without running the
model, so a repeated warm-up costs nothing.

Precision (`precision.py`): float32, bfloat16 (the output head still in fp32, so label probabilities
are not rounded to bf16 logit steps) or int8 (dynamic int8 linear layers); by default the fastest
this CPU runs natively. Reuse and a full prefill agree to ~1e-5 logp in fp32 and ~0.1 in bf16.

Threading. The model loads on a daemon thread (shutting down never waits for a first-start
conversion). All readouts run on one dedicated worker thread fed through a single-worker executor,
so the event loop never blocks and calls run one at a time in arrival order. Cancelling the awaiting
task drops a call that has not started; a running one stops at the next decoder layer (a forward
pre-hook checks its flag), and the cancellation propagates once it has stopped.

Images. A vision-language checkpoint (config.json with a `vision_config`) runs through `vision.py`: each
image pad is expanded into positions keyed by the image's sha256, and the same prefix reuse and batching
apply, with the 3-D rotary position state carried on each cached KV entry.

torch and transformers are imported lazily: importing this module needs only the base install; using
the backend needs the `cpu` extra.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openjev.backends.base import (
    BackendError,
    Generation,
    LabelLogprobs,
    ReadoutCall,
)
from openjev.backends.embedded.batching import Batch, Job, JobQueue, Row, forward_rows, rows_of
from openjev.backends.embedded.conversion import CPU_EXTRA_HINT
from openjev.backends.embedded.generation import Abandoned, GenerationJob, Model, decode
from openjev.backends.embedded.loading import cache_kwarg, context_length, load_model, release_freed_memory
from openjev.backends.embedded.local import LocalModelBackend
from openjev.backends.embedded.model_source import resolve_model
from openjev.backends.embedded.precision import auto_precision, normalize_precision, storage_dtype
from openjev.backends.embedded.prefix_cache import CacheEntry, PrefixCache, shared_copy, state_nbytes
from openjev.backends.embedded.vision import CallT, VisionModel, image_marker
from openjev.prompting.vision import VisionSpec

if TYPE_CHECKING:
    from openjev.config import Settings

logger = logging.getLogger(__name__)

DEFAULT_PREFIX_CACHE_BYTES = 1 << 30
DEFAULT_BATCH_BYTES = 1 << 29


class EmbeddedBackend(LocalModelBackend):
    """Label readout with a transformers causal LM on the CPU, with prefix KV-cache reuse.

    `local_model` is what `model_source.resolve_model` accepts (None: the packaged default);
    `start()` resolves it (converting a GGUF on first use) and loads it on the worker thread, so
    `model_name`, `tokenizer_dir` and `context_length` are known once `start()` returns. `dtype` is
    the precision (float32, bfloat16 or int8); None or "auto" picks `auto_precision()` at load;
    `threads` defaults to the physical cores this process may use; `prefix_cache_bytes` bounds the
    memory of cached prompt states (0 disables reuse).
    """

    def __init__(
        self,
        local_model: str | None = None,
        *,
        cache_dir: Path | None = None,
        dtype: str | None = None,
        threads: int | None = None,
        prefix_cache_bytes: int = DEFAULT_PREFIX_CACHE_BYTES,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> None:
        super().__init__(local_model, cache_dir, threads, "openjev-embedded")
        self.dtype = normalize_precision(dtype) if dtype and dtype != "auto" else None
        if self.dtype == "gguf":
            raise ValueError("the gguf precision runs on llama.cpp (LlamaCppBackend), not on torch")
        self.prefix_cache = PrefixCache(prefix_cache_bytes)
        self._queue = JobQueue(self.prefix_cache, batch_bytes)
        self._context_length: int | None = None
        # Set by _load on the worker thread.
        self._torch: Any = None
        self._lm: Any = None
        self._new_cache: Any = None
        self._cache_kwarg = "cache"
        self._decoder_cache_kwarg = "cache"
        self._vocab_size = 0
        self._vision: VisionModel | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> EmbeddedBackend:
        return cls(
            settings.local_model,
            cache_dir=settings.cache_dir,
            dtype=settings.embedded_precision,
            prefix_cache_bytes=settings.prefix_cache_bytes,
            batch_bytes=settings.embedded_batch_bytes,
        )

    @property
    def context_length(self) -> int | None:
        return self._context_length

    @property
    def vision(self) -> VisionSpec | None:
        return self._vision.spec if self._vision else None

    def _facts(self) -> dict[str, Any]:
        stats = self.prefix_cache.stats()
        return {
            "runtime": "torch",
            "path": str(self.model.path) if self.model else None,
            "dtype": self.dtype or "auto",
            "hidden_states": self.hidden_states.layer,
            "prefix_cache": {
                "entries": stats.entries,
                "bytes": stats.bytes,
                "capacity_bytes": stats.capacity_bytes,
                "hits": stats.hits,
                "misses": stats.misses,
                "evictions": stats.evictions,
            },
        }

    def _enqueue(self, job: Job) -> None:
        self._queue.put(job)

    def _withdraw(self, job: Job) -> bool:
        return self._queue.withdraw(job)

    def _release(self) -> None:
        self.prefix_cache.clear()
        self._lm = None
        release_freed_memory()

    # ---- worker thread -------------------------------------------------------------------------

    def _load(self) -> None:
        try:
            import torch
            from transformers import DynamicCache
        except ImportError as exc:
            raise BackendError(f"{CPU_EXTRA_HINT} ({exc})") from exc

        self.dtype = precision = self.dtype or auto_precision()
        # May convert a GGUF first (about a minute, once); the progress goes to the log.
        model = resolve_model(self.local_model, cache_dir=self.cache_dir, dtype=storage_dtype(precision))
        self.model = model
        self._context_length = context_length(model.path)
        if self._state == "starting":
            self._state = "loading"
        started = time.monotonic()
        torch.set_num_threads(self.threads)
        logger.info("loading %s (%s) from %s", model.name, self.dtype, model.path)
        lm, self._vision = load_model(torch, model.path, precision)
        # A long prefill takes seconds to minutes; checking for cancellation between decoder layers
        # frees the worker within one layer's time instead of finishing work nobody waits for.
        for layer in getattr(lm.get_decoder(), "layers", ()):
            layer.register_forward_pre_hook(self._abandon_if_cancelled)
        self._cache_kwarg = cache_kwarg(lm.forward)
        self._decoder_cache_kwarg = cache_kwarg(lm.get_decoder().forward)
        config = lm.config  # not `lm`: the closure would keep the model alive after aclose()
        self._new_cache = lambda: DynamicCache(config=config)
        self._vocab_size = lm.get_output_embeddings().weight.shape[0]
        self._torch, self._lm = torch, lm
        self._load_seconds = round(time.monotonic() - started, 2)
        logger.info("loaded %s in %.1f s (%s, %d threads)", model.name, self._load_seconds, self.dtype, self.threads)

    def _drain(self) -> None:
        """Worker thread: run the next batch of waiting jobs (maybe none: an earlier drain took them)."""
        batch = self._queue.take()
        if batch is None:
            return
        self._running = batch.jobs
        try:
            results: list[LabelLogprobs | None] = self._answer(batch)
        except Abandoned:
            results = [None] * len(batch.jobs)
        except Exception as exc:
            if not isinstance(exc, BackendError):
                logger.exception("embedded readout failed")
                exc = BackendError(f"embedded model failed: {type(exc).__name__}: {exc}")
            for job in batch.jobs:
                job.future.set_exception(exc)
            return
        finally:
            self._running = []
        for job, result in zip(batch.jobs, results, strict=True):
            job.future.set_result(result)

    def _decode(self, job: GenerationJob) -> Generation:
        """Worker thread: one generation (`generation.decode`)."""
        self._running = [job]
        try:
            lm = self._vision.bound(job.call) if self._vision else self._lm
            model = Model(self._torch, lm, self._cache_kwarg, self._new_cache)
            return decode(model, self.prefix_cache, job, lambda: job.cancelled)
        except Abandoned:
            raise BackendError("the generation was cancelled") from None
        except Exception as exc:
            logger.exception("embedded generation failed")
            raise BackendError(f"embedded generation failed: {type(exc).__name__}: {exc}") from exc
        finally:
            self._running = []

    def _abandon_if_cancelled(self, _module: Any, _args: Any) -> None:
        """Forward pre-hook of every decoder layer: stop once every running job is cancelled."""
        running = self._running
        if running and all(job.cancelled for job in running):
            raise Abandoned

    def _check(self, call: CallT) -> CallT:
        """`call` checked, its image pads expanded (`vision.py`)."""
        self._ready()
        if not call.input_ids:
            raise BackendError("empty prompt")
        if self._vision is not None:
            call = self._vision.expand(call)
        elif call.images:
            raise BackendError(f"the embedded model {self.model_name} reads text only; it was sent images")
        if self._context_length is not None and len(call.input_ids) > self._context_length:
            raise BackendError(
                f"prompt of {len(call.input_ids)} tokens exceeds the context length {self._context_length}"
            )
        named = call.label_token_ids if isinstance(call, ReadoutCall) else call.stop_token_ids
        if bad := [i for i in named if not 0 <= i < self._vocab_size]:
            raise BackendError(f"token ids {bad} are outside the model's vocabulary ({self._vocab_size})")
        return call

    def _answer(self, batch: Batch) -> list[LabelLogprobs | None]:
        if len(batch.jobs) > 1:
            if self._vision is not None:
                rows = self._vision.forward_rows(batch)
            else:
                rows = forward_rows(self._torch, self._lm, self._decoder_cache_kwarg, batch)
            self._batched_readouts += len(batch.jobs)
            for job, row in zip(batch.jobs, rows, strict=True):
                entry = CacheEntry(
                    kv=None,
                    logprobs=row.logprobs,
                    hidden=row.hidden,
                    nbytes=state_nbytes(None, row.logprobs, row.hidden),
                )
                self.prefix_cache.put(tuple(job.call.input_ids), entry)
            cached = [batch.prefix_length] * len(rows)
        else:
            row, reused = self._forward(batch)
            rows, cached = [row], [reused]
        self._readouts += len(batch.jobs)
        return [
            LabelLogprobs(
                logprobs=tuple(row.logprobs[list(job.call.label_token_ids)].tolist()),
                prompt_tokens=len(job.call.input_ids),
                cached_tokens=reused,
                top_token=int(row.logprobs.argmax()),
                hidden_state=row.hidden.numpy() if job.call.hidden_state else None,
            )
            for job, row, reused in zip(batch.jobs, rows, cached, strict=True)
        ]

    def _forward(self, batch: Batch) -> tuple[Row, int]:
        """One prompt: the cached row when it was seen whole (with a hidden state where one is asked), else
        a forward over the rest after the longest cached prefix; the row and the prompt tokens reused."""
        call = batch.jobs[0].call
        ids, start, prefix = tuple(call.input_ids), batch.prefix_length, batch.prefix
        if prefix is not None and start == len(ids):
            if prefix.hidden is not None or not call.hidden_state:
                return Row(prefix.logprobs, prefix.hidden), start
            # Stored by a run that kept no hidden state: run the last token again over a shorter prefix.
            start, prefix = self.prefix_cache.longest_prefix(ids, whole=False) or (0, None)
        kv = shared_copy(prefix.kv) if prefix is not None else self._new_cache()
        suffix = list(ids[start:])
        with self._torch.inference_mode():
            if self._vision is not None:
                (row,) = self._vision.rows(kv, [suffix], {image_marker(image): image for image in call.images})
            else:
                hidden = self._lm.get_decoder()(
                    input_ids=self._torch.tensor([suffix], dtype=self._torch.long),
                    use_cache=True,
                    **{self._decoder_cache_kwarg: kv},
                ).last_hidden_state
                (row,) = rows_of(self._torch, self._lm, hidden[:, -1])
        self.prefix_cache.put(
            ids,
            CacheEntry(
                kv=kv, logprobs=row.logprobs, hidden=row.hidden, nbytes=state_nbytes(kv, row.logprobs, row.hidden)
            ),
        )
        return row, start
