"""The window a remembered conversation stands behind, and the proof, per template and shape, that
rendering through it equals rendering in full (step 2 of `conversation_memo.py`'s contract).

A conversation M of at most WHOLE_WINDOW messages is its own window; a longer one is its first
message and its last one or two (as many as keep the window's length and M's of the same parity).
`extend_frame` renders a window's new messages alone; `prove_shape` checks the probes of a shape
(roles of M's first message, of its last, of the new one) once per process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openjev.prompting.prompts import CHAT_ROLES, ConversationFrame, frame_conversation
from openjev.prompting.tokenizer import ChatTokenizer, Segment, TemplateError, chat_template_source

#: Conversations of at most this many messages are their own window (nothing is assumed about them).
WHOLE_WINDOW = 3
_ROLES = tuple(sorted(CHAT_ROLES))
_PROBE_LENGTHS = (4, 5)
#: Frames are rendered without an answer cue: it only ends the question turn, and differs per question type.
NO_CUE = ""

Turn = dict[str, Any]
Shape = tuple[str, str, str | None]


def window_of(head: Turn, tail: tuple[Turn, ...], length: int) -> list[Turn]:
    """The window of a conversation of `length` messages: its first, `head`, and of `tail` (its last two
    after the first, fewer in a shorter one) as many as keep the parity."""
    if length <= WHOLE_WINDOW:
        return [head, *tail]
    return [head, *tail[-(1 if length % 2 == 0 else 2) :]]


def split_segments(segments: Sequence[Segment], offset: int) -> tuple[str, tuple[Segment, ...]] | None:
    """The text of the first `offset` characters and the segments after them; None when the cut
    falls inside quoted text or past the end."""
    head: list[str] = []
    rest: list[Segment] = []
    position = 0
    for text, quoted in segments:
        end = position + len(text)
        if end <= offset:
            head.append(text)
        elif position >= offset:
            rest.append((text, quoted))
        elif quoted:
            return None
        else:
            head.append(text[: offset - position])
            rest.append((text[offset - position :], False))
        position = end
    return ("".join(head), tuple(rest)) if position >= offset else None


def extend_frame(chat: ChatTokenizer, window: Sequence[Turn], new: Sequence[Turn]) -> ConversationFrame | None:
    """The frame of `window + new` holding only the text after P(window); None when P(window) is not
    a prefix of P(window + new) or the rest does not start at a special token."""
    known = frame_conversation(chat, window, NO_CUE).shared_prefix
    grown = frame_conversation(chat, [*window, *new], NO_CUE)
    split = split_segments(grown.shared_prefix_segments, len(known))
    if split is None or split[0] != known:
        return None
    rest = split[1]
    if rest and (chat.special_pattern is None or not chat.special_pattern.match(rest[0][0]) or rest[0][1]):
        return None
    return ConversationFrame(rest, grown.turn_open, grown.turn_close)


def _probe(roles: Sequence[str], start: int = 0) -> list[Turn]:
    return [
        {"role": role, "content": f"Probe message {index}, as a {role}.\nSecond line."}
        for index, role in enumerate(roles, start)
    ]


def canonical(segments: Sequence[Segment]) -> tuple[Segment, ...]:
    """Segments as the encoder reads them: adjacent template texts joined, quoted texts each apart."""
    joined: list[Segment] = []
    for text, quoted in segments:
        if joined and not quoted and not joined[-1][1]:
            joined[-1] = (joined[-1][0] + text, False)
        elif text:
            joined.append((text, quoted))
    return tuple(joined)


def _agrees(chat: ChatTokenizer, conversation: list[Turn], new: list[Turn]) -> bool | None:
    """Whether the window's frame of `conversation + new` equals the full one; None when the template
    refuses the conversation in full (the probe then says nothing)."""
    try:
        full = frame_conversation(chat, [*conversation, *new], NO_CUE)
    except TemplateError:
        return None
    try:
        base = frame_conversation(chat, conversation, NO_CUE).shared_prefix_segments
        window = window_of(conversation[0], tuple(conversation[1:][-2:]), len(conversation))
        extended = extend_frame(chat, window, new)
    except TemplateError:
        return False
    return (
        extended is not None
        and canonical((*base, *extended.shared_prefix_segments)) == canonical(full.shared_prefix_segments)
        and (extended.turn_open, extended.turn_close) == (full.turn_open, full.turn_close)
    )


def reads_the_clock(chat: ChatTokenizer) -> bool:
    """Whether the template may show the date: a remembered prefix would keep yesterday's."""
    return "strftime_now" in chat_template_source(chat.directory)


def probe_roles(first: str, last: str, length: int) -> list[str]:
    """`length` roles from `first` to `last`, users and assistants alternating between them and the
    one before `last` the other of the two (as a template that checks alternation expects)."""
    middle = [
        "assistant" if (length - 2 - index) % 2 == (last == "assistant") else "user" for index in range(1, length - 1)
    ]
    return [first, *middle, last]


def message_markup(chat: ChatTokenizer) -> int:
    """Characters the template writes around a message's text (its turn's markup, the mean of a user
    and an assistant turn): a message of one character renders some 30 on Qwen's; 0 where the probe
    is refused."""
    one, three = _probe(["user"]), _probe(["user", "assistant", "user"])
    try:
        grown = len(frame_conversation(chat, three, NO_CUE).shared_prefix) - len(
            frame_conversation(chat, one, NO_CUE).shared_prefix
        )
    except TemplateError:
        return 0
    return max(0, grown - sum(len(message["content"]) for message in three[1:])) // 2


def prove_shape(chat: ChatTokenizer, shape: Shape) -> bool:
    """Whether rendering through the window equals rendering in full for `shape`, on every probe the
    template accepts (and on one at least): conversations of both parities past `WHOLE_WINDOW`,
    extended by the new role alone and followed by each role."""
    first, last, new = shape
    follow_ups = [[new], *([new, role] for role in _ROLES)] if new else [[]]
    verdicts = [
        _agrees(chat, _probe(probe_roles(first, last, length)), _probe(more, length))
        for length in _PROBE_LENGTHS
        for more in follow_ups
    ]
    return False not in verdicts and True in verdicts
