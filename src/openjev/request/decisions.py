"""OpenAI's Decisions API request (`decision_schema.py`) translated onto the Jev request that `/v1/systemone`
answers: one pipeline for both.

`translate` turns a request into a `SystemOneRequest`
plus what it takes to answer in OpenAI's shape and to name OpenAI's fields in errors:
- `input`: a string is the state as it is. Items become chat messages: user, system and assistant
  messages keep their role, a developer message is a system turn; text parts are joined by newlines,
  an `input_json` part is its JSON on one line (as a JSON state is shown), a refusal part its text.
  Consecutive `function_call` / `custom_tool_call` items become one assistant turn's `tool_calls`
  (after the assistant text right before them, if any), with the arguments as sent (a custom tool's
  free-text input as a JSON string); each `*_output` is a `tool` turn naming its call, which must
  come earlier in the input and be of the same kind (a function call's output for a function call).
- An input of bare content parts (`input_text`, `input_image`, `input_json` items without a message
  around them, as typesafe-eval sends a document with its images) is one user message; bare parts
  beside messages are refused, naming the first.
- Images (`input_image` in a user message, a tool output or a question's instructions) must be data
  URLs of PNG or JPEG; each becomes an image asset whose placeholder stands where the part was, so
  the asset rules (`assets.py`: a text-only model, counts, sizes) and the image preparation are
  `/v1/systemone`'s own. A remote URL is refused: openjev fetches nothing. `detail: "low"` shows the
  image within 512x512 pixels (`images.py`); `high`, `auto` and `original` within OPENJEV_MAX_IMAGE_PIXELS.
- `questions` (a list, answered in order) become a map keyed by position (`"0"`, `"1"`, ...), never
  shown to the model. A predicate is a noul with only instructions. A choice's options are named by
  their value's text and described by their description (none: the name speaks), so the model sees what a
  `/v1/systemone` choice with the same names shows; a boolean and a string of the same text in one
  question are shown as JSON (`true` and `"true"`), so the model tells them apart, and such a value
  keeps that text before its description (`"true": Yes`). A score level is
  shown as its label, or `label: description`. Instruction parts are joined like content parts.
- Where a check of the Jev request names a field (`Issue.loc`), `Translation.openai_loc` names the
  OpenAI field it came from (e.g. `("questions", "1", "criteria")` → `questions[1].choices`).
- `input_json` data is bounded as OpenAI bounds it: 32 container levels, 10,000 values, 256 KiB of
  compact JSON; a request holds at most 128 images (`decision_limits.py`), the 129th named.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from openjev.errors import Issue, Loc, RequestRejected
from openjev.request.decision_limits import IMAGE_TYPES, JSON_MAX_BYTES, JSON_MAX_DEPTH, JSON_MAX_VALUES, MAX_IMAGES
from openjev.request.decision_schema import (
    ChoiceListQuestion,
    ChoiceOption,
    ChoiceValue,
    CustomToolCall,
    CustomToolCallOutput,
    DecisionRequest,
    FunctionCall,
    FunctionCallOutput,
    InputImage,
    InputJson,
    InputText,
    OutputText,
    PredicateQuestion,
    RefusalPart,
)
from openjev.request.schema import (
    Asset,
    ChoiceQuestion,
    FreeForm,
    NoulQuestion,
    ScoreQuestion,
    SystemOneRequest,
    render_value,
)


@dataclass(frozen=True, slots=True)
class AskedQuestion:
    """What the answer of one question needs: its name, and its choices' values or its levels' labels."""

    name: str | None
    values: tuple[ChoiceValue, ...] = ()
    #: Each choice's name in the Jev request (`choice_texts`), in the order of `values`.
    texts: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()

    def value_of(self, text: str) -> ChoiceValue:
        """The choice value the Jev request names `text`."""
        return self.values[self.texts.index(text)]


@dataclass(frozen=True, slots=True)
class Translation:
    request: SystemOneRequest
    #: One per question, in order; the Jev request's question ids are their positions.
    asked: tuple[AskedQuestion, ...]
    #: Jev locations (prefixes) and the OpenAI locations they come from.
    places: dict[Loc, Loc] = field(default_factory=dict)

    def openai_loc(self, loc: Loc) -> Loc:
        """The OpenAI field a Jev location stands for: that of its longest prefix known."""
        for length in range(len(loc), 0, -1):
            place = self.places.get(loc[:length])
            if place is not None:
                return place
        return loc

    def rejected(self, error: RequestRejected) -> RequestRejected:
        """`error` with each issue naming the OpenAI field."""
        return RequestRejected([Issue(self.openai_loc(i.loc), i.msg, i.type, i.ctx) for i in error.issues])


def _refused(loc: Loc, message: str, kind: str = "value_error") -> RequestRejected:
    return RequestRejected([Issue(loc, message, kind)])


def data_url_image(url: str, loc: Loc) -> tuple[str, str]:
    """(asset format, base64 payload) of a `data:image/png;base64,...` URL; anything else is refused."""
    if url.startswith(("https://", "http://")):
        raise _refused(loc, "remote image URLs are not fetched here; send the image as a base64 data URL", "url")
    head, comma, payload = url.partition(",")
    if not url.startswith("data:") or not comma or not head.endswith(";base64"):
        raise _refused(loc, "an image must be a base64 data URL (data:image/png;base64,...)", "url")
    media_type = head[len("data:") : -len(";base64")].lower()
    if media_type not in IMAGE_TYPES:
        raise _refused(loc, f"images must be PNG or JPEG, got {media_type or 'no media type'!r}", "image_format")
    return IMAGE_TYPES[media_type], payload


def data_url_asset(url: str, loc: Loc, detail: str | None = None) -> Asset:
    """The image asset of a data URL (`data_url_image`); of its `detail`, only `low` changes how it is
    shown (`images.py`), so any other is dropped."""
    image_format, payload = data_url_image(url, loc)
    return Asset(type="image", format=image_format, data_base64=payload, detail="low" if detail == "low" else None)  # type: ignore[arg-type]


def image_key(nonce: str, index: int) -> str:
    """The placeholder of a request's `index`-th image made from another field than `assets` (`nonce`:
    fresh per request, so no text the caller sent can name it)."""
    return f"<openjev-image-{nonce}-{index}>"


def json_part_text(data: Any, loc: Loc) -> str:
    """An `input_json` part's text, within OpenAI's bounds."""
    values, deepest, stack = 0, 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        values += 1
        if isinstance(value, dict | list):
            deepest = max(deepest, depth)
            stack += [(item, depth + 1) for item in (value.values() if isinstance(value, dict) else value)]
    if deepest > JSON_MAX_DEPTH:
        raise _refused(loc, f"input_json nests {deepest} levels, over {JSON_MAX_DEPTH}", "too_deep")
    if values > JSON_MAX_VALUES:
        raise _refused(loc, f"input_json holds {values} values, over {JSON_MAX_VALUES}", "too_long")
    try:
        size = len(orjson.dumps(data))
    except orjson.JSONEncodeError:
        size = len(render_value(data).encode("utf-8", "surrogatepass"))
    if size > JSON_MAX_BYTES:
        raise _refused(loc, f"input_json is {size} bytes of compact JSON, over {JSON_MAX_BYTES}", "too_long")
    return render_value(data)


class _Translator:
    """One request's translation: images become assets, every Jev location remembers its OpenAI one."""

    def __init__(self) -> None:
        self.nonce = secrets.token_hex(8)
        self.assets: dict[str, Asset] = {}
        self.places: dict[Loc, Loc] = {}
        self.first_image: Loc | None = None

    def image(self, part: InputImage, loc: Loc) -> str:
        """The placeholder that shows `part`'s image where it stands."""
        key = image_key(self.nonce, len(self.assets))
        self.assets[key] = data_url_asset(part.image_url, (*loc, "image_url"), part.detail)
        self.places[("assets", key)] = loc
        self.first_image = self.first_image or loc
        return key

    def text(self, content: str | list[Any], loc: Loc) -> str:
        """Parts joined by newlines, as `/v1/systemone` joins a message's text parts."""
        if isinstance(content, str):
            return content
        texts = []
        for index, part in enumerate(content):
            part_loc = (*loc, index)
            if isinstance(part, InputText | OutputText):
                texts.append(part.text)
            elif isinstance(part, RefusalPart):
                texts.append(part.refusal)
            elif isinstance(part, InputJson):
                texts.append(json_part_text(part.data, (*part_loc, "data")))
            else:
                texts.append(self.image(part, part_loc))
        return "\n".join(texts)

    def messages(self, items: list[Any]) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        calls: dict[str, str] = {}  # call id -> the kind of call
        names: dict[str, str] = {}
        for index, item in enumerate(items):
            loc: Loc = ("input", index)
            if isinstance(item, FunctionCall | CustomToolCall):
                if item.call_id in calls:
                    raise _refused((*loc, "call_id"), f"call_id {item.call_id!r} names an earlier call too")
                calls[item.call_id], names[item.call_id] = item.type, item.name
                # A custom tool's input is free text: a JSON string, so the call reads as JSON like a function's.
                arguments = item.arguments if isinstance(item, FunctionCall) else orjson.dumps(item.input).decode()
                call = {"id": item.call_id, "type": "function", "function": {"name": item.name, "arguments": arguments}}
                last = messages[-1] if messages else None
                if last is None or last["role"] != "assistant":
                    last = {"role": "assistant", "content": ""}
                    messages.append(last)
                    self.places[("state", len(messages) - 1)] = loc
                tool_calls = last.setdefault("tool_calls", [])
                self.places[("state", len(messages) - 1, "tool_calls", len(tool_calls))] = loc
                tool_calls.append(call)
                continue
            if isinstance(item, FunctionCallOutput | CustomToolCallOutput):
                kind = "function_call" if isinstance(item, FunctionCallOutput) else "custom_tool_call"
                if calls.get(item.call_id) != kind:
                    raise _refused(
                        (*loc, "call_id"), f"call_id {item.call_id!r} names no earlier {kind} item of the input"
                    )
                message = {
                    "role": "tool",
                    "tool_call_id": item.call_id,
                    "name": names[item.call_id],
                    "content": self.text(item.output, (*loc, "output")),
                }
            else:
                role = "system" if item.role == "developer" else item.role
                message = {"role": role, "content": self.text(item.content, (*loc, "content"))}
            messages.append(message)
            self.places[("state", len(messages) - 1)] = loc
        return messages

    def question(self, index: int, question: Any) -> tuple[Any, AskedQuestion]:
        loc: Loc = ("questions", index)
        jev: Loc = ("questions", str(index))
        self.places[jev] = loc
        self.places[(*jev, "instructions")] = (*loc, "instructions")
        instructions = self.text(question.instructions, (*loc, "instructions"))
        if isinstance(question, PredicateQuestion):
            return NoulQuestion(type="noul", instructions=instructions), AskedQuestion(question.name)
        if isinstance(question, ChoiceListQuestion):
            self.places[(*jev, "criteria")] = (*loc, "choices")
            values = tuple(option.value for option in question.choices)
            seen: set[tuple[type, ChoiceValue]] = set()
            for position, value in enumerate(values):
                if (type(value), value) in seen:
                    raise _refused((*loc, "choices", position, "value"), f"the choice {value!r} is listed twice")
                seen.add((type(value), value))
            # Each option is named by its text, unique once duplicates are refused (`choice_texts`), so
            # OPENJEV_OPTION_KEYS shows a value's own text, never a position.
            texts = tuple(choice_texts(values))
            criteria: dict[str, FreeForm | None] = {}
            for position, (text, option, line) in enumerate(
                zip(texts, question.choices, choice_lines(question.choices), strict=True)
            ):
                self.places[(*jev, "criteria", text)] = (*loc, "choices", position)
                criteria[text] = None if option.description is None else line
            choice = ChoiceQuestion(type="choice", instructions=instructions, criteria=criteria)
            return choice, AskedQuestion(question.name, values=values, texts=texts)
        self.places[(*jev, "criteria")] = (*loc, "levels")
        for position in range(len(question.levels)):
            self.places[(*jev, "criteria", position)] = (*loc, "levels", position)
        levels = [level.label if level.description is None else f"{level.label}: {level.description}"
                  for level in question.levels]  # fmt: skip
        labels = tuple(level.label for level in question.levels)
        return ScoreQuestion(type="score", instructions=instructions, criteria=levels), AskedQuestion(
            question.name, labels=labels
        )


def _plain(value: ChoiceValue) -> str:
    return render_value(value) if isinstance(value, str) else ("true" if value else "false")


def clashing(values: Sequence[ChoiceValue]) -> list[bool]:
    """Per value: whether a boolean and a string of this question read as its text."""
    kinds: dict[str, set[type]] = {}
    for value in values:
        kinds.setdefault(_plain(value), set()).add(type(value))
    return [len(kinds[_plain(value)]) > 1 for value in values]


def choice_texts(values: Sequence[ChoiceValue]) -> list[str]:
    """How each choice value is shown: its text; a boolean and a string that read the same are
    both shown as JSON (`true`, `"true"`), so the model tells them apart, and so is the empty string
    (`""`), which has no text to show."""
    return [
        orjson.dumps(value).decode() if clash or value == "" else _plain(value)
        for value, clash in zip(values, clashing(values), strict=True)
    ]


def choice_lines(options: Sequence[ChoiceOption]) -> list[str]:
    """Each choice as the model sees it: its text (`choice_texts`), or its description; a value shown as
    JSON keeps that text before its description (`"true": Yes`), so two such values stay apart whatever
    their descriptions say."""
    values = [option.value for option in options]
    lines = []
    for option, text, clash in zip(options, choice_texts(values), clashing(values), strict=True):
        if option.description is None:
            lines.append(text)
        else:
            lines.append(f"{text}: {option.description}" if clash else option.description)
    return lines


def user_parts(translator: _Translator, items: list[Any]) -> list[dict[str, Any]] | None:
    """An input of bare content parts (no message around them) as one user message; None when it has none."""
    bare = [index for index, item in enumerate(items) if isinstance(item, InputText | InputImage | InputJson)]
    if not bare:
        return None
    if len(bare) < len(items):
        message = "content parts outside a message must make up the whole input (read as one user message)"
        raise _refused(("input", bare[0]), message, "item_type")
    translator.places[("state", 0)] = ("input",)
    return [{"role": "user", "content": translator.text(items, ("input",))}]


def translate(body: DecisionRequest) -> Translation:
    """The Jev request that answers `body`, or `RequestRejected` naming OpenAI's fields."""
    translator = _Translator()
    if isinstance(body.input, str):
        state: FreeForm = body.input
        translator.places[("state",)] = ("input",)
    else:
        if not body.input:
            raise _refused(("input",), "input must hold at least one item", "too_short")
        translator.places[("state",)] = ("input",)
        state = user_parts(translator, body.input) or translator.messages(body.input)
    questions: dict[str, Any] = {}
    asked = []
    for index, question in enumerate(body.questions):
        questions[str(index)], about = translator.question(index, question)
        asked.append(about)
    translator.places[("questions",)] = ("questions",)
    translator.places[("assets",)] = translator.first_image or ("input",)
    if len(translator.assets) > MAX_IMAGES:
        past = translator.places[("assets", list(translator.assets)[MAX_IMAGES])]
        raise _refused(past, f"at most {MAX_IMAGES} images per request, got {len(translator.assets)}", "too_long")
    request = SystemOneRequest(model=body.model, state=state, questions=questions, assets=translator.assets or None)
    return Translation(request, tuple(asked), translator.places)


# -- the response and the error envelope, as the SDK parses them ------------------------------------
