"""SGLang's readout bodies: one readout as a single `/generate`, or several as one in its list form.

A readout (`generate_payload`, SGLang's native `GenerateReqInput`):

    {"rid", "input_ids", "sampling_params": {"max_new_tokens": 1, "temperature": 0},
     "return_logprob": true, "logprob_start_len": -1, "token_ids_logprob": [label ids]}

- `token_ids_logprob` is never empty, so any two of our calls can share a batch without the
  mixed-batch scheduler crash (SGLang #34719).
- `logprob_start_len = -1` asks for output logprobs only and keeps full radix-prefix reuse.
- `temperature = 0` returns the raw log-softmax; openjev applies its own temperature afterwards.
- `routed_dp_rank` only with several ranks; `image_data` only with images, one entry per image pad.

Readouts that go out together (an evaluation's branches, `batch_payload`) are one `/generate` in the
list form, so that SGLang's TokenizerManager hands them to the scheduler at once and they share one
prefill step (sent one by one, the first to arrive starts a step alone and the rest wait for the next):

    {"rid": [rid, ...], "input_ids": [[ids], ...], "sampling_params": [{...}, ...],
     "return_logprob": true, "logprob_start_len": -1, "token_ids_logprob": [[label ids], ...]}

Read in SGLang 0.5.19 and 0.5.23 (`managers/io_struct.py` `GenerateReqInput.normalize_batch_and_arguments`
and `__getitem__`; `managers/tokenizer_manager.py` `_handle_batch_request`):
- The list form is recognised by `input_ids[0]` being a list. `rid` is a list of distinct rids, one
  per readout (a string would become `rid_0`, `rid_1`, ..., which `/abort_request` cannot name
  exactly); `sampling_params` one dict per readout; `return_logprob` and `logprob_start_len` scalars,
  given to every readout; `token_ids_logprob` one non-empty list per readout (a flat list would be
  copied to every readout, a per-readout null is refused), so every readout in a batch has the
  single readout's logprob shape; `routed_dp_rank` one scalar for all (every call of an evaluation
  is on one rank).
- `image_data`: one list per readout, its entries in pad order, `[]` for a readout without images
  (a list whose first element is not a list is read as one image per readout).
- Readouts without images are checked one by one, then sent to the scheduler as one message
  (`_batch_tokenize_and_process`, `_send_batch_request`): none is sent if one is refused. Readouts
  with images are processed and sent one after another.
- The answer is a JSON list in request order, each element a single readout's answer
  (`sglang_answers.parse_label_logprobs`). A refused or failed readout fails the whole call with its
  error, and the others may still run (SGLang does not abort them): the caller aborts every rid.
- The Rust frontend (`SGLANG_RUST_SERVER=1`) takes the same list form and answers the same list.
  sgl-model-gateway (`sglang-router` 0.3.2) does not: it re-reads `/generate` into a struct whose
  `rid` is one string and answers 422 ("rid: invalid type: sequence"), before any readout runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openjev.backends.base import BackendError, LabelLogprobs, ReadoutCall
from openjev.backends.sglang_answers import parse_label_logprobs
from openjev.prompting.prompt_ids import json_ids

READOUT_SAMPLING_PARAMS = {"max_new_tokens": 1, "temperature": 0}


class ListFormRefused(BackendError):
    """The server answered a list-form `/generate` with 422: it reads only the single form."""


def _rank(call: ReadoutCall) -> dict[str, Any]:
    # Only with several ranks: one rank's payload stays exactly what it was.
    return {} if call.routed_dp_rank is None else {"routed_dp_rank": call.routed_dp_rank}


def generate_payload(call: ReadoutCall, image_data: list[str] | None = None) -> dict[str, Any]:
    """The readout body; `image_data`: one entry (a base64 PNG or a file's path, `sglang_images.py`) per
    image pad of the ids, in order (`sglang_vision.py`)."""
    return {
        "rid": call.rid,
        "input_ids": json_ids(call.input_ids),
        "sampling_params": READOUT_SAMPLING_PARAMS,
        "return_logprob": True,
        "logprob_start_len": -1,
        "token_ids_logprob": list(call.label_token_ids),
        **_rank(call),
        **({"image_data": image_data} if image_data else {}),
    }


def batch_payload(calls: Sequence[ReadoutCall], image_data: list[str] | None = None) -> dict[str, Any]:
    """The body of several readouts on one rank; `image_data`: the entries of every call's images, call
    after call (as `generate_payload`'s), split here into one list per readout."""
    if len({call.routed_dp_rank for call in calls}) != 1:
        raise ValueError("the readouts of one batch must be on one data-parallel rank")
    body = {
        "rid": [call.rid for call in calls],
        "input_ids": [json_ids(call.input_ids) for call in calls],
        "sampling_params": [READOUT_SAMPLING_PARAMS] * len(calls),
        "return_logprob": True,
        "logprob_start_len": -1,
        "token_ids_logprob": [list(call.label_token_ids) for call in calls],
        **_rank(calls[0]),
    }
    if image_data:
        entries = iter(image_data)
        body["image_data"] = [[next(entries) for _ in call.images] for call in calls]
    return body


def parse_batch(body: Any, calls: Sequence[ReadoutCall]) -> list[LabelLogprobs]:
    """Each readout's label logprobs from the list SGLang answers, in order; anything else is a BackendError."""
    if not isinstance(body, list) or len(body) != len(calls):
        raise BackendError(f"SGLang's answer to {len(calls)} readouts is not a list of {len(calls)} answers")
    for answer, call in zip(body, calls, strict=True):
        meta = answer.get("meta_info") if isinstance(answer, dict) else None
        if isinstance(meta, dict) and meta.get("id", call.rid) != call.rid:
            raise BackendError("SGLang's answers to a batch of readouts are not in the order asked")
    return [parse_label_logprobs(answer, call) for answer, call in zip(body, calls, strict=True)]
