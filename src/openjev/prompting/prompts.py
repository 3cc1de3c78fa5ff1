"""From a Jev request to prompt text: the shared conversation prefix and one suffix per question.

Contract:
- A state that is a list of chat messages, or exactly `{"messages": [...]}`, renders as those turns
  with the model's own chat template (roles and extra keys kept, text content only: an image content
  part is shown by `image_marks.py` or refused; a null `name`, `tool_call_id`, `tool_calls` or
  `reasoning_content` is absent). Any other state is serialized intact (JSON, non-ASCII kept) into
  one user turn.
- Each question is one more user turn holding its text (`question_texts.py`): its instructions and its
  options as `A: description` (a null description shows the option's name; OPENJEV_OPTION_KEYS: `A: name
  - description`), followed by the assistant header with thinking off and the answer cue
  (`question_texts.ANSWER_CUES`, `OPENJEV_ANSWER_CUE`): `Answer:` and a newline (`plain`), or the opening
  of a JSON answer, `{"answer": "` (`json`). The label is read as the very next token.
- A choice question may be shown with its options cyclically rotated (`offset`: position j shows
  option (j + offset) mod n, lettered by position), one rotation per readout; `answers.py` maps the
  letters back to the options. Question ids and option names never
  reach the model, so renaming, adding or reordering questions cannot change any other question's
  prompt.
- The conversation is rendered once, with a placeholder in place of the question. Everything before the
  question turn's opening special token is the shared prefix; the question text is spliced between
  the turn opening and the turn close. Splitting at a special token keeps tokenization stable:
  `encode(prefix) + encode(suffix) == encode(prefix + suffix)`.
- Caller text that spells one of the model's added tokens (special or not) stays text: such strings, in
  any field of any message (content, reasoning_content, tool calls' names and arguments, nested keys
  and values) and in question texts, become quoted segments (see `ChatTokenizer.encode_segments`).
  Those strings are rendered through placeholders, so the template sees the placeholder, not the
  forged markup; a placeholder the template wrote inside JSON gets the string JSON-escaped, as the
  template would have written it.
"""

from __future__ import annotations

import itertools
import json
import operator
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from openjev.affinity import common_prefix_length
from openjev.errors import Issue, Loc, RequestRejected
from openjev.prompting.question_texts import ANSWER_CUE
from openjev.prompting.tokenizer import ChatTokenizer, Segment
from openjev.request.schema import FreeForm, render_value

CHAT_ROLES = frozenset({"system", "user", "assistant", "tool"})
#: Content part types that stand for an image; one holding an asset's placeholder shows that image
#: (`image_marks.py`), any other is refused.
IMAGE_PART_TYPES = frozenset({"image", "image_url", "input_image"})


def _refuse(loc: Loc, message: str) -> RequestRejected:
    """A part of the request that cannot be shown to the model."""
    return RequestRejected([Issue(loc, message)])


def _looks_like_chat(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    if set(map(type, value)) == {dict}:  # the common case, in C: a chat of 1,100 messages in 30 µs
        return all(map(operator.contains, value, itertools.repeat("role")))
    return all(isinstance(item, Mapping) and "role" in item for item in value)


def _message_text(content: Any, loc: Loc) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for index, part in enumerate(content):
            part_type = part.get("type") if isinstance(part, Mapping) else None
            if part_type == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif part_type is not None and part_type != "text":
                raise _refuse(
                    (*loc, index, "type"),
                    f"content part type {part_type!r} is not supported: a part is text, or an image part "
                    f"({', '.join(sorted(IMAGE_PART_TYPES))}) that holds the placeholder of one of the request's "
                    "image assets (a vision model only)",
                )
            else:
                raise _refuse((*loc, index), "a content part must be {'type': 'text', 'text': str}")
        return "\n".join(texts)
    raise _refuse(loc, "message content must be a string, a list of text parts, or null")


def chat_messages(state: FreeForm) -> tuple[list[Any], Loc] | None:
    """The state's chat messages as sent, and where they are; None when the state is not a chat."""
    if _looks_like_chat(state):
        return state, ("state",)  # type: ignore[return-value]
    if isinstance(state, Mapping) and set(state) == {"messages"} and _looks_like_chat(state["messages"]):
        return state["messages"], ("state", "messages")
    return None


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_object(value: Any) -> bool:
    return isinstance(value, Mapping)


#: The message fields the chat templates read beside `role` and `content`, each with the check its
#: value must pass and what it must be; any other key is passed to the template as sent. A null one
#: is absent (as OpenAI-style chat logs write them): it does not reach the template.
_MESSAGE_FIELDS: dict[str, tuple[Any, str]] = {
    "name": (_is_text, "a string or null"),
    "tool_call_id": (_is_text, "a string or null"),
    "reasoning_content": (_is_text, "a string or null"),
    "tool_calls": (lambda value: isinstance(value, list), "a list of tool calls or null"),
}
_FUNCTION_FIELDS: dict[str, tuple[Any, str]] = {
    "name": (_is_text, "a string"),
    "arguments": (lambda value: value is None or _is_text(value) or _is_object(value), "a string, an object or null"),
}


def _check_fields(
    value: Mapping[str, Any], fields: Mapping[str, tuple[Any, str]], loc: Loc, *, nullable: bool = False
) -> None:
    """Each of `fields` that `value` holds passes its check (`nullable`: or is null)."""
    for key, (valid, expected) in fields.items():
        if key in value and not valid(value[key]) and not (nullable and value[key] is None):
            raise _refuse((*loc, key), f"{key} must be {expected}, got {type(value[key]).__name__}")


def _check_tool_calls(calls: list[Any], loc: Loc) -> None:
    """Each tool call is an object; its `function` (or the call itself, as templates also take, when
    `function` is absent or null) holds a string `name` and `arguments`: a string, an object or null
    (the templates print both, and cannot print what is missing)."""
    for index, call in enumerate(calls):
        if not _is_object(call):
            raise _refuse((*loc, index), "a tool call must be an object")
        _check_fields(call, {"id": (_is_text, "a string"), "type": (_is_text, "a string")}, (*loc, index))
        nested = call.get("function") is not None
        function = call["function"] if nested else call
        where = (*loc, index, *(("function",) if nested else ()))
        if not _is_object(function):
            raise _refuse(where, "function must be an object")
        if "name" not in function and nested:
            raise _refuse((*where, "name"), "a tool call's function needs its name (a string)")
        if "name" not in function:
            raise _refuse((*where, "function"), "a tool call needs its function: an object with a name and arguments")
        _check_fields(function, _FUNCTION_FIELDS, where)
        if "arguments" not in function:
            message = "a tool call's function needs its arguments (a string, an object or null)"
            raise _refuse((*where, "arguments"), message)


def normalize_messages(raw: Sequence[Any], messages_loc: Loc, start: int = 0) -> list[dict[str, Any]]:
    """Chat messages as turns the template takes (`raw[i]` is message `start + i` at `messages_loc`);
    a field the templates read that has the wrong type is refused, naming it."""
    messages = []
    for index, message in enumerate(raw, start):
        loc = (*messages_loc, index)
        role = message.get("role")
        if not isinstance(role, str) or role not in CHAT_ROLES:
            shown = role if isinstance(role, str) else type(role).__name__
            raise _refuse((*loc, "role"), f"role must be one of {', '.join(sorted(CHAT_ROLES))}, got {shown!r}")
        _check_fields(message, _MESSAGE_FIELDS, loc, nullable=True)
        if message.get("tool_calls") is not None:
            _check_tool_calls(message["tool_calls"], (*loc, "tool_calls"))
        turn = {key: value for key, value in message.items() if value is not None or key not in _MESSAGE_FIELDS}
        turn["content"] = _message_text(message.get("content"), (*loc, "content"))
        messages.append(turn)
    return messages


def sent_messages(state: FreeForm) -> tuple[list[Any], Loc]:
    """The state's messages as sent, and where they are: a chat's own, or the one user turn that any
    other state is shown as."""
    return chat_messages(state) or ([{"role": "user", "content": render_value(state)}], ("state",))


def state_messages(state: FreeForm) -> list[dict[str, Any]]:
    """The state as chat turns."""
    return normalize_messages(*sent_messages(state))


@dataclass(frozen=True, slots=True)
class ConversationFrame:
    """The rendered conversation around a question: `shared_prefix + turn_open + Q + turn_close`."""

    shared_prefix_segments: tuple[Segment, ...]
    turn_open: str
    turn_close: str

    @property
    def shared_prefix(self) -> str:
        return "".join(text for text, _ in self.shared_prefix_segments)

    def question_suffix(self, question_text: str) -> str:
        return self.turn_open + question_text + self.turn_close

    def with_cue(self, cue: str) -> ConversationFrame:
        """This frame with `cue` appended to its question turn (for a frame rendered with no cue)."""
        return ConversationFrame(self.shared_prefix_segments, self.turn_open, self.turn_close + cue)

    def question_suffix_segments(self, question_text: str, quoted: bool) -> tuple[Segment, ...]:
        """The question turn; `quoted` when the text spells a special token that must stay text."""
        return ((self.turn_open, False), (question_text, quoted), (self.turn_close, False))


#: A quote placeholder ends in a tab, which JSON writes as `\t`: the rendered text then tells a string
#: the template printed as it is from one it printed inside JSON (`tojson` of tool-call arguments).
_QUOTE_PLACEHOLDER = re.compile(r"\[openjev-quote-([0-9a-f]{16})-(\d+)(\t|\\t)\]")


@dataclass(frozen=True, slots=True)
class _Markers:
    """Placeholders for the question and for quoted strings, spelled with a random nonce. Every
    occurrence of the nonce in the rendered text must be one of these placeholders, so caller text
    that happens to contain it is detected and the rendering redone with a new nonce; a placeholder
    with another nonce is caller text like any other."""

    nonce: str = field(default_factory=lambda: secrets.token_hex(8))

    @property
    def question(self) -> str:
        return f"[openjev-question-{self.nonce}]"

    def quote(self, index: int) -> str:
        return f"[openjev-quote-{self.nonce}-{index}\t]"

    def placeholders(self, text: str) -> list[re.Match[str]]:
        return [match for match in _QUOTE_PLACEHOLDER.finditer(text) if match[1] == self.nonce]

    def quoted_segments(self, text: str, quoted: Sequence[str]) -> tuple[Segment, ...]:
        """Split rendered text at the placeholders of quoted strings, putting back each string as the
        template showed it: as sent, or written as the inside of a JSON string."""
        segments: list[Segment] = []
        position = 0
        for match in self.placeholders(text):
            original = quoted[int(match[2])]
            shown = original if match[3] == "\t" else json.dumps(original, ensure_ascii=False)[1:-1]
            segments += [(text[position : match.start()], False), (shown, True)]
            position = match.end()
        segments.append((text[position:], False))
        return tuple(segment for segment in segments if segment[0])


def _quote_strings(chat: ChatTokenizer, value: Any, markers: _Markers, quoted: list[str]) -> Any:
    """`value` with every string in it (object keys too, at any depth) that spells an added token
    replaced by a quote placeholder; the strings replaced are appended to `quoted`."""
    if isinstance(value, str):
        if not chat.spells_added_token(value):
            return value
        quoted.append(value)
        return markers.quote(len(quoted) - 1)
    if isinstance(value, Mapping):
        return {
            _quote_strings(chat, key, markers, quoted): _quote_strings(chat, item, markers, quoted)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_quote_strings(chat, item, markers, quoted) for item in value]
    return value


def _quoted_message(chat: ChatTokenizer, message: Mapping[str, Any], markers: _Markers, quoted: list[str]) -> Any:
    """A message whose every field the template can render is caller text: its role is one of
    `CHAT_ROLES` already; its own keys are what the template looks up, so they stay."""
    if len(message) == 2 and isinstance(message.get("content"), str):  # the common shape, quickly
        content = message["content"]
        if not chat.spells_added_token(content):
            return message
        quoted.append(content)
        return {**message, "content": markers.quote(len(quoted) - 1)}
    return {
        key: item if key == "role" else _quote_strings(chat, item, markers, quoted) for key, item in message.items()
    }


def _render_with_markers(
    chat: ChatTokenizer, messages: Sequence[Mapping[str, Any]], thinking: bool = False
) -> tuple[str, _Markers, list[str]]:
    """The conversation plus a placeholder question, rendered; strings that spell added tokens, in any
    field of any message, are replaced by quote placeholders (returned in order)."""
    while True:
        markers, quoted = _Markers(), []
        turns = [_quoted_message(chat, message, markers, quoted) for message in messages]
        question = {"role": "user", "content": markers.question}
        rendered = chat.render([*turns, question], add_generation_prompt=True, thinking=thinking)
        if rendered.count(markers.nonce) == 1 + len(markers.placeholders(rendered)):
            return rendered, markers, quoted


def last_occurrence(text: str, tokens: Sequence[str], window: int = 256) -> int:
    """Where the last occurrence of any of `tokens` in `text` starts (-1: none), as
    `max(text.rfind(token) for token in tokens)`. The question turn opens near the end, so the search
    looks at a tail of `window` characters first, growing it fourfold until something is found: an
    occurrence that starts in the tail lies wholly in it, and any that starts before is earlier. A
    long state is then not scanned once per special token."""
    while True:
        start = max(0, len(text) - window)
        found = max((text.rfind(token, start) for token in tokens), default=-1)
        if found >= 0 or start == 0:
            return found
        window *= 4


def frame_conversation(
    chat: ChatTokenizer, messages: Sequence[Mapping[str, Any]], cue: str = ANSWER_CUE, thinking: bool = False
) -> ConversationFrame:
    """Render the conversation once with a placeholder question and cut it around the placeholder;
    `cue` ends the question turn, right where the label is read. `thinking` renders the template's
    thinking mode (the thinking tier's call 1)."""
    rendered, markers, quoted = _render_with_markers(chat, messages, thinking)
    start = rendered.find(markers.question)
    if start < 0 or rendered.find(markers.question, start + 1) >= 0:
        raise ValueError("the chat template does not show the user's message exactly once")
    before, after = rendered[:start], rendered[start + len(markers.question) :]
    split = last_occurrence(before, chat.special_tokens)
    if split < 0:
        split = start
    return ConversationFrame(markers.quoted_segments(before[:split], quoted), before[split:], after + cue)


def template_header_length(chat: ChatTokenizer) -> int:
    """Tokens every shared prefix starts with (the template's, before the state): the affinity key
    starts after them."""
    frames = (frame_conversation(chat, [{"role": "user", "content": text}]) for text in "ab")
    first, second = (chat.encode_segments(frame.shared_prefix_segments) for frame in frames)
    return common_prefix_length(first, second)
