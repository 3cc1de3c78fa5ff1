"""The fake's `/generate` answer to a readout, as 0.5.19's frontends write it (`tokenizer_manager.py`
`_handle_batch_output`, in its key order; the Rust frontend's reduced `meta_info`)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

FLOAT32_MIN = -3.4028234663852886e38
ABORTED = {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}


@dataclass(frozen=True)
class Readout:
    """What one readout found: its label position, the sampled id and its logprob, and its counts."""

    rid: str
    finish: dict[str, Any]
    position: list[list[Any]]
    sampled: int
    sampled_logprob: float
    prompt_tokens: int
    cached: int
    #: The serving rank where the server has several (None: one rank, `dp_rank` null).
    rank: int | None


def readout(
    rid: str, ids: Sequence[int], values: Sequence[float], aborted: bool, counts: tuple[int, int], rank: int | None
) -> Readout:
    """The readout of the label `ids` whose logprobs are `values` (-inf as float32's least), the most
    likely sampled; `counts`: its prompt and cached tokens."""
    position = [[FLOAT32_MIN if math.isinf(v) else v, t, None] for v, t in zip(values, ids, strict=True)]
    best = max(range(len(ids)), key=lambda i: values[i])
    finish = ABORTED if aborted else {"type": "length", "length": 1}
    return Readout(rid, dict(finish), position, ids[best], position[best][0], *counts, rank)


def readout_answer(readout: Readout, *, rust: bool) -> dict[str, Any]:
    sampled = [[readout.sampled_logprob, readout.sampled, None]]
    if rust:
        meta: dict[str, Any] = {
            "completion_tokens": 1,
            "e2e_latency": 0.001,
            "finish_reason": readout.finish,
            "id": readout.rid,
            "input_token_logprobs": [],
            "output_token_ids_logprobs": [readout.position],
            "output_token_logprobs": sampled,
            "prompt_tokens": readout.prompt_tokens,
        }
        return {"meta_info": meta, "output_ids": [readout.sampled], "text": ""}
    meta = {
        "id": readout.rid,
        "finish_reason": readout.finish,
        "prompt_tokens": readout.prompt_tokens,
        "weight_version": "default",
        "num_retractions": 0,
        "input_token_logprobs": [],
        "output_token_logprobs": sampled,
        "output_token_logprobs_length": 1,
        "input_token_ids_logprobs": [],
        "output_token_ids_logprobs": [readout.position],
        "reasoning_tokens": 0,
        "completion_tokens": 1,
        "cached_tokens": readout.cached,
        "cached_tokens_details": {"device": readout.cached, "host": 0} if readout.cached else None,
        "dp_rank": readout.rank,
        "e2e_latency": 0.001,
        "response_sent_to_client_ts": time.time(),
    }
    return {"text": "", "output_ids": [readout.sampled], "meta_info": meta}


def model_card(name: str, max_model_len: int | None) -> dict[str, Any]:
    """One model of `/v1/models` as SGLang lists it (`max_model_len` None: a server that does not say)."""
    return {
        "id": name,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "sglang",
        "root": name,
        "parent": None,
        "max_model_len": max_model_len,
    }
