"""A JSON body read into its route's request model, within bounded work, wherever it runs.

Contract: `parse_body(body, content_type, model)` returns the validated request, or the 422 entries
to answer with, or neither (the FastAPI route then answers, as it always has: a content type that is
not JSON, an empty body, or a small invalid one whose few issues FastAPI lists word for word).
- A body is read by `loads_if_same` (orjson) where it gives the same value as the strict parser,
  else by `loads_strict`; JSON that neither takes is FastAPI's `json_invalid` entry, built here. A
  lone UTF-16 surrogate escape (no UTF-8 text can hold it: echoed in an answer, one was a 500) is a
  `string_unicode` entry naming each string that holds one (the object, for a key).
- A body of more than MAX_JSON_VALUES values is refused unparsed: parsing and validating hold the GIL
  throughout, about 1-7 us per value. The bound is counted before parsing, over the whole body (the
  state, the questions, every field): values <= 1 + commas + opening brackets and braces, since the
  top value is one and a container of n > 0 entries holds n - 1 commas and opens once (an empty one
  opens once and holds none). It is counted in C (`bytes.count`), a COUNT_PIECE at a time so the
  loop can take the GIL between pieces, and no further than the cap; commas and brackets in strings
  only add to it (a 4,096-message chat of prose counts a few thousand more).
- Before validation (which holds the GIL throughout: 180k questions took 2 s, 41k `/v1/decisions`
  input items 280 ms), the validated containers are counted in Python (which lets the loop in every
  few ms): more than MAX_QUESTIONS questions, more than MAX_INPUT_ITEMS items of a `/v1/decisions`
  `input`, a container of more than MAX_ITEMS entries, or more than MAX_QUESTION_VALUES values in all
  the questions is a 422 naming the field, unvalidated. Each is past what a route's own limits let
  a usual request reach (`/v1/limits`); they bound work, and are stated in `docs/api.md`.
- An invalid body with more than `errors.MAX_LISTED_ISSUES` issues has its entries built here (the
  first ones listed, the rest counted: `errors.listed`); pydantic lists every issue at about 8 us
  each, so past MAX_ENUMERATED_ISSUES only their count is given.
Automatic garbage collection is paused while a body is parsed and validated (`collector.paused`).
`fast_path` runs this on the event loop for a body of at most JSON_INLINE_BYTES, on the GIL-bound
thread (`workers.gil_bound`) for a larger one, so the loop's share stays a few milliseconds whatever the body holds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from openjev.api.errors import MAX_LISTED_ISSUES, listed, validation_entry
from openjev.api.strict_json import loads_if_same, loads_strict, lone_surrogate_at
from openjev.api.workers import gil_bound
from openjev.collector import paused

#: Bytes of JSON parsed and validated on the event loop at most: measured (median of 30, 2-core
#: machine under load), a body this size costs the loop 0.05 ms as one text, 0.41 ms as a
#: `/v1/decisions` chat of 364 messages, 1.15 ms as 680 invalid questions (their issues are listed on
#: a worker thread); a larger one is read on a worker thread.
JSON_INLINE_BYTES = 16 * 1024
T = TypeVar("T")


async def by_size(body_bytes: int, work: Callable[[], T]) -> T:
    """`work()` (a walk of a request read from a body of `body_bytes` bytes) on the event loop for a body
    of at most JSON_INLINE_BYTES, else on the GIL-bound thread (`workers.gil_bound`), as parsing is: its
    cost grows with the body as parsing's does, and it holds the GIL as parsing does."""
    return work() if body_bytes <= JSON_INLINE_BYTES else await gil_bound(work)


#: Values a JSON body may hold (module doc): a 4,096-message chat counts about 12,000; the largest
#: request the contracts allow, 200 `/v1/decisions` choice questions of 255 described options, 154,004
#: (as many as MAX_QUESTION_VALUES: 0.3-1.8 s of the GIL-bound thread at 1-7 us per value).
MAX_JSON_VALUES = 262_144
COUNT_PIECE = 64 * 1024


def value_count(body: bytes, cap: int) -> int:
    """A bound on the values `body` holds, 1 + its commas, `[` and `{` (module doc), counted a piece
    at a time and no further than past `cap`."""
    count = 1
    for start in range(0, len(body), COUNT_PIECE):
        piece = body[start : start + COUNT_PIECE]
        count += piece.count(b",") + piece.count(b"[") + piece.count(b"{")
        if count > cap:
            break
    return count


#: Bounds of the validated containers (module doc): validating one costs 2-7 us per value with the GIL
#: held. 200 `/v1/decisions` choice questions of 255 described options hold about 153,000 values
#: (0.27-0.33 s of validation on a loaded 2-core machine).
MAX_QUESTIONS = 1024
MAX_INPUT_ITEMS = 4096
MAX_ITEMS = 1024
MAX_QUESTION_VALUES = 262_144
#: Issues listed at most by pydantic before only their count is given (about 80 ms of a worker).
MAX_ENUMERATED_ISSUES = 10_000


def is_media_type(content_type: str | None, media_type: str) -> bool:
    """Whether a Content-Type header names `media_type` (lower case), with any parameters."""
    return content_type is not None and content_type.partition(";")[0].strip().lower() == media_type


def is_json_type(content_type: str | None) -> bool:
    """`application/json`, with any parameters: a type FastAPI reads as JSON too."""
    return is_media_type(content_type, "application/json")


@dataclass(frozen=True, slots=True)
class Parsed:
    """The request (None if it does not validate) and the 422 entries to answer with (None: the route's)."""

    request: Any = None
    rejection: list[dict[str, Any]] | None = None
    #: Issues left to list (`issue_entries`, on a worker thread) when the body was read on the loop.
    error: ValidationError | None = None


def _entry(loc: list[str | int], msg: str, kind: str, ctx: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"loc": loc, "msg": msg, "type": kind, **({"ctx": ctx} if ctx else {})}


def issue_entries(error: ValidationError) -> list[dict[str, Any]]:
    total = error.error_count()
    if total > MAX_ENUMERATED_ISSUES:
        message = f"the body has {total} validation issues, too many to list; it is far from a valid request"
        return [_entry(["body"], message, "too_many_errors", {"count": total})]
    errors = error.errors(include_url=False, include_input=False)
    return listed((validation_entry({**item, "loc": ("body", *item["loc"])}) for item in errors), total)


SURROGATE_TEXT = "text must be valid Unicode: it holds a lone UTF-16 surrogate"
_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate_places(value: Any) -> Iterator[list[str | int]]:
    """The location of every string holding a lone surrogate, and of every object with such a key
    (escapes of a pair are one character once read; only a lone one is left a surrogate)."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                yield where
        elif isinstance(item, dict):
            if any(_SURROGATE.search(key) for key in item):
                yield where
            stack += ((child, [*where, key]) for key, child in reversed(item.items()) if not _SURROGATE.search(key))
        elif isinstance(item, list):
            stack += ((child, [*where, index]) for index, child in reversed(list(enumerate(item))))


def _count(value: Any, loc: list[str | int], budget: int) -> tuple[int, list[str | int] | None]:
    """Values in `value` (at most `budget`, then it stops), and the location of a container of more than
    MAX_ITEMS entries, if one was met."""
    stack, seen = [(value, loc)], 0
    while stack and seen <= budget:
        item, where = stack.pop()
        seen += 1
        if isinstance(item, dict | list):
            if len(item) > MAX_ITEMS:
                return seen, where
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            stack += ((child, [*where, key]) for key, child in pairs)
    return seen, None


def _too_long(loc: list[str | int], what: str, limit: int, actual: int | None = None) -> dict[str, Any]:
    got = f", got {actual}" if actual is not None else ""
    message = f"at most {limit} {what} in one request (reading more holds the server too long){got}"
    return _entry(["body", *loc], message, "too_long", {"max_length": limit})


def _oversized(value: Any) -> dict[str, Any] | None:
    """The 422 entry for a body whose validated containers are past the bounds (module doc), or None."""
    if not isinstance(value, dict):
        return None
    questions, given = value.get("questions"), value.get("input")
    if isinstance(given, list) and len(given) > MAX_INPUT_ITEMS:
        return _too_long(["input"], "input items", MAX_INPUT_ITEMS, len(given))
    if not isinstance(questions, dict | list):
        return None
    if len(questions) > MAX_QUESTIONS:
        return _too_long(["questions"], "questions", MAX_QUESTIONS, len(questions))
    seen, crowded = _count(questions, ["questions"], MAX_QUESTION_VALUES)
    if crowded is not None:
        return _too_long(crowded, "entries of one list or object", MAX_ITEMS)
    if seen > MAX_QUESTION_VALUES:
        return _too_long(["questions"], "values in all the questions", MAX_QUESTION_VALUES)
    return None


def parse_body(body: bytes, content_type: str | None, model: type[BaseModel], inline: bool = False) -> Parsed:
    """The module's contract; `inline`: on the event loop, where many issues are not listed but left in
    `Parsed.error` (pydantic lists 8,000 issues, as a 16 KiB body can hold, in about 60 ms)."""
    if not is_json_type(content_type) or not body:
        return Parsed()
    # The collector would walk the value again and again as it grows (`collector.py`).
    with paused():
        return _parsed(body, model, inline)


def _parsed(body: bytes, model: type[BaseModel], inline: bool) -> Parsed:
    if value_count(body, MAX_JSON_VALUES) > MAX_JSON_VALUES:
        message = f"the body holds more than {MAX_JSON_VALUES} JSON values; no request needs as many"
        return Parsed(rejection=listed([_entry(["body"], message, "too_long", {"max_length": MAX_JSON_VALUES})], 1))
    value = loads_if_same(body)
    if value is None:
        try:
            value = loads_strict(body, lone_surrogates=True)
        except json.JSONDecodeError as error:
            entry = _entry(["body", error.pos], "JSON decode error", "json_invalid", {"error": error.msg})
            return Parsed(rejection=listed([entry], 1))
    if (refusal := _oversized(value)) is not None:
        return Parsed(rejection=listed([refusal], 1))
    if b"\\u" in body and lone_surrogate_at(body) is not None:
        places = list(_surrogate_places(value))
        return Parsed(
            rejection=listed((_entry(["body", *loc], SURROGATE_TEXT, "string_unicode") for loc in places), len(places))
        )
    try:
        return Parsed(request=model.model_validate(value))
    except ValidationError as error:
        if error.error_count() <= MAX_LISTED_ISSUES and len(body) <= JSON_INLINE_BYTES:
            return Parsed()
        return Parsed(error=error) if inline else Parsed(rejection=issue_entries(error))
