"""OpenAI's limits on a Decisions request, and the fields it cannot honour, as `decision_schema.py` enforces them.

Counts (OpenAI's API schema; the `openai` SDK's docstring says 1-400 questions, its API takes 200):
1 to 200 questions per request, 2 to 255 options per choice, 2 to 10 levels per score, 128 images per
request. A count outside its range is a pydantic `too_short`/`too_long` error whose message names
the limit in the words clients and routers look for ("2 to 10 levels per score, got 11"). The
operator's caps (OPENJEV_MAX_QUESTIONS, ...) apply on top, as on every route.

`UNSUPPORTED`: fields of OpenAI's generation endpoints that a decision cannot honour. Each present
(not null, and for `stream` not `false`, which asks for what every answer is) is an
`unsupported_parameter` error naming it, in OpenAI's wording.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import PydanticCustomError

#: OpenAI's counts per request and per question (its API schema; the SDK's docstring says 1-400 questions).
MAX_QUESTIONS = 200
MIN_CHOICES, MAX_CHOICES = 2, 255
MIN_LEVELS, MAX_LEVELS = 2, 10
MAX_IMAGES = 128
#: OpenAI's bounds on one `input_json` part, and the media types a data URL may carry (`decisions.py` checks them).
JSON_MAX_DEPTH = 32
JSON_MAX_VALUES = 10_000
JSON_MAX_BYTES = 256 * 1024
IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg"}
#: Fields of OpenAI's generation endpoints that a decision cannot honour, and why: each is refused by name.
UNSUPPORTED = {
    "temperature": "answers are read from the model's probabilities, never sampled",
    "top_p": "answers are read from the model's probabilities, never sampled",
    "stream": "the answers come back in one JSON body",
    "tools": "the model calls no tools; send earlier calls as function_call items of the input",
    "tool_choice": "the model calls no tools",
    "max_output_tokens": "the model writes no text",
    "reasoning": "choose the thinking tier by its model name instead",
}


def counted(items: list[Any], least: int, most: int, unit: str) -> list[Any]:
    """`items` when there are `least` to `most` of them; else a `too_short`/`too_long` error whose message
    names the limit as clients read it ("2 to 10 levels per score, got 11")."""
    if least <= len(items) <= most:
        return items
    raise PydanticCustomError(
        "too_short" if len(items) < least else "too_long",
        "{min_length} to {max_length} {unit}, got {actual_length}",
        {"min_length": least, "max_length": most, "unit": unit, "actual_length": len(items)},
    )


def refused_if_set(value: Any, name: str) -> Any:
    """`value` when it asks nothing (`UNSUPPORTED` field `name`); else an `unsupported_parameter` error."""
    if value is None or (name == "stream" and value is False):
        return value
    raise PydanticCustomError(
        "unsupported_parameter",
        "Unsupported parameter: '{param}' is not supported with this endpoint: {why}.",
        {"param": name, "why": UNSUPPORTED[name]},
    )
