"""Incremental preparation: a conversation that extends one prepared before renders and tokenizes
only its new messages.

Contract: the walk from a state to its frame is this module's, in two steps. `lookup(state)` finds
the state's messages as sent (`prompts.sent_messages`), the longest remembered conversation they
extend and how much text is new (`early_lookup`: only where that renders nothing); `frame(state,
lookup)` renders that new text alone, or the whole conversation (`prompts.normalize_messages`,
`prompts.frame_conversation`).
`ConversationMemo.frame(state)` returns a `Framing` whose `known_ids` followed by the ids of
`frame.shared_prefix_segments` are exactly the ids of the full render's shared prefix, and whose
question turn (`turn_open`, `turn_close`) is the full render's, with no answer cue (the engine
appends each question type's: `ConversationFrame.with_cue`). `remember(framing, prefix_ids)`
keeps the prepared conversation for later requests, in a byte-bounded LRU
(`OPENJEV_CONVERSATION_MEMO_BYTES`; 0 turns reuse off).

Write P(M) for the shared prefix of conversation M (the text before the question turn's opening
special token, `prompts.frame_conversation`) and let M' = M + D extend a remembered M.

1. **Tokens.** If P(M') = P(M) + X where X is empty or starts with a special token, then
   ids(P(M')) = ids(P(M)) + ids(X): the tokenizer cuts at special tokens before anything else
   (`PromptEncoder` checks that at load; without it nothing is reused). X's start is checked per request.
2. **Text** (`memo_windows.py`). Whether P(M') starts with P(M) is a property of the chat template, which is a program.
   X is rendered from a window, W = M's first message and its last one or two (as many as keep
   len(W) and len(M) of the same parity, for templates that check role alternation by index):
   X = P(W + D) minus P(W), and P(W) must be a prefix of P(W + D) (checked per request; for
   M of at most 3 messages W is M itself, so nothing else is assumed). For longer M the window
   stands for the whole conversation, which is proven per template and *shape* (role of M's first
   message, of its last, of D's first or none) before any conversation of that shape is reused, once
   per process (`prove_shape`): probe conversations of 4 and 5 messages (users and assistants
   alternating between the first and the last), extended by the new role alone and followed by each
   role, are rendered both in full and through the window, and the shape is reused only if every
   probe that the template renders in full agrees, in text, quoting and question turn (and one at
   least does). What probes cannot show is a template that reads a message far from the window
   by its content, or refuses a conversation by its length alone. A conversation of an
   unproven shape renders in full (on Qwen3's template that is a tool message followed by another,
   whose `<|im_end|>` depends on the next message). Templates that read the clock (`strftime_now`)
   are never reused.
3. **Which messages.** Only messages of exactly a role and a string content, the probes' shape, are
   remembered or reused; a message with anything else (a name, tool calls, content parts) renders in
   full. A state that is not a chat is the one user message it is shown as (`prompts.sent_messages`),
   so a long document asked about again renders and tokenizes nothing either. A remembered
   conversation is matched by equality of every message, not by a hash.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from openjev.errors import Loc
from openjev.prompting.memo_windows import (
    NO_CUE,
    WHOLE_WINDOW,
    Shape,
    Turn,
    extend_frame,
    message_markup,
    prove_shape,
    reads_the_clock,
    window_of,
)
from openjev.prompting.prompts import (
    ConversationFrame,
    chat_messages,
    frame_conversation,
    normalize_messages,
    sent_messages,
)
from openjev.prompting.tokenizer import ChatTokenizer, TemplateError
from openjev.request.schema import FreeForm
from openjev.request.sizes import many_text_bytes

#: Bytes a remembered prompt id costs (a list slot and an int object); a message's overhead besides its text.
ID_BYTES, MESSAGE_BYTES = 36, 300


def reusable(message: Any) -> bool:
    """A message of exactly a role and a string content (the shape the load-time probes cover)."""
    return (
        type(message) is dict
        and len(message) == 2
        and type(message.get("content")) is str
        and type(message.get("role")) is str
    )


@dataclass(frozen=True, slots=True)
class _Entry:
    raw: list[Any]
    head: Turn
    #: The last two messages after the first (fewer in a shorter conversation).
    tail: tuple[Turn, ...]
    prefix_ids: list[int]
    #: The question turn after these messages (a conversation asked again renders nothing).
    question_turn: tuple[str, str]
    #: Characters of message text, and the bytes the whole entry is counted as.
    text_bytes: int
    cost: int

    def window(self) -> list[Turn]:
        return window_of(self.head, self.tail, len(self.raw))

    def shape(self, new: Sequence[Turn]) -> Shape:
        last = self.tail[-1] if self.tail else self.head
        return (self.head["role"], last["role"], new[0]["role"] if new else None)


class Lookup(NamedTuple):
    """`ConversationMemo.lookup`'s answer: the state's messages as sent and where they are, the
    remembered conversation they extend (None: none), and how much of their text is new."""

    found: tuple[list[Any], Loc]
    entry: _Entry | None
    #: UTF-8 bytes of the new messages' contents and of the template's markup around each, what
    #: preparing them renders (None: the whole state would be rendered).
    new_text_bytes: int | None


@dataclass(frozen=True, slots=True)
class Framing:
    """The question frame; with `known_ids`, its `shared_prefix_segments` hold only the new text."""

    frame: ConversationFrame
    known_ids: list[int] = field(default_factory=list)
    #: What `remember` keeps: the messages as sent, the first one and the last two normalised, and
    #: the text bytes; `raw` is None when the conversation is not to be remembered.
    raw: list[Any] | None = None
    head: Turn | None = None
    tail: tuple[Turn, ...] = ()
    text_bytes: int = 0


class ConversationMemo:
    """Prepared conversations by their messages; safe to share between preparation threads."""

    def __init__(self, chat: ChatTokenizer, capacity_bytes: int, exact_cuts: bool) -> None:
        self.chat = chat
        self.capacity_bytes = max(0, capacity_bytes) if exact_cuts else 0
        if reads_the_clock(chat):
            self.capacity_bytes = 0
        #: Each shape's proof, made on the first conversation of that shape (`prove_shape`).
        self.shapes: dict[Shape, bool] = {}
        self.markup = message_markup(chat)
        self.bytes = 0
        self.reused = 0
        self._entries: OrderedDict[tuple[int, str, str], _Entry] = OrderedDict()
        self._lengths: Counter[int] = Counter()
        self._lock = threading.Lock()

    def early_lookup(self, state: FreeForm) -> Lookup | None:
        """`lookup(state)` where it renders nothing: None for a state that is neither a chat nor a
        string, whose text is rendered first to show it as a message, which is preparation's work."""
        if not isinstance(state, str) and chat_messages(state) is None:
            return None
        return self.lookup(state)

    def lookup(self, state: FreeForm) -> Lookup:
        """Where `frame(state)` starts: the state's messages, the longest remembered conversation they
        extend, and how much text is new, markup included (None: the whole state would be rendered, or which
        cannot be told without rendering: a shape not proven yet)."""
        found = sent_messages(state)
        entry = self._find(found[0]) if self.capacity_bytes else None
        if entry is None:
            return Lookup(found, None, None)
        new = found[0][len(entry.raw) :]
        if not all(reusable(message) for message in new):
            return Lookup(found, entry, None)
        if not self._window_serves(entry, new, prove=False):
            return Lookup(found, entry, None)
        contents = many_text_bytes((message["content"] for message in new), sys.maxsize)
        return Lookup(found, entry, contents + self.markup * len(new))

    def frame(self, state: FreeForm, lookup: Lookup | None = None) -> Framing:
        """The question frame of `state`, reusing the longest remembered conversation it extends;
        `lookup`: this memo's `lookup(state)`, made just before (None: looked up here)."""
        (raw, loc), entry, _ = lookup or self.lookup(state)
        if entry is not None and all(reusable(message) for message in raw[len(entry.raw) :]):
            new = normalize_messages(raw[len(entry.raw) :], loc, len(entry.raw))
            framing = self._extend(entry, raw, new)
            if framing is not None:
                with self._lock:
                    self.reused += 1
                return framing
        messages = normalize_messages(raw, loc)
        frame = frame_conversation(self.chat, messages, NO_CUE)
        if not self.capacity_bytes or not all(reusable(message) for message in raw):
            return Framing(frame)
        text_bytes = sum(len(message["content"]) for message in messages)
        return Framing(frame, [], list(raw), messages[0], tuple(messages[1:][-2:]), text_bytes)

    def _extend(self, entry: _Entry, raw: list[Any], new: list[Turn]) -> Framing | None:
        if not new:
            # The same messages render the same text (templates that read the clock are never reused).
            frame = ConversationFrame((), *entry.question_turn)
            return Framing(frame, entry.prefix_ids, list(raw), entry.head, entry.tail, entry.text_bytes)
        if not self._window_serves(entry, new, prove=True):
            return None
        try:
            frame = extend_frame(self.chat, entry.window(), new)
        except TemplateError:
            return None  # the full render says whether the conversation itself is refused
        if frame is None:
            return None
        text_bytes = entry.text_bytes + sum(len(message["content"]) for message in new)
        return Framing(frame, entry.prefix_ids, list(raw), entry.head, (*entry.tail, *new)[-2:], text_bytes)

    def _window_serves(self, entry: _Entry, new: Sequence[Turn], *, prove: bool) -> bool:
        """Whether `entry` extended by `new` may render through its window: always for a conversation of
        at most WHOLE_WINDOW messages, else once its shape is proven (`prove`: prove it now if it is not
        known yet; otherwise only a proof made before counts)."""
        if not new or len(entry.raw) <= WHOLE_WINDOW:
            return True
        shape = entry.shape(new)
        return self._proven(shape) if prove else bool(self.shapes.get(shape))

    def _proven(self, shape: Shape) -> bool:
        proven = self.shapes.get(shape)
        if proven is None:
            # Two threads may prove the same shape at once; both get the same answer.
            proven = self.shapes[shape] = prove_shape(self.chat, shape)
        return proven

    def _find(self, raw: list[Any]) -> _Entry | None:
        """The longest remembered conversation that `raw` starts with (every message equal)."""
        with self._lock:
            lengths = sorted(self._lengths, reverse=True)
        for length in lengths:
            last = raw[length - 1] if length <= len(raw) else None
            if not reusable(last):
                continue
            key = (length, last["role"], last["content"])  # type: ignore[index]
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries.move_to_end(key)
            if entry is not None and raw[:length] == entry.raw:
                return entry
        return None

    def remember(self, framing: Framing, prefix_ids: list[int]) -> None:
        """Keep a prepared conversation: its messages and the ids of its shared prefix (not copied:
        neither may change afterwards)."""
        if framing.raw is None or framing.head is None:
            return
        raw = framing.raw
        cost = framing.text_bytes + MESSAGE_BYTES * len(raw) + ID_BYTES * len(prefix_ids) + sys.getsizeof(raw)
        question_turn = (framing.frame.turn_open, framing.frame.turn_close)
        entry = _Entry(raw, framing.head, framing.tail, prefix_ids, question_turn, framing.text_bytes, cost)
        key = (len(raw), raw[-1]["role"], raw[-1]["content"])
        with self._lock:
            if cost > self.capacity_bytes or key in self._entries:
                return
            while self.bytes + cost > self.capacity_bytes:
                self._drop(next(iter(self._entries)))
            self._entries[key] = entry
            self._lengths[len(raw)] += 1
            self.bytes += cost

    def _drop(self, key: tuple[int, str, str]) -> None:
        entry = self._entries.pop(key)
        self.bytes -= entry.cost
        self._lengths[key[0]] -= 1
        if not self._lengths[key[0]]:
            del self._lengths[key[0]]
