"""Decoding over the cached prefix KV, for the embedded backend's `generate` (the thinking tier).

`decode` restores the longest cached state whose ids start the prompt (a `shared_copy`: stored entries are
never mutated), runs the rest of the prompt, then one token at a time: greedy (argmax) when
`temperature` is 0, else sampled from softmax(logits / temperature) with a generator seeded by
`seed` (the same call gives the same ids). It stops after a stop id (kept in the output) or at
`max_new_tokens`. The state after the prompt and every generated id but the last is stored back in
the prefix cache, so the readout that follows (prompt + generated ids + tail) runs only its tail.
`stopped()` is checked before every step; when true the decoding ends with `Abandoned`.

A call with a `constraint` (a box question's grammar) picks from the ids it allows only: the
log-softmax is taken over those ids (-inf elsewhere), as SGLang masks the logits before its sampler,
and the decoding ends once the constraint is complete. With `read_ids`, those ids' logprobs under
that distribution are recorded at every generated position.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openjev.backends.base import Generation, GenerationCall
from openjev.backends.embedded.prefix_cache import CacheEntry, PrefixCache, shared_copy, state_nbytes


class Abandoned(Exception):
    """Raised inside the model's work to stop what no caller waits for any more."""


@dataclass(slots=True, eq=False)
class GenerationJob:
    call: GenerationCall
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class Model:
    """What decoding needs of the loaded model: torch, the LM, its cache keyword, a cache factory."""

    torch: Any
    lm: Any
    cache_kwarg: str
    new_cache: Callable[[], Any]


def _step(model: Model, kv: Any, ids: list[int]) -> Any:
    torch = model.torch
    out = model.lm(
        input_ids=torch.tensor([ids], dtype=torch.long), use_cache=True, logits_to_keep=1, **{model.cache_kwarg: kv}
    )
    return torch.log_softmax(out.logits[0, -1].float(), dim=-1)


def _pick(model: Model, logprobs: Any, call: GenerationCall, generator: Any) -> int:
    if call.temperature <= 0:
        return int(logprobs.argmax())
    weights = model.torch.softmax(logprobs / call.temperature, dim=-1)
    return int(model.torch.multinomial(weights, 1, generator=generator))


def _allowed(model: Model, logprobs: Any, allowed_ids: tuple[int, ...] | None) -> Any:
    """`logprobs` renormalised over `allowed_ids` (None: every id, as they are)."""
    if allowed_ids is None:
        return logprobs
    torch = model.torch
    allowed = torch.tensor(list(allowed_ids), dtype=torch.long)
    masked = torch.full_like(logprobs, -math.inf)
    masked[allowed] = torch.log_softmax(logprobs[allowed], dim=-1)
    return masked


def decode(model: Model, cache: PrefixCache, job: GenerationJob, stopped: Callable[[], bool]) -> Generation:
    call, torch, constraint = job.call, model.torch, job.call.constraint
    ids = list(call.input_ids)
    hit = cache.longest_prefix(tuple(ids))
    start, entry = hit if hit is not None and hit[1].kv is not None else (0, None)
    kv = shared_copy(entry.kv) if entry is not None else model.new_cache()
    generator = torch.Generator().manual_seed(call.seed or 0) if call.temperature > 0 else None
    output: list[int] = []
    read: list[tuple[float, ...]] = []
    stops, complete = set(call.stop_token_ids), False
    allowed_ids = constraint.allowed_after(output) if constraint is not None else None
    with torch.inference_mode():
        logprobs = entry.logprobs if entry is not None and start == len(ids) else _step(model, kv, ids[start:])
        while True:
            if stopped():
                raise Abandoned
            # The cache keeps the model's own logprobs; the constraint's apply to this call only.
            allowed = _allowed(model, logprobs, allowed_ids)
            if call.read_ids:
                read.append(tuple(float(allowed[token]) for token in call.read_ids))
            output.append(_pick(model, allowed, call, generator))
            if constraint is not None:
                # What the constraint allows next; nothing once the answer is complete.
                allowed_ids = constraint.allowed_after(output)
                complete = not allowed_ids
            if output[-1] in stops or complete or len(output) >= call.max_new_tokens:
                break
            logprobs = _step(model, kv, [output[-1]])
    key = tuple(ids + output[:-1])
    cache.put(key, CacheEntry(kv=kv, logprobs=logprobs, nbytes=state_nbytes(kv, logprobs)))
    finish = "stop" if output[-1] in stops or complete else "length"
    return Generation(tuple(output), len(ids), start, finish, tuple(read))
