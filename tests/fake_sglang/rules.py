"""What SGLang 0.5.19 does with a `/generate` body: admit it, refuse it (4xx) or crash on it.

Read from the `sglang==0.5.19` wheel (paths under `sglang/srt/`):
- sampling keys: the fields of `sampling/sampling_params.py` `SamplingParams`; an unknown key is a
  `TypeError`: a plain-text 500 on the Python frontend, a JSON 400 on the Rust one;
- `managers/tokenizer_manager.py:1162` `_validate_one_request`: input of `context_len` tokens or more,
  or input + `max_new_tokens` over it, is a 400; a `token_ids_logprob` id outside [0, vocab) is a 400;
  `input_ids` are never checked against the vocabulary: an out-of-vocabulary id crashes the
  Python frontend (the Rust frontend answers 400);
- `managers/scheduler.py:2835` with `managers/utils.py:219`: a prompt of `max_req_input_len` =
  `min(context_len - 1, max_total_num_tokens - 1) - 5` tokens or more is refused by the scheduler,
  which the Python frontend's logprob conversion does not survive (the Rust frontend answers 400).

On top of that the fake holds openjev to its readout contract (`token_ids_logprob` always, output
logprobs only, one greedy token; a generation's sampling rules are in `generation.py`), as violations:
a real SGLang would crash (#34719) or waste work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse

from tests.fake_sglang.generation import is_generation
from tests.fake_sglang.ranks import rank_refusal

VOCAB_SIZE = 151936
SCHEDULER_RESERVED_TOKENS = 5
SAMPLING_KEYS = frozenset({
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "beam_width",
    "json_schema", "regex", "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens",
    "spaces_between_special_tokens", "no_stop_trim", "stream_interval", "logit_bias", "sampling_seed",
    "custom_params",
})  # fmt: skip
READOUT_SAMPLING = {"max_new_tokens": 1, "temperature": 0}


@dataclass(frozen=True)
class Outcome:
    """A refusal (`crash` False: the real status and body) or a crash (`crash` True: the server dies)."""

    message: str
    status: int = 400
    crash: bool = False
    plain_text: bool = False


def max_req_input_len(context_length: int, max_total_num_tokens: int) -> int:
    return min(context_length - 1, max_total_num_tokens - 1) - SCHEDULER_RESERVED_TOKENS


def _is_id(value: Any, vocab: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < vocab


def contract_violation(body: dict[str, Any]) -> str | None:
    """What openjev must never send although SGLang would take it."""
    if not body.get("token_ids_logprob"):
        return "a request without token_ids_logprob can crash the scheduler (#34719)"
    if body.get("logprob_start_len", -1) != -1:
        return "logprob_start_len >= 0 computes prompt logprobs and caps prefix caching"
    if body.get("return_logprob") is not True:
        return "return_logprob must be true with token_ids_logprob"
    if not is_generation(body) and body.get("sampling_params") != READOUT_SAMPLING:
        return f"sampling_params {body.get('sampling_params')!r} is not one greedy token {READOUT_SAMPLING}"
    return None


def judge(body: Any, *, rust: bool, context_length: int, max_total_num_tokens: int, dp_size: int = 1) -> Outcome | None:
    """SGLang 0.5.19's answer to a single-form `/generate` body; None when it is admitted."""
    if not isinstance(body, dict):
        return Outcome("the body is not a JSON object", 422)
    params = body.get("sampling_params") or {}
    unknown = sorted(set(params) - SAMPLING_KEYS) if isinstance(params, dict) else ["<not an object>"]
    if unknown:
        message = f"SamplingParams got unexpected keyword arguments {unknown}"
        return Outcome(message, 400) if rust else Outcome(message, 500, plain_text=True)
    input_ids = body.get("input_ids")
    # `text` beside `input_ids` is accepted (the ids are used); the fake serves ids only.
    if not isinstance(input_ids, list):
        return Outcome("Either text or input_ids should be provided.")
    if not input_ids:
        return Outcome("input_ids cannot be empty.")
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in input_ids):
        return Outcome("input_ids must be a list of integers", 400)  # pydantic's int64 check
    refused_rank = rank_refusal(body, dp_size)
    if refused_rank:
        return Outcome(refused_rank)
    if not all(_is_id(t, VOCAB_SIZE) for t in input_ids):
        return Outcome("input_ids contains out-of-vocabulary token id", crash=not rust)
    labels = body.get("token_ids_logprob") or []
    if not isinstance(labels, list) or not all(_is_id(t, VOCAB_SIZE) for t in labels):
        return Outcome(f"token_ids_logprob contains out-of-vocabulary token id; valid range is [0, {VOCAB_SIZE}).")
    # The TokenizerManager adds max_new_tokens only when the request gives it.
    new_tokens = params.get("max_new_tokens") or 0
    if len(input_ids) >= context_length or len(input_ids) + new_tokens > context_length:
        return Outcome(f"The input ({len(input_ids)} tokens) is longer than the model's context length.")
    limit = max_req_input_len(context_length, max_total_num_tokens)
    if len(input_ids) >= limit:
        return Outcome(
            f"Input length ({len(input_ids)} tokens) exceeds the maximum allowed length ({limit} tokens).",
            crash=not rust,
        )
    return None


def judge_all(items: list[dict[str, Any]], **facts: Any) -> Outcome | None:
    """0.5.19's answer to one call's requests (`judge`'s facts): a refusal of any (a batch's requests are
    all checked before any runs), else a crash on one; None: all admitted."""
    found = [verdict for verdict in (judge(item, **facts) for item in items) if verdict is not None]
    return next((verdict for verdict in found if not verdict.crash), found[0] if found else None)


def error_response(message: str, status: int = 400) -> JSONResponse:
    """An error as 0.5.19's Python frontend answers it."""
    return JSONResponse({"error": {"message": message}}, status_code=status)
