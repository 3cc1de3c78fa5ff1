"""What a ready SGLang says of itself, read once at start on the control connections: its model and
server info, its data-parallel ranks, the largest prompt it admits, whether its model sees, and its
vocabulary size. openjev refuses to serve without the length and the vocabulary (`sglang.py`'s
module doc says why).

The length is SGLang 0.5.19's `max_req_input_len` = min(context_len - 1, max_total_num_tokens - 1) - 5
(`tp_worker.py:543-556`): reported by the Python frontend's `/server_info`, else derived by the same
rule from `/v1/models` `max_model_len`.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from openjev.backends.base import BackendUnavailable
from openjev.backends.sglang_vision import read_vision
from openjev.backends.sglang_vocab import model_vocab_size
from openjev.prompting.vision import VisionSpec

# What SGLang 0.5.19's scheduler keeps back from `min(context_len - 1, max_total_num_tokens - 1)`.
SCHEDULER_RESERVED_TOKENS = 5


@dataclass(frozen=True, slots=True)
class ServerFacts:
    model_info: dict[str, Any]
    server_info: dict[str, Any]
    data_parallel_size: int
    #: `max_req_input_len`: the largest prompt plus its one output token.
    context_length: int
    vision: VisionSpec | None
    vocab_size: int


def positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def admissible_budget(context_len: int, max_total_num_tokens: int | None = None) -> int:
    """SGLang 0.5.19's `max_req_input_len`: it admits a prompt only when shorter than this, so this is
    the largest prompt plus its one output token."""
    room = context_len - 1 if max_total_num_tokens is None else min(context_len - 1, max_total_num_tokens - 1)
    return room - SCHEDULER_RESERVED_TOKENS


async def read_server_facts(
    control: httpx.AsyncClient, *, vocab_size: int | None, data_parallel_size: int | None, tokenizer: Path | None
) -> ServerFacts:
    """The facts, with `vocab_size` and `data_parallel_size` as configured taking the place of SGLang's;
    `tokenizer`: openjev's own tokenizer directory, read before any hub look-up."""
    model_info = await _get_object(control, "/model_info")
    server_info = await _get_object(control, "/server_info") or await _get_object(control, "/get_server_info")
    # 0.5.19's Python frontend lists its server args there, `dp_size` among them.
    reported = server_info.get("dp_size")
    dp_size = data_parallel_size or (reported if positive_int(reported) else 1)
    context_length = _admissible_budget(server_info, await _get_object(control, "/v1/models"))
    if context_length is None or context_length < 2:
        raise BackendUnavailable(
            "SGLang reports no usable context length (/server_info max_req_input_len, /v1/models "
            "max_model_len): openjev cannot keep prompts below its refusal limit"
        )
    revision = server_info.get("revision")
    revision = revision if isinstance(revision, str) else None
    vision = await asyncio.to_thread(read_vision, model_info, server_info, revision, tokenizer)
    vocab = vocab_size or model_info.get("vocab_size")
    vocab = vocab if positive_int(vocab) else await _read_vocab_size(model_info, revision)
    if vocab is None:
        raise BackendUnavailable(
            f"cannot learn the vocabulary size of SGLang's model {model_info.get('model_path')!r} "
            "(its config.json; or set OPENJEV_BACKEND_VOCAB_SIZE): openjev cannot keep out-of-vocabulary ids "
            "from SGLang"
        )
    return ServerFacts(
        model_info=model_info,
        server_info=server_info,
        data_parallel_size=dp_size,
        context_length=context_length,
        vision=vision,
        vocab_size=vocab,
    )


async def _get_object(control: httpx.AsyncClient, path: str) -> dict[str, Any]:
    with contextlib.suppress(httpx.HTTPError, ValueError):
        response = await control.get(path)
        body = response.json() if response.status_code == 200 else None
        if isinstance(body, dict):
            return body
    return {}


def _admissible_budget(server_info: dict[str, Any], models: dict[str, Any]) -> int | None:
    # The Python frontend reports the scheduler's own limit; otherwise derive it by the same rule.
    reported = server_info.get("max_req_input_len")
    if positive_int(reported):
        return reported
    with contextlib.suppress(KeyError, IndexError, TypeError, AttributeError):
        context_len = models["data"][0].get("max_model_len")
        if positive_int(context_len):
            kv = server_info.get("max_total_num_tokens")
            return admissible_budget(context_len, kv if positive_int(kv) else None)
    return None


async def _read_vocab_size(model_info: dict[str, Any], revision: str | None) -> int | None:
    path = model_info.get("model_path")
    if not isinstance(path, str) or not path:
        return None
    return await asyncio.to_thread(model_vocab_size, path, revision)
