"""The fake's reading of a `/generate` body in SGLang's list form: one single-form body per request.

As 0.5.19 and 0.5.23 read it (`managers/io_struct.py` `GenerateReqInput.normalize_batch_and_arguments`,
`_normalize_batch_inputs` and `__getitem__`):
- the list form is recognised by `input_ids[0]` being a list (`_determine_batch_size`);
- `rid`: a list of one rid per request (another length is a 400, `_normalize_rid`; two alike a 400,
  `_validate_rid_uniqueness`), or one string that becomes `rid_0`, `rid_1`, ...;
- `sampling_params`, `return_logprob`, `logprob_start_len`: one value for all, or a list of one per
  request; `token_ids_logprob`: a flat list copied to every request, or one list per request;
- `image_data`: a list of one list of entries per request (None or `[]`: none), or of one entry per
  request; another length than the batch's is a 400 (`_normalize_image_data`);
- `routed_dp_rank` (and its alias) is one value for every request.
A shape SGLang refuses is an `Outcome` (the whole call fails, nothing runs). openjev's own contract:
every request has its own rid, as a list in the list form (`rid_breach`), so that it can abort each.
"""

from __future__ import annotations

from typing import Any

from tests.fake_sglang.rules import Outcome

#: What sgl-model-gateway 0.3.2 answers a list-form body (422): its `rid` is one string.
GATEWAY_REFUSAL = (
    "Failed to deserialize the JSON body into the target type: rid: invalid type: sequence, expected a string"
)
#: The fields that hold one value per request in the list form; the rest are the same for all.
_PER_REQUEST = ("sampling_params", "return_logprob", "logprob_start_len")


def requests_of(body: Any) -> list[Any]:
    """The single-form body of each request a posted body holds: a batch's split, anything else itself."""
    items = split_batch(body) if is_batch(body) else [body]
    return [body] if isinstance(items, Outcome) else items


def rids_of(body: dict[str, Any]) -> list[str]:
    """The rids of one `/generate` body openjev sent: one, or a batch's list."""
    rid = body["rid"]
    return rid if isinstance(rid, list) else [rid]


def is_batch(body: Any) -> bool:
    ids = body.get("input_ids") if isinstance(body, dict) else None
    return isinstance(ids, list) and bool(ids) and isinstance(ids[0], list)


def _rids(rid: Any, size: int) -> list[Any] | Outcome:
    if isinstance(rid, str):
        return [f"{rid}_{index}" for index in range(size)]
    if not isinstance(rid, list) or len(rid) != size:
        return Outcome("The specified rids length mismatch with the batch_size for batch processing.")
    if len(set(map(str, rid))) != size:
        return Outcome("Duplicate request IDs detected within the request")
    return rid


def _images(images: Any, size: int) -> list[Any] | Outcome:
    if images is None or images == []:
        return [None] * size
    if not isinstance(images, list) or len(images) != size:
        return Outcome("The length of image_data should be equal to the batch size.")
    if isinstance(images[0], list):
        return [entries or None for entries in images]
    return [[entry] for entry in images]


def _one_each(value: Any, size: int, name: str) -> list[Any] | Outcome:
    if not isinstance(value, list):
        return [value] * size
    if len(value) != size:
        return Outcome(f"{name} holds {len(value)} values for a batch of {size}")
    return value


def split_batch(body: dict[str, Any]) -> list[dict[str, Any]] | Outcome:
    """The single-form body of each request in a list-form `body`, in order."""
    size = len(body["input_ids"])
    columns: dict[str, list[Any] | Outcome] = {
        "rid": _rids(body.get("rid"), size),
        "image_data": _images(body.get("image_data"), size),
        **{name: _one_each(body.get(name), size, name) for name in _PER_REQUEST},
    }
    labels = body.get("token_ids_logprob")
    if labels and isinstance(labels, list) and isinstance(labels[0], list):
        columns["token_ids_logprob"] = _one_each(labels, size, "token_ids_logprob")
    else:
        columns["token_ids_logprob"] = [labels] * size
    refused = next((column for column in columns.values() if isinstance(column, Outcome)), None)
    if refused is not None:
        return refused
    shared = {name: value for name, value in body.items() if name not in columns and name != "input_ids"}
    items = []
    for index, ids in enumerate(body["input_ids"]):
        item = {"input_ids": ids, **shared}
        for name, column in columns.items():
            value = column[index]  # type: ignore[index]
            if value is not None:
                item[name] = value
        items.append(item)
    return items


def rid_breach(body: dict[str, Any], items: list[dict[str, Any]]) -> str | None:
    """What openjev must not send although SGLang would take it: a request it could not abort."""
    if not all(isinstance(item.get("rid"), str) and item["rid"] for item in items):
        return "a readout without a rid cannot be aborted"
    if is_batch(body) and not isinstance(body.get("rid"), list):
        return "a batch's rids must be a list: SGLang's own `rid_i` cannot be aborted by openjev's rid"
    return None
