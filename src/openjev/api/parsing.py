"""A JSON body read into its route's request model, within bounded work, wherever it runs.

Contract: `parse_body(body, content_type, model)` returns the validated request, or the 422 entries
to answer with, or neither (the FastAPI route then answers, as it always has: a content type that is
not JSON, an empty body, or a small invalid one whose few issues FastAPI lists word for word).
- A body is read by `loads_if_same` (orjson) where it gives the same value as the strict parser,
  else by `loads_strict`; JSON that neither takes is FastAPI's `json_invalid` entry, built here.
- A body of more than MAX_JSON_VALUES values (counted as its commas, in C, before parsing) is refused
  unparsed: validation costs about 2 us per invalid value and holds the GIL.
- An invalid body with more than `errors.MAX_LISTED_ISSUES` issues has its entries built here (the
  first ones listed, the rest counted: `errors.listed`); pydantic lists every issue at about 8 us
  each, so past MAX_ENUMERATED_ISSUES only their count is given.
`fast_path` runs this on the event loop for a body of at most JSON_INLINE_BYTES, on a worker thread
for a larger one, so the loop's share stays a few milliseconds whatever the body holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from openjev.api.errors import MAX_LISTED_ISSUES, listed, validation_entry
from openjev.api.strict_json import loads_if_same, loads_strict

#: Bytes of JSON parsed and validated on the event loop at most: measured on the running server, a
#: body this size costs the loop under 0.5 ms when valid and at most about 5 ms however it is invalid
#: (`docs/api.md`, hardening); a larger one is read on a worker thread.
JSON_INLINE_BYTES = 16 * 1024
#: Values a JSON body may hold (commas, counted before parsing): a request of text and images has
#: few; a body of this many invalid values takes about half a second to validate.
MAX_JSON_VALUES = 250_000
#: Issues listed at most by pydantic before only their count is given (about 80 ms of a worker).
MAX_ENUMERATED_ISSUES = 10_000


def is_json_type(content_type: str | None) -> bool:
    """`application/json`, with any parameters: a type FastAPI reads as JSON too."""
    return content_type is not None and content_type.partition(";")[0].strip().lower() == "application/json"


@dataclass(frozen=True, slots=True)
class Parsed:
    """The request (None if it does not validate) and the 422 entries to answer with (None: the route's)."""

    request: Any = None
    rejection: list[dict[str, Any]] | None = None


def _entry(loc: list[str | int], msg: str, kind: str, ctx: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"loc": loc, "msg": msg, "type": kind, **({"ctx": ctx} if ctx else {})}


def _issues(error: ValidationError) -> list[dict[str, Any]]:
    total = error.error_count()
    if total > MAX_ENUMERATED_ISSUES:
        message = f"the body has {total} validation issues, too many to list; it is far from a valid request"
        return [_entry(["body"], message, "too_many_errors", {"count": total})]
    errors = error.errors(include_url=False, include_input=False)
    return listed((validation_entry({**item, "loc": ("body", *item["loc"])}) for item in errors), total)


def parse_body(body: bytes, content_type: str | None, model: type[BaseModel]) -> Parsed:
    """The module's contract."""
    if not is_json_type(content_type) or not body:
        return Parsed()
    if (commas := body.count(b",")) >= MAX_JSON_VALUES:
        message = f"the body holds more than {MAX_JSON_VALUES} JSON values ({commas + 1}); no request needs as many"
        return Parsed(rejection=[_entry(["body"], message, "too_long", {"max_length": MAX_JSON_VALUES})])
    value = loads_if_same(body)
    if value is None:
        try:
            value = loads_strict(body)
        except json.JSONDecodeError as error:
            return Parsed(
                rejection=[_entry(["body", error.pos], "JSON decode error", "json_invalid", {"error": error.msg})]
            )
    try:
        return Parsed(request=model.model_validate(value))
    except ValidationError as error:
        return Parsed(
            rejection=_issues(error)
            if error.error_count() > MAX_LISTED_ISSUES or len(body) > JSON_INLINE_BYTES
            else None
        )
