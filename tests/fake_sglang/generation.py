"""The fake SGLang's decoding `/generate` (the thinking tier's call 1), deterministic like its readouts.

A body whose `sampling_params` differ from one greedy token is a generation. Its ids are a function of
the prompt: position i is a hashed id in [1000, 100000) (never a stop id by chance); with
`generation_length` set (an attribute of the fake) the call ends there with its first stop id,
otherwise it runs to `max_new_tokens`. As in SGLang 0.5.19 a matched stop id stays in `output_ids`
(`finish_reason` `{"type": "stop", "matched": id}`, else `{"type": "length", "length": n}`), every
generated position has an `output_token_ids_logprobs` entry, and the finished sequence (prompt and
output) enters the radix cache.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

#: What openjev may send for a generation: greedy, or sampled with a seed.
GENERATION_KEYS = frozenset({"max_new_tokens", "temperature", "stop_token_ids", "sampling_seed"})


def is_generation(body: dict[str, Any]) -> bool:
    params = body.get("sampling_params")
    return isinstance(params, dict) and (params.get("max_new_tokens") != 1 or "stop_token_ids" in params)


def generation_violation(body: dict[str, Any]) -> str | None:
    """What openjev must never send as a generation (on top of the readout rules for logprobs)."""
    params = body["sampling_params"]
    if set(params) - GENERATION_KEYS:
        return f"a generation sends only {sorted(GENERATION_KEYS)}, got {sorted(params)}"
    budget, stops = params.get("max_new_tokens"), params.get("stop_token_ids")
    if not isinstance(budget, int) or budget < 1:
        return f"a generation needs max_new_tokens >= 1, got {budget!r}"
    if not stops or not isinstance(stops, list):
        return "a generation needs stop_token_ids (the think close or the end of the turn)"
    if params.get("temperature") != 0 and "sampling_seed" not in params:
        return "a sampled generation without sampling_seed is not reproducible"
    return None


def generated_ids(prompt: Sequence[int], budget: int, stops: Sequence[int], length: int | None) -> list[int]:
    digest = hashlib.blake2b(repr(tuple(prompt)).encode(), digest_size=8).digest()
    seed = int.from_bytes(digest, "little")
    ids = [1000 + (seed + position * 7919) % 99000 for position in range(budget)]
    if length is not None and length <= budget:
        ids = [*ids[: length - 1], stops[0]]
    return ids


def generation_meta(output: list[int], stops: Sequence[int], labels: Sequence[int]) -> dict[str, Any]:
    """The `meta_info` keys that differ from a one-token readout's."""
    matched = bool(output) and output[-1] in stops
    return {
        "finish_reason": {"type": "stop", "matched": output[-1]}
        if matched
        else {"type": "length", "length": len(output)},
        "output_token_logprobs": [[-0.5, token, None] for token in output],
        "output_token_logprobs_length": len(output),
        "output_token_ids_logprobs": [[[-1.0, label, None] for label in labels] for _ in output],
        "completion_tokens": len(output),
    }
