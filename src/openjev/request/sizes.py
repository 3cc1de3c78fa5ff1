"""How much text a request brings, in UTF-8 bytes, counted on the event loop.

`text_bytes(value, limit)` sums the UTF-8 length of every string in a JSON value (object keys too)
and one byte for every other scalar (None too), stopping as soon as the sum passes `limit`: the count decides
whether a request is small enough to prepare on the event loop, so it must itself cost little on a
large body. An ASCII string's length is its byte count (CPython knows it without reading the text);
another is encoded. `question_bytes` is the same over every question's instructions and criteria,
which are rendered and tokenized for each request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from openjev.request.schema import SystemOneRequest


def _string_bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def text_bytes(value: Any, limit: int) -> int:
    """UTF-8 bytes of the strings in `value` plus one per other scalar; once past `limit`, some count
    past it."""
    total, pending = 0, [value]
    while pending and total <= limit:
        item = pending.pop()
        if isinstance(item, str):
            total += _string_bytes(item)
        elif isinstance(item, Mapping):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
        elif isinstance(item, BaseModel):  # a noul's criteria
            pending.extend(item.__dict__.values())
        else:
            total += 1
    return total


def many_text_bytes(values: Iterable[Any], limit: int) -> int:
    """`text_bytes` of several values together, stopping past `limit` like it."""
    total = 0
    for value in values:
        total += text_bytes(value, limit - total)
        if total > limit:
            break
    return total


def question_bytes(request: SystemOneRequest, limit: int) -> int:
    """`text_bytes` of every question's instructions and criteria together."""
    return many_text_bytes(
        (part for question in request.questions.values() for part in (question.instructions, question.criteria)),
        limit,
    )
