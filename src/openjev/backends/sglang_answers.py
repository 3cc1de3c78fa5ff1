"""SGLang's answers read: a readout's label logprobs from its `/generate` body, and an error body's words.

A readout asks for `token_ids_logprob` over its labels with one output token; the body must hold one
finite logprob per label id, in the order asked, or the answer is a `BackendError` (never a guess).
An error body's message is kept for the log, never shown to the client.
"""

from __future__ import annotations

from typing import Any

import httpx

from openjev.backends.base import BackendError, LabelLogprobs, ReadoutCall

# The smallest float32 (a -inf logit's logprob as SGLang serialises it); anything below is no float32.
FLOAT32_MIN = -3.4028234663852886e38


def error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error, str):
            return error
        if isinstance(body.get("message"), str):
            return body["message"]
    return str(body)[:500]


def _count(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BackendError(f"SGLang's {name} is not a count: {type(value).__name__}")
    return value


def _logprob(value: Any) -> float:
    # A log-softmax is never above 0, and a float32 never below FLOAT32_MIN; NaN, +50 or -1e308 mean
    # the backend is broken, never an answer. The Rust frontend sends NaN as null.
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise BackendError("SGLang returned a label logprob that is not a number (NaN in the model output?)")
    if not FLOAT32_MIN <= value <= 0.0:
        raise BackendError(f"SGLang returned an impossible label logprob {value!r}")
    return float(value)


def parse_label_logprobs(body: Any, call: ReadoutCall) -> LabelLogprobs:
    """Read the requested ids' logprobs at the first generated position; anything malformed is a
    BackendError (HTTP 502), never an exception of another kind."""
    try:
        meta = body["meta_info"]
        if not isinstance(meta, dict):
            raise BackendError(f"SGLang's meta_info is not an object: {type(meta).__name__}")
        finish = meta.get("finish_reason") or {}
        if isinstance(finish, dict) and finish.get("type") == "abort":
            raise BackendError("SGLang aborted the request")
        position = meta["output_token_ids_logprobs"][0]
        by_id: dict[int, float] = {}
        for entry in position:
            logprob, token_id = entry[0], entry[1]
            if not isinstance(token_id, int) or isinstance(token_id, bool):
                raise BackendError("SGLang returned a label id that is not an integer")
            by_id[token_id] = _logprob(logprob)
        logprobs = tuple(by_id[token_id] for token_id in call.label_token_ids)
        prompt_tokens = _count(meta.get("prompt_tokens", len(call.input_ids)), "prompt_tokens")
        cached = meta.get("cached_tokens")
        cached_tokens = None if cached is None else _count(cached, "cached_tokens")
    except BackendError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
        raise BackendError(f"SGLang's /generate answer lacks the label logprobs ({type(error).__name__})") from error
    return LabelLogprobs(logprobs, prompt_tokens, cached_tokens, top_token=_sampled(body))


def _sampled(body: Any) -> int | None:
    """The one id the readout generated: at temperature 0 SGLang samples greedily, so it is the most
    probable first token over the whole vocabulary. None where the answer does not carry it."""
    output = body.get("output_ids") if isinstance(body, dict) else None
    if isinstance(output, list) and output and isinstance(output[0], int) and not isinstance(output[0], bool):
        return output[0]
    return None
