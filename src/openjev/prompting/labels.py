"""Single-token answer labels, verified against the live tokenizer.

A label is only usable if, placed right after the answer cue, it adds exactly one token to the
prompt: `encode(context + label) == encode(context) + [label_token_id]`. Digits fail this for 10 and
up in Qwen's tokenizer, so options are lettered A-Z, then two-letter combinations AA, AB, ... that
pass the check, in that order, until there are enough for the largest question. Yes/no questions
read `Yes` and `No`; score levels may be numbered 1-9 instead (`digit_labels`, as many of those as are
single tokens). Everything is checked once at startup; a tokenizer that cannot supply the labels
stops the server with a clear message.
"""

from __future__ import annotations

import string
from collections.abc import Iterator
from dataclasses import dataclass

from openjev.prompting.tokenizer import ChatTokenizer

YES, NO = "Yes", "No"
#: Digit labels for score levels, 1-based as rubrics are usually numbered; 10 is two tokens in Qwen's vocabulary.
DIGITS = tuple(str(digit) for digit in range(1, 10))


class LabelError(RuntimeError):
    """The tokenizer cannot supply the labels the service needs."""


@dataclass(frozen=True, slots=True)
class LabelSet:
    option_labels: tuple[str, ...]
    option_label_ids: tuple[int, ...]
    yes_no_labels: tuple[str, str]
    yes_no_ids: tuple[int, int]
    #: "1", "2", ... as far as each is one token after the cue (score levels, OPENJEV_SCORE_LABELS=digits).
    digit_labels: tuple[str, ...] = ()
    digit_label_ids: tuple[int, ...] = ()


def candidate_labels() -> Iterator[str]:
    letters = string.ascii_uppercase
    yield from letters
    for first in letters:
        for second in letters:
            yield first + second


def single_token_id(chat: ChatTokenizer, context_ids: list[int], context: str, label: str) -> int | None:
    """The label's token id when it is exactly one token at the end of `context`, else None."""
    ids = chat.encode(context + label)
    if len(ids) == len(context_ids) + 1 and ids[: len(context_ids)] == context_ids and ids[-1] != chat.unknown_token_id:
        return ids[-1]
    return None


def build_label_set(chat: ChatTokenizer, context: str, option_count: int) -> LabelSet:
    """Check labels in the exact position they are read: at the end of `context`."""
    context_ids = chat.encode(context)
    labels: list[str] = []
    label_ids: list[int] = []
    for label in candidate_labels():
        if len(labels) == option_count:
            break
        token_id = single_token_id(chat, context_ids, context, label)
        if token_id is not None and token_id not in label_ids:
            labels.append(label)
            label_ids.append(token_id)
    if len(labels) < option_count:
        raise LabelError(
            f"the tokenizer in {chat.directory} yields only {len(labels)} single-token option labels "
            f"after the answer cue; {option_count} are needed"
        )
    yes_no = []
    for word in (YES, NO):
        token_id = single_token_id(chat, context_ids, context, word)
        if token_id is None:
            raise LabelError(f"{word!r} is not a single token after the answer cue in {chat.directory}")
        yes_no.append(token_id)
    digits: list[tuple[str, int]] = []
    for digit in DIGITS:
        token_id = single_token_id(chat, context_ids, context, digit)
        if token_id is None:
            break
        digits.append((digit, token_id))
    return LabelSet(
        tuple(labels),
        tuple(label_ids),
        (YES, NO),
        (yes_no[0], yes_no[1]),
        tuple(digit for digit, _ in digits),
        tuple(token_id for _, token_id in digits),
    )
