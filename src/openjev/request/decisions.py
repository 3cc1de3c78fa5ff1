"""OpenAI's Decisions API request (`POST /v1/decisions`, the `openai` 3.57.0 SDK's types), and its
translation onto the Jev request that `/v1/systemone` answers: one pipeline for both.

The wire models follow `openai/types/decision_create_params.py` field by field (unknown fields are
ignored, as the SDK forwards caller extras). `translate` turns a request into a `SystemOneRequest`
plus what it takes to answer in OpenAI's shape and to name OpenAI's fields in errors:
- `input`: a string is the state as it is. Items become chat messages: user, system and assistant
  messages keep their role, a developer message is a system turn; text parts are joined by newlines,
  an `input_json` part is its JSON on one line (as a JSON state is shown), a refusal part its text.
  Consecutive `function_call` / `custom_tool_call` items become one assistant turn's `tool_calls`
  (after the assistant text right before them, if any), with the arguments as sent (a custom tool's
  free-text input as a JSON string); each `*_output` is a `tool` turn naming its call, which must
  come earlier in the input and be of the same kind (a function call's output for a function call).
- Images (`input_image` in a user message, a tool output or a question's instructions) must be data
  URLs of PNG or JPEG; each becomes an image asset whose placeholder stands where the part was, so
  the asset rules (`assets.py`: a text-only model, counts, sizes) and the image preparation are
  `/v1/systemone`'s own. A remote URL is refused: openjev fetches nothing.
- `questions` (a list, answered in order) become a map keyed by position (`"0"`, `"1"`, ...), never
  shown to the model. A predicate is a noul with only instructions. A choice's options are keyed by
  position and described by their value's text (or their description), so the model sees what a
  `/v1/systemone` choice with the same names shows; a boolean and a string of the same text in one
  question are shown as JSON (`true` and `"true"`), so the model tells them apart. A score level is
  shown as its label, or `label: description`. Instruction parts are joined like content parts.
- Where a check of the Jev request names a field (`Issue.loc`), `Translation.openai_loc` names the
  OpenAI field it came from (e.g. `("questions", "1", "criteria")` → `questions[1].choices`).
- `input_json` data is bounded as OpenAI bounds it: 32 container levels, 10,000 values, 256 KiB of
  compact JSON.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Discriminator, Field, StrictBool, StrictStr, Tag

from openjev.errors import Issue, Loc, RequestRejected
from openjev.prompting.prompts import render_value
from openjev.request.schema import (
    Asset,
    ChoiceQuestion,
    FreeForm,
    NoulQuestion,
    ScoreQuestion,
    SystemOneRequest,
)

#: The model name OpenAI's SDK documents; accepted (with OPENJEV_OPENAI_MODEL_ALIASES) for the served model.
OPENAI_MODEL = "gpt-6-luna"
#: OpenAI's bounds on one `input_json` part.
JSON_MAX_DEPTH = 32
JSON_MAX_VALUES = 10_000
JSON_MAX_BYTES = 256 * 1024
#: The media types a data URL may carry, and the asset format each is.
IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg"}


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")


def _string_or_parts(value: Any) -> str | None:
    if isinstance(value, str):
        return "string"
    return "parts" if isinstance(value, list) else None


def _text_or_list(part: Any) -> Any:
    """A field that is a string or an ordered list of `part`s (tagged `string` / `parts` in error locations)."""
    return Annotated[
        Annotated[str, Tag("string")] | Annotated[list[part], Tag("parts")],  # type: ignore[valid-type]
        Discriminator(
            _string_or_parts,
            custom_error_type="string_or_list",
            custom_error_message="must be a string or a list of parts",
        ),
    ]


def _tag(kinds: Sequence[str], role: bool = False) -> Callable[[Any], str | None]:
    def tag(value: Any) -> str | None:
        if not isinstance(value, dict):
            return None
        kind = value.get("type", "message" if role else None)
        if role and kind == "message":
            kind = value.get("role")
        return kind if kind in kinds else None

    return tag


def _tagged(members: dict[str, type], role: bool = False) -> Any:
    union = None
    for name, member in members.items():
        tagged = Annotated[member, Tag(name)]
        union = tagged if union is None else union | tagged  # type: ignore[operator]
    return Annotated[
        union,
        Discriminator(
            _tag(list(members), role),
            custom_error_type="item_type",
            custom_error_message=f"must be an object whose type is one of: {', '.join(members)}",
        ),
    ]


class CacheBreakpoint(_Wire):
    mode: Literal["explicit"]


class InputText(_Wire):
    type: Literal["input_text"]
    text: str
    prompt_cache_breakpoint: CacheBreakpoint | None = None


class InputImage(_Wire):
    """A base64 data URL (PNG or JPEG); a remote URL is refused, not fetched."""

    type: Literal["input_image"]
    image_url: str
    detail: Literal["low", "high", "auto", "original"] | None = None
    prompt_cache_breakpoint: CacheBreakpoint | None = None


class InputJson(_Wire):
    """A JSON object or an array of objects, shown as compact JSON text."""

    type: Literal["input_json"]
    data: dict[str, Any] | list[dict[str, Any]]


class OutputText(_Wire):
    type: Literal["output_text"]
    text: str


class RefusalPart(_Wire):
    type: Literal["refusal"]
    refusal: str


InputPart = _tagged({"input_text": InputText, "input_image": InputImage, "input_json": InputJson})
TextPart = _tagged({"input_text": InputText})
ToolOutputPart = _tagged({"input_text": InputText, "input_image": InputImage})
AssistantPart = _tagged({"output_text": OutputText, "refusal": RefusalPart})


class UserMessage(_Wire):
    type: Literal["message"] = "message"
    role: Literal["user"]
    content: _text_or_list(InputPart)  # type: ignore[valid-type]


class DeveloperMessage(_Wire):
    type: Literal["message"] = "message"
    role: Literal["developer"]
    content: _text_or_list(TextPart)  # type: ignore[valid-type]


class SystemMessage(_Wire):
    type: Literal["message"] = "message"
    role: Literal["system"]
    content: _text_or_list(TextPart)  # type: ignore[valid-type]


class AssistantMessage(_Wire):
    type: Literal["message"] = "message"
    role: Literal["assistant"]
    content: _text_or_list(AssistantPart)  # type: ignore[valid-type]
    phase: Literal["commentary", "final_answer"] | None = None


Status = Literal["in_progress", "completed", "incomplete"]


class FunctionCall(_Wire):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    namespace: str | None = None
    status: Status | None = None


class FunctionCallOutput(_Wire):
    type: Literal["function_call_output"]
    call_id: str
    output: _text_or_list(ToolOutputPart)  # type: ignore[valid-type]
    id: str | None = None
    status: Status | None = None


class CustomToolCall(_Wire):
    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str
    id: str | None = None
    namespace: str | None = None
    status: Status | None = None


class CustomToolCallOutput(_Wire):
    type: Literal["custom_tool_call_output"]
    call_id: str
    output: _text_or_list(ToolOutputPart)  # type: ignore[valid-type]
    id: str | None = None
    status: Status | None = None


InputItem = _tagged(
    {
        "user": UserMessage,
        "developer": DeveloperMessage,
        "system": SystemMessage,
        "assistant": AssistantMessage,
        "function_call": FunctionCall,
        "function_call_output": FunctionCallOutput,
        "custom_tool_call": CustomToolCall,
        "custom_tool_call_output": CustomToolCallOutput,
    },
    role=True,
)
QuestionPart = _tagged({"input_text": InputText, "input_image": InputImage, "input_json": InputJson})
Instructions = _text_or_list(QuestionPart)


class ChoiceOption(_Wire):
    value: StrictStr | StrictBool = Field(
        ..., description="Typed: a string and a boolean with the same text are distinct."
    )
    description: str | None = None


class ScoreLevel(_Wire):
    label: str
    description: str | None = None


class PredicateQuestion(_Wire):
    """How likely a statement about the input is true."""

    type: Literal["predicate"]
    instructions: Instructions  # type: ignore[valid-type]
    name: str | None = None


class ChoiceListQuestion(_Wire):
    """Choose from the supplied options (2 to 255, each unique)."""

    type: Literal["choice"]
    instructions: Instructions  # type: ignore[valid-type]
    choices: list[ChoiceOption]
    name: str | None = None


class ScoreLevelsQuestion(_Wire):
    """Rate the input against ordered levels, low to high."""

    type: Literal["score"]
    instructions: Instructions  # type: ignore[valid-type]
    levels: list[ScoreLevel]
    name: str | None = None


DecisionQuestion = _tagged({"predicate": PredicateQuestion, "choice": ChoiceListQuestion, "score": ScoreLevelsQuestion})


class PromptCacheOptions(_Wire):
    mode: Literal["implicit", "explicit"] | None = None
    ttl: Literal["30m"] | None = None


class DecisionRequest(_Wire):
    model: str = Field(..., description=f"`{OPENAI_MODEL}`, or any name `/v1/systemone` takes.")
    input: _text_or_list(InputItem) = Field(  # type: ignore[valid-type]
        ..., description="Text, or an ordered list of messages, tool calls and tool outputs."
    )
    questions: list[DecisionQuestion] = Field(  # type: ignore[valid-type]
        ..., min_length=1, max_length=400, description="Predicate, choice or score questions, answered in order."
    )
    prompt_cache_key: str | None = Field(
        None, description="Names the conversation: requests with the same key are served from the same cache."
    )
    prompt_cache_options: PromptCacheOptions | None = Field(None, description="Accepted; openjev caches prefixes.")
    safety_identifier: str | None = Field(None, max_length=128, description="Accepted and not stored.")


# -- the translation ------------------------------------------------------------------------------

#: The value a choice answer names, in the caller's type.
ChoiceValue = str | bool


@dataclass(frozen=True, slots=True)
class AskedQuestion:
    """What the answer of one question needs: its name, and its choices' values or its levels' labels."""

    name: str | None
    values: tuple[ChoiceValue, ...] = ()
    labels: tuple[str, ...] = ()


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
        image_format, payload = data_url_image(part.image_url, (*loc, "image_url"))
        key = f"<openjev-image-{self.nonce}-{len(self.assets)}>"
        self.assets[key] = Asset(type="image", format=image_format, data_base64=payload)  # type: ignore[arg-type]
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
                self.places[(*jev, "criteria", str(position))] = (*loc, "choices", position)
            shown = choice_texts(values)
            criteria: dict[str, FreeForm | None] = {
                str(position): text if option.description is None else option.description
                for position, (option, text) in enumerate(zip(question.choices, shown, strict=True))
            }
            choice = ChoiceQuestion(type="choice", instructions=instructions, criteria=criteria)
            return choice, AskedQuestion(question.name, values=values)
        self.places[(*jev, "criteria")] = (*loc, "levels")
        for position in range(len(question.levels)):
            self.places[(*jev, "criteria", position)] = (*loc, "levels", position)
        levels = [level.label if level.description is None else f"{level.label}: {level.description}"
                  for level in question.levels]  # fmt: skip
        labels = tuple(level.label for level in question.levels)
        return ScoreQuestion(type="score", instructions=instructions, criteria=levels), AskedQuestion(
            question.name, labels=labels
        )


def choice_texts(values: Sequence[ChoiceValue]) -> list[str]:
    """How each choice value is shown: its text; a boolean and a string that read the same are
    both shown as JSON (`true`, `"true"`), so the model tells them apart."""
    texts = [render_value(value) if isinstance(value, str) else ("true" if value else "false") for value in values]
    clashing = {text for text, value in zip(texts, values, strict=True) if isinstance(value, bool)} & {
        text for text, value in zip(texts, values, strict=True) if isinstance(value, str)
    }
    pairs = zip(texts, values, strict=True)
    return [orjson.dumps(value).decode() if text in clashing else text for text, value in pairs]


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
        state = translator.messages(body.input)
    questions: dict[str, Any] = {}
    asked = []
    for index, question in enumerate(body.questions):
        questions[str(index)], about = translator.question(index, question)
        asked.append(about)
    translator.places[("questions",)] = ("questions",)
    translator.places[("assets",)] = translator.first_image or ("input",)
    request = SystemOneRequest(model=body.model, state=state, questions=questions, assets=translator.assets or None)
    return Translation(request, tuple(asked), translator.places)


# -- the response and the error envelope, as the SDK parses them ------------------------------------


class PredicateAnswer(BaseModel):
    type: Literal["predicate"] = "predicate"
    name: str | None
    probability: float = Field(..., ge=0, le=1, description="Probability that the statement is true.")


class ChoiceProbability(BaseModel):
    value: StrictStr | StrictBool
    probability: float = Field(..., ge=0, le=1)


class ChoiceListAnswer(BaseModel):
    type: Literal["choice"] = "choice"
    name: str | None
    choice: StrictStr | StrictBool = Field(..., description="The most probable value (ties: the first listed).")
    confidence: float = Field(..., ge=0, le=1)
    probabilities: list[ChoiceProbability] = Field(..., description="Every choice, in request order; sums to 1.")


class LevelProbability(BaseModel):
    value: int = Field(..., description="The level's position, low to high, from 0.")
    label: str
    probability: float = Field(..., ge=0, le=1)


class ScoreLevelsAnswer(BaseModel):
    type: Literal["score"] = "score"
    name: str | None
    score: float = Field(..., description="Expected level: sum of value * probability.")
    confidence: float = Field(..., ge=0, le=1)
    probabilities: list[LevelProbability]


class InputTokensDetails(BaseModel):
    cached_tokens: int = Field(..., description="Prompt tokens the backend reused from its cache.")
    cache_write_tokens: int = Field(0, description="Always 0: no cache write is billed.")


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int = Field(..., description="Tokens the thinking tier generated.")


class DecisionUsage(BaseModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class DecisionResponse(BaseModel):
    model: str
    answers: list[Annotated[PredicateAnswer | ChoiceListAnswer | ScoreLevelsAnswer, Field(discriminator="type")]] = (
        Field(..., description="Answers in question order; never a refusal.")
    )
    usage: DecisionUsage


class OpenAIErrorDetail(BaseModel):
    message: str
    type: str = Field(..., examples=["invalid_request_error"])
    param: str | None = Field(None, examples=["questions[0].choices"])
    code: str | None = None


class OpenAIError(BaseModel):
    """Every error of `/v1/decisions`: `{"error": {"message", "type", "param", "code"}}`."""

    error: OpenAIErrorDetail
