"""SGLang's thinking-tier call 1: one decoding `/generate` that may share batches with readouts.

    {"rid", "input_ids",
     "sampling_params": {"max_new_tokens": budget, "temperature": 0, "stop_token_ids": [close id, ...]},
     "return_logprob": true, "logprob_start_len": -1, "token_ids_logprob": [first stop id]}

- SGLang #34719 (read in 0.5.19, `layers/logprob_processor.py:141-153` `get_token_ids_logprobs_raw`
  and its `.tolist()` callers in `batch_result_processor.py`): a prefill or decode batch in which
  one request has a non-empty `token_ids_logprob` and another has none kills the scheduler. Every
  readout carries one, and a generation runs in the same prefill and decode batches as readouts for
  its whole length, so it carries one too: its first stop id, read at each generated position and
  never used (one gathered logprob a step). `return_logprob` true and `logprob_start_len` -1 as in a
  readout: output positions only, full radix-prefix reuse.
- Greedy (`temperature` 0) by default. A sampled call sends `sampling_seed`, which 0.5.19's sampler
  honours only under `--enable-deterministic-inference` (`layers/sampler.py:295-330`).
- A box question's generation (`answering/box_reading.py`) sends its grammar as `sampling_params.regex`
  and reads the digit ids at every generated position: `token_ids_logprob` is then those ids, and
  `meta_info.output_token_ids_logprobs` holds one list of `[logprob, id, text]` per generated id.
  0.5.19 applies the grammar's mask to the logits before the sampler's log-softmax
  (`sampling_batch_info.apply_logits_bias`, `layers/sampler.py`), so the logprobs are over the
  allowed ids. Once the regex is matched, xgrammar allows only the model's end-of-sequence ids and the
  request finishes on the one picked (`schedule_batch.py` `check_finished`: `grammar.is_terminated`,
  `FINISH_MATCHED_TOKEN`), which ends `output_ids` as any matched stop id does.
- SGLang keeps a matched stop id in `output_ids`; `finish_reason` is `{"type": "stop", "matched":
  id}` or `{"type": "length", ...}`. It also stops on the model's own end-of-sequence ids.
"""

from __future__ import annotations

from typing import Any

from openjev.backends.base import BackendError, Generation, GenerationCall
from openjev.prompting.prompt_ids import json_ids


def generation_payload(call: GenerationCall, image_data: list[str] | None = None) -> dict[str, Any]:
    """The generation body; `image_data` as a readout's (`sglang.generate_payload`)."""
    params: dict[str, Any] = {
        "max_new_tokens": call.max_new_tokens,
        "temperature": call.temperature,
        "stop_token_ids": list(call.stop_token_ids),
    }
    if call.temperature > 0 and call.seed is not None:
        params["sampling_seed"] = call.seed
    if call.constraint is not None:
        params["regex"] = call.constraint.regex
    return {
        "rid": call.rid,
        "input_ids": json_ids(call.input_ids),
        "sampling_params": params,
        "return_logprob": True,
        "logprob_start_len": -1,
        "token_ids_logprob": list(call.read_ids or call.stop_token_ids[:1]),
        **({} if call.routed_dp_rank is None else {"routed_dp_rank": call.routed_dp_rank}),
        **({"image_data": image_data} if image_data else {}),
    }


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def parse_generation(body: Any, call: GenerationCall) -> Generation:
    """The generated ids and counts; anything malformed is a BackendError (HTTP 502 if it escaped)."""
    try:
        meta, output = body["meta_info"], body["output_ids"]
        finish = meta.get("finish_reason") or {}
        kind = finish.get("type") if isinstance(finish, dict) else None
        if kind == "abort":
            raise BackendError("SGLang aborted the generation")
        if not isinstance(output, list) or not all(_count(token) is not None for token in output):
            raise BackendError("SGLang's output_ids are not a list of token ids")
        if len(output) > call.max_new_tokens:
            raise BackendError(f"SGLang generated {len(output)} ids, over max_new_tokens={call.max_new_tokens}")
        prompt = _count(meta.get("prompt_tokens", len(call.input_ids)))
        cached = meta.get("cached_tokens")
    except BackendError:
        raise
    except (KeyError, TypeError, AttributeError) as error:
        raise BackendError(f"SGLang's /generate answer lacks the generated ids ({type(error).__name__})") from error
    if prompt is None or (cached is not None and _count(cached) is None):
        raise BackendError("SGLang's prompt_tokens or cached_tokens is not a count")
    read = _read_logprobs(meta, call, len(output)) if call.read_ids else ()
    return Generation(tuple(output), prompt, cached, "stop" if kind == "stop" else "length", read)


def _read_logprobs(meta: Any, call: GenerationCall, generated: int) -> tuple[tuple[float, ...], ...]:
    """`output_token_ids_logprobs`: per generated position, [logprob, id, text] for each id asked."""
    positions = meta.get("output_token_ids_logprobs")
    if not isinstance(positions, list) or len(positions) != generated:
        raise BackendError("SGLang's output_token_ids_logprobs does not hold one entry per generated id")
    read = []
    for entries in positions:
        try:
            by_id = {int(entry[1]): float(entry[0]) for entry in entries}
            read.append(tuple(by_id[token] for token in call.read_ids))
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise BackendError("SGLang's output_token_ids_logprobs lacks an id asked for") from error
    return tuple(read)
