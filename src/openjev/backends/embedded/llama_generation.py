"""Decoding on llama.cpp, for `LlamaCppBackend.generate` (the thinking tier and box questions).

The rules are `generation.py`'s: greedy (argmax) when `temperature` is 0, else sampled from
softmax(logprobs / temperature) with a generator seeded by `seed` (the same call gives the same ids);
a stop id ends it and stays in the output, and so does `max_new_tokens`. Under a `constraint` the
log-softmax is taken over the ids it allows (-inf elsewhere), as SGLang masks logits before sampling,
and the decoding ends once the constraint is complete; `read_ids` are read under that distribution at
every generated position.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import numpy as np

from openjev.backends.base import GenerationCall
from openjev.backends.embedded.llama_runtime import Aborted, LlamaRuntime, Piece


def decode_tokens(
    runtime: LlamaRuntime,
    seq: int,
    start: int,
    logprobs: np.ndarray,
    call: GenerationCall,
    cancelled: Callable[[], bool],
) -> tuple[list[int], list[tuple[float, ...]], np.ndarray]:
    """Decode into sequence `seq`, whose first `start` positions hold the prompt and after which `logprobs`
    is the distribution: (generated ids, read logprobs, the distribution before the last id)."""
    rng = np.random.default_rng(call.seed or 0)
    stops, constraint = set(call.stop_token_ids), call.constraint
    output: list[int] = []
    read: list[tuple[float, ...]] = []
    allowed_ids = constraint.allowed_after(output) if constraint is not None else None
    while True:
        if cancelled():
            raise Aborted("cancelled")
        allowed = restricted(logprobs, allowed_ids)
        if call.read_ids:
            read.append(tuple(float(allowed[token]) for token in call.read_ids))
        output.append(pick(allowed, call.temperature, rng))
        complete = False
        if constraint is not None:
            allowed_ids = constraint.allowed_after(output)
            complete = not allowed_ids
        if output[-1] in stops or complete or len(output) >= call.max_new_tokens:
            return output, read, logprobs
        [logprobs] = runtime.run([Piece(seq, start + len(output) - 1, (output[-1],))])


def restricted(logprobs: np.ndarray, allowed_ids: Collection[int] | None) -> np.ndarray:
    """`logprobs` renormalised over `allowed_ids` (None: every id, as they are)."""
    if allowed_ids is None:
        return logprobs
    allowed = np.asarray(list(allowed_ids), dtype=np.int64)
    masked = np.full(logprobs.shape, -np.inf, dtype=np.float64)
    chosen = logprobs[allowed].astype(np.float64)
    chosen -= chosen.max()
    masked[allowed] = chosen - np.log(np.exp(chosen).sum())
    return masked


def pick(logprobs: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    if temperature <= 0:
        return int(np.argmax(logprobs))
    scaled = logprobs / temperature
    weights = np.exp(scaled - scaled.max())
    return int(rng.choice(len(weights), p=weights / weights.sum()))
