"""The fake SGLang's decoding `/generate` (the thinking tier's call 1), deterministic like its readouts.

A body whose `sampling_params` differ from one greedy token is a generation. Its ids are a function of
the prompt: position i is a hashed id in [1000, 100000) (never a stop id by chance); with
`generation_length` set (an attribute of the fake) the call ends there with its first stop id,
otherwise it runs to `max_new_tokens`. As in SGLang 0.5.19 a matched stop id stays in `output_ids`
(`finish_reason` `{"type": "stop", "matched": id}`, else `{"type": "length", "length": n}`), every
generated position has an `output_token_ids_logprobs` entry, and the finished sequence (prompt and
output) enters the radix cache.

A generation with `sampling_params.regex` is a box question's (box mode): it writes the fake's
`box_text` (a box in Qwen's grounding format after its cue, `BOX_TEXT` by default) tokenized by the
fake's tokenizer, then its first stop id, as xgrammar ends a finished grammar on a stop id; the text
must match the regex (else a violation). At generated position k the logprob of an id asked for is
`box_logprob(k, id, generated id)`: known to the tests, which compute the expected box by hand.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from tokenizers import Tokenizer

#: What openjev may send for a generation: greedy, or sampled with a seed; a box's adds its grammar.
GENERATION_KEYS = frozenset({"max_new_tokens", "temperature", "stop_token_ids", "sampling_seed", "regex"})
#: The box a box-mode generation writes by default: x1, y1, x2, y2 on Qwen3-VL's 0-1000 scale.
BOX_TEXT = "120, 345, 678, 901]}"


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
    if "regex" in params and params.get("temperature") != 0:
        return "a box's generation is greedy"
    return None


@cache
def _tokenizer(path: str) -> Tokenizer:
    return Tokenizer.from_file(f"{path}/tokenizer.json")


def box_generation(
    tokenizer_path: str, text: str, params: dict[str, Any], asked: Sequence[int]
) -> tuple[list[int], list[Any]] | str:
    """A box-mode generation's ids and `output_token_ids_logprobs`, or the violation when `text` is not
    in the language of the regex or does not fit `max_new_tokens`."""
    if not re.fullmatch(params["regex"], text):
        return f"the box {text!r} is not in the generation's regex {params['regex']!r}"
    output = [*_tokenizer(tokenizer_path).encode(text, add_special_tokens=False).ids, params["stop_token_ids"][0]]
    if len(output) > params["max_new_tokens"]:
        return f"the box takes {len(output)} ids, over max_new_tokens={params['max_new_tokens']}"
    read = [[[box_logprob(k, token, written), token, None] for token in asked] for k, written in enumerate(output)]
    return output, read


def box_logprob(position: int, token: int, generated: int) -> float:
    """The box mode's logprob of `token` at generated position `position`, where `generated` was written:
    the written id most likely, the others less so the farther their id (Qwen's digits are consecutive
    ids, so the farther the digit) and the later the position."""
    if token == generated:
        return -0.1
    return -1.0 - 0.5 * abs(token - generated) - 0.1 * position


def generated_ids(prompt: Sequence[int], budget: int, stops: Sequence[int], length: int | None) -> list[int]:
    digest = hashlib.blake2b(repr(tuple(prompt)).encode(), digest_size=8).digest()
    seed = int.from_bytes(digest, "little")
    ids = [1000 + (seed + position * 7919) % 99000 for position in range(budget)]
    if length is not None and length <= budget:
        ids = [*ids[: length - 1], stops[0]]
    return ids


def generation_meta(
    output: list[int], stops: Sequence[int], labels: Sequence[int], read: list[Any] | None = None
) -> dict[str, Any]:
    """The `meta_info` keys that differ from a one-token readout's; `read`: the box mode's logprobs."""
    matched = bool(output) and output[-1] in stops
    return {
        "finish_reason": {"type": "stop", "matched": output[-1]}
        if matched
        else {"type": "length", "length": len(output)},
        "output_token_logprobs": [[-0.5, token, None] for token in output],
        "output_token_logprobs_length": len(output),
        "output_token_ids_logprobs": read
        if read is not None
        else [[[-1.0, label, None] for label in labels] for _ in output],
        "completion_tokens": len(output),
    }
