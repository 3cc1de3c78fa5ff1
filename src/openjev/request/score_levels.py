"""A score level written as `{label, description}`: the object form OpenAI's `levels` use, which
Effect's OpenRouter client sends as a score's `criteria` on Jev's routes.

A score's criteria entry is a labelled level when it is an object holding `label` and no key but
`label` and `description`; any other value is a description as it always was (a string, a worked
entry, any other object or array), so no request that worked before changes meaning unless it
already wrote this form. A labelled level's `label` must be a string and its `description` a
string or null; else the request is refused with a 422 naming the field
(`questions.<id>.criteria.<i>.label`). The model reads it as `/v1/decisions` shows a level: its
label, or `label: description` (`level_text`). The answer's `legend` repeats it as sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidatorFunctionWrapHandler

#: The keys of a labelled level; `label` is the one that makes an object one.
LEVEL_KEYS = frozenset({"label", "description"})


class LabelledLevel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str
    description: str | None = None


_LEVEL = TypeAdapter(LabelledLevel)


def is_labelled(value: Any) -> bool:
    """Whether a score's criteria entry is in the `{label, description}` form."""
    return isinstance(value, Mapping) and "label" in value and LEVEL_KEYS.issuperset(value)


def checked_level(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A score criteria entry, validated: a labelled level against `LabelledLevel` (its errors located
    below the entry, at `label` or `description`) and kept as sent; anything else as a description."""
    if is_labelled(value):
        _LEVEL.validate_python(value)
        return value
    return handler(value)


def level_text(value: Any) -> Any:
    """What the model reads for a level: a labelled level as `label` or `label: description`; any
    other entry unchanged. Assumes a validated entry."""
    if not is_labelled(value):
        return value
    description = value.get("description")
    return value["label"] if description is None else f"{value['label']}: {description}"
