"""llama.cpp (its C API through `llama_abi.py`) running a GGUF as it is: one context, many sequences.

`LlamaRuntime.run(pieces)` evaluates several token runs in one `llama_decode`: each `Piece` appends
`tokens` to sequence `seq` at positions `start..start+len-1` and gets the log-softmax over the whole
vocabulary after its last token (the output head runs only there); `run_hidden` also gives the final
hidden state there (`llama_hidden.py`). The
KV memory is unified, so `copy(src, dst, length)` makes `dst` share `src`'s first `length` positions
without copying them: every branch over a shared prefix attends to the same cells.

Everything here runs on the caller's thread (the backend's one worker); `abort` may be set from any
thread and stops a running decode between graph nodes (the evaluated part stays in memory until the
caller drops its sequences).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from openjev.backends.embedded.llama_abi import (
    FLASH_ATTENTION_DISABLED,
    GGML_TYPE_F16,
    GGML_TYPE_Q8_0,
    LOAD_MODE_MMAP,
    LlamaLibraryError,
    find_library,
    load,
)
from openjev.backends.embedded.llama_hidden import HiddenCapture

#: `llama_decode`'s return values that are not failures of the input (llama.h).
NO_KV_SLOT, ABORTED = 1, 2


class LlamaError(RuntimeError):
    """llama.cpp refused the model, the context or a batch."""


class NoRoom(LlamaError):
    """No room in the KV memory for the batch: drop sequences (or split the batch) and retry."""


class Aborted(LlamaError):
    """The decode was stopped by `abort`."""


@dataclass(frozen=True, slots=True)
class Piece:
    """Tokens appended to sequence `seq` from position `start`; the distribution after the last is read."""

    seq: int
    start: int
    tokens: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What the GGUF says of the model, for the context and vocabulary checks."""

    vocab_size: int
    context_length: int
    #: Width of the hidden state (`llama_hidden.py`).
    hidden_size: int


class LlamaRuntime:
    """One llama.cpp model and context on the CPU (`threads` threads, `context` KV cells, `sequences` ids)."""

    def __init__(
        self,
        gguf: Path,
        *,
        threads: int,
        context: int,
        sequences: int,
        ubatch: int = 512,
        library: Path | None = None,
    ) -> None:
        found = find_library(library)
        if found is None:  # the caller words the install hint
            where = f"at {library}" if library is not None else "(the `cpu` extra brings it)"
            raise LlamaError(f"llama.cpp's library is not installed {where}")
        try:
            self._ffi, self._ll = ffi, ll = load(found)
        except LlamaLibraryError as exc:
            raise LlamaError(str(exc)) from exc
        ll.llama_backend_init()
        model_params = ll.llama_model_default_params()
        model_params.n_gpu_layers = 0
        model_params.load_mode = LOAD_MODE_MMAP
        self._model = ll.llama_model_load_from_file(str(gguf).encode(), model_params)
        if not self._model:
            raise LlamaError(f"llama.cpp could not load {gguf}")
        vocab = ll.llama_model_get_vocab(self._model)
        trained = ll.llama_model_n_ctx_train(self._model)
        self.shape = ModelShape(
            vocab_size=ll.llama_vocab_n_tokens(vocab),
            context_length=min(context, trained) if context else trained,
            hidden_size=ll.llama_model_n_embd(self._model),
        )
        params = ll.llama_context_default_params()
        params.n_ctx = params.n_batch = self.shape.context_length
        params.n_ubatch = min(ubatch, self.shape.context_length)
        params.n_seq_max = sequences
        # Keys in q8_0 (a quarter less KV memory than f16 keys and values); values stay f16, since
        # quantized values need flash attention, whose CPU kernel prefilled 2,000 tokens 1.5x slower with
        # q8_0 cells than ggml's matrix products do (benchmarks/embedded_speed.py, README Performance).
        params.flash_attn_type = FLASH_ATTENTION_DISABLED
        params.type_k, params.type_v = GGML_TYPE_Q8_0, GGML_TYPE_F16
        params.n_threads = params.n_threads_batch = threads
        params.kv_unified = True  # one pool of cells: a copied prefix is shared, not duplicated
        params.no_perf = True
        self.abort = threading.Event()
        # Kept referenced: llama.cpp calls it during every decode.
        self._abort_callback = ffi.callback("bool(void *)", lambda _data: self.abort.is_set())
        params.abort_callback = self._abort_callback
        self.hidden = HiddenCapture(ffi, ll, self.shape.hidden_size)
        params.cb_eval = ffi.cast("void *", self.hidden.callback)
        self._ctx = ll.llama_init_from_model(self._model, params)
        if not self._ctx:
            ll.llama_model_free(self._model)
            self._model = None
            raise LlamaError(f"llama.cpp could not make a context of {self.shape.context_length} tokens")
        self._memory = ll.llama_get_memory(self._ctx)
        self.batch_tokens = params.n_batch
        self._batch = _Batch(ffi, self.batch_tokens)

    def run(self, pieces: list[Piece]) -> list[np.ndarray]:
        """Evaluate `pieces` (at most `batch_tokens` tokens in all); the distribution after each.

        NoRoom when the KV memory has no room for them (the memory is as before), Aborted when `abort`
        was set (what was evaluated stays in the pieces' sequences).
        """
        total = sum(len(piece.tokens) for piece in pieces)
        if total > self.batch_tokens:
            raise LlamaError(f"{total} tokens in one batch; at most {self.batch_tokens}")
        rows = self._batch.fill(pieces)
        status = self._ll.llama_decode(self._ctx, self._batch.struct[0])
        if status == NO_KV_SLOT:
            raise NoRoom(f"no room for {total} tokens in the KV memory")
        if status == ABORTED:
            raise Aborted("aborted")
        if status != 0:
            raise LlamaError(f"llama_decode failed ({status})")
        return [_log_softmax(self._logits(row)) for row in rows]

    def run_hidden(self, pieces: list[Piece]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """`run`, and the final hidden state (float32) after each piece, read in the same decode."""
        self.hidden.arm()
        try:
            rows = self.run(pieces)
        finally:
            self.hidden.armed = False
        try:
            return rows, self.hidden.take(len(pieces))
        except ValueError as exc:
            raise LlamaError(str(exc)) from None

    def _logits(self, row: int) -> np.ndarray:
        """The logits llama.cpp holds for batch row `row` (a view of its buffer, valid until the next decode)."""
        pointer = self._ll.llama_get_logits_ith(self._ctx, row)
        if pointer == self._ffi.NULL:
            raise LlamaError(f"llama.cpp has no logits for batch row {row}")
        return np.frombuffer(self._ffi.buffer(pointer, 4 * self.shape.vocab_size), dtype=np.float32)

    def check(self, prompt: Sequence[int], named: Sequence[int]) -> None:
        """LlamaError unless the prompt fits the context and every id is in the vocabulary: llama.cpp
        aborts the whole process on an id outside it."""
        if not prompt:
            raise LlamaError("empty prompt")
        context, vocab = self.shape.context_length, self.shape.vocab_size
        if len(prompt) > context:
            raise LlamaError(f"prompt of {len(prompt)} tokens exceeds the context length {context}")
        if bad := [i for i in named if not 0 <= i < vocab]:
            raise LlamaError(f"token ids {bad} are outside the model's vocabulary ({vocab})")
        ids = np.asarray(prompt, dtype=np.int64)
        if ids.min() < 0 or ids.max() >= vocab:
            outside = ids[(ids < 0) | (ids >= vocab)][:5].tolist()
            raise LlamaError(f"prompt token ids {outside} are outside the model's vocabulary ({vocab})")

    def copy(self, src: int, dst: int, length: int) -> None:
        """Sequence `dst` shares `src`'s positions [0, length)."""
        self._ll.llama_memory_seq_cp(self._memory, src, dst, 0, length)

    def drop(self, seq: int) -> None:
        self._ll.llama_memory_seq_rm(self._memory, seq, -1, -1)

    def close(self) -> None:
        ll = self._ll
        if self._ctx:
            ll.llama_free(self._ctx)
            self._ctx = None
        if self._model:
            ll.llama_model_free(self._model)
            self._model = None


class _Batch:
    """A `llama_batch` over numpy arrays of `capacity` tokens, each in one sequence, filled a run at a time
    (whole arrays at once rather than a Python loop per token)."""

    def __init__(self, ffi: Any, capacity: int) -> None:
        self.token = np.zeros(capacity, dtype=np.int32)
        self.pos = np.zeros(capacity, dtype=np.int32)
        self.seq = np.zeros(capacity, dtype=np.int32)
        self.logits = np.zeros(capacity, dtype=np.int8)
        self.n_seq_id = np.ones(capacity, dtype=np.int32)
        # seq_id[i] points at seq[i]: one sequence per token.
        self.seq_id = (self.seq.ctypes.data + self.seq.itemsize * np.arange(capacity)).astype(np.uintp)
        # The cdata views keep the arrays' memory referenced for as long as the batch lives.
        self._views = [
            ffi.from_buffer("int32_t[]", self.token),
            ffi.from_buffer("int32_t[]", self.pos),
            ffi.from_buffer("int32_t[]", self.n_seq_id),
            ffi.from_buffer("int32_t *[]", self.seq_id),
            ffi.from_buffer("int8_t[]", self.logits),
        ]
        self.struct = ffi.new("llama_batch *")
        self.struct.token, self.struct.pos, self.struct.n_seq_id, self.struct.seq_id, self.struct.logits = self._views
        self.struct.embd = ffi.NULL

    def fill(self, pieces: list[Piece]) -> list[int]:
        """The pieces' tokens, positions and sequences; the row of each piece's last token (the only rows
        whose logits llama.cpp computes)."""
        rows, end = [], 0
        for piece in pieces:
            start, end = end, end + len(piece.tokens)
            if end == start:
                raise LlamaError(f"no tokens to evaluate for sequence {piece.seq}")
            self.token[start:end] = piece.tokens
            self.pos[start:end] = np.arange(piece.start, piece.start + end - start)
            self.seq[start:end] = piece.seq
            self.logits[start:end] = 0
            self.logits[end - 1] = 1
            rows.append(end - 1)
        self.struct.n_tokens = end
        return rows


def in_batches(prompts: list[tuple[int, tuple[int, ...]]], tokens: int) -> list[list[tuple[int, tuple[int, ...]]]]:
    """Indexed prompts in order, in groups of at most `tokens` ids (one `run` each; a longer prompt alone)."""
    groups: list[list[tuple[int, tuple[int, ...]]]] = []
    size = 0
    for prompt in prompts:
        if not groups or size + len(prompt[1]) > tokens:
            groups.append([])
            size = 0
        groups[-1].append(prompt)
        size += len(prompt[1])
    return groups


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    """log p_i = z_i - max(z) - log sum_j exp(z_j - max(z)), in float64 (a copy: llama.cpp reuses its buffer)."""
    z = logits.astype(np.float64)
    z -= z.max()
    z -= np.log(np.exp(z).sum())
    return z
