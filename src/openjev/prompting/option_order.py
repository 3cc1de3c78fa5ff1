"""The order a choice question's options are shown in (OPENJEV_OPTION_ORDER).

Contract:
- `given`: the caller's order, as sent.
- `canonical`: the options sorted by their text, then by their key: an option's text is its
  description as the prompt renders it (`render_value`), or its key where the description is null
  (the prompt then shows the key); strings compare by Unicode code point. Keys are unique within a
  question, so the sort key (text, key) orders any set of options totally: two listings of the same
  options (the same keys with the same descriptions, in any order) are shown in one and the same
  order, so the model reads the same prompt and the server serves the same answer for both. Answers
  stay keyed by the caller's option keys, listed in the caller's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openjev.options import OptionOrder
from openjev.request.schema import ChoiceQuestion, render_value


def option_text(key: str, description: Any) -> str:
    """What the prompt shows of an option: its rendered description, or its key when it has none."""
    return key if description is None else render_value(description)


def canonical_keys(options: Mapping[str, Any]) -> list[str]:
    """The option keys sorted by (text, key) (module doc)."""
    return sorted(options, key=lambda key: (option_text(key, options[key]), key))


def shown_question(question: ChoiceQuestion, order: OptionOrder) -> ChoiceQuestion:
    """The question with its options in the order they are shown under `order`."""
    if order is OptionOrder.given:
        return question
    criteria = {key: question.criteria[key] for key in canonical_keys(question.criteria)}
    return question.model_copy(update={"criteria": criteria})
