"""OpenAI's Decisions API on the wire (`POST /v1/decisions`, the `openai` 3.63.0 SDK's types): the request
and the answer, and OpenAI's error envelope.

The models follow `openai/types/decision_create_params.py` and `decision.py` field by field; every
field the SDK sends is accepted and any other is refused, never ignored: a field OpenAI's generation
endpoints take and this one cannot honour (`UNSUPPORTED`: `temperature`, `stream`, `tools`, ...) is a
pydantic error of type `unsupported_parameter` at that field, any other unknown field (a Jev-style
`criteria` on a predicate, an `images` list) an `extra_forbidden` one, which `api/openai_errors.py`
writes as OpenAI's `unknown_parameter`. OpenAI's counts are enforced here, each message in the words
clients look for: 1 to 200 questions, 2 to 255 options per choice, 2 to 10 levels per score (128
images per request: `decisions.py`). `decisions.py` translates a request onto the Jev request that
`/v1/systemone` answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictStr,
    Tag,
    ValidationInfo,
    field_validator,
)
from pydantic.json_schema import SkipJsonSchema

from openjev.request.decision_limits import (
    MAX_CHOICES,
    MAX_LEVELS,
    MAX_QUESTIONS,
    MIN_CHOICES,
    MIN_LEVELS,
    UNSUPPORTED,
    counted,
    refused_if_set,
)

#: The model name OpenAI's SDK documents; accepted (with OPENJEV_OPENAI_MODEL_ALIASES) for the served model.
OPENAI_MODEL = "gpt-6-luna"


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


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


class _Message(_Wire):
    """An input message; each role has its own content parts."""

    type: Literal["message"] = "message"


class UserMessage(_Message):
    role: Literal["user"]
    content: _text_or_list(InputPart)  # type: ignore[valid-type]


class DeveloperMessage(_Message):
    role: Literal["developer"]
    content: _text_or_list(TextPart)  # type: ignore[valid-type]


class SystemMessage(_Message):
    role: Literal["system"]
    content: _text_or_list(TextPart)  # type: ignore[valid-type]


class AssistantMessage(_Message):
    role: Literal["assistant"]
    content: _text_or_list(AssistantPart)  # type: ignore[valid-type]
    phase: Literal["commentary", "final_answer"] | None = None


Status = Literal["in_progress", "completed", "incomplete"]


class _ToolCall(_Wire):
    """What a function call and a custom tool call share; each adds its `type` and its payload."""

    call_id: str
    name: str
    id: str | None = None
    namespace: str | None = None
    status: Status | None = None


class _ToolCallOutput(_Wire):
    """A tool call's result, tied to its call by `call_id`; each kind adds its `type`."""

    call_id: str
    output: _text_or_list(ToolOutputPart)  # type: ignore[valid-type]
    id: str | None = None
    status: Status | None = None


class FunctionCall(_ToolCall):
    type: Literal["function_call"]
    arguments: str


class FunctionCallOutput(_ToolCallOutput):
    type: Literal["function_call_output"]


class CustomToolCall(_ToolCall):
    type: Literal["custom_tool_call"]
    input: str


class CustomToolCallOutput(_ToolCallOutput):
    type: Literal["custom_tool_call_output"]


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
        # Bare content parts: an input of only these is one user message (`decisions.py`). Read, not
        # documented: OpenAI's schema has none, and the published one stays OpenAI's.
        "input_text": SkipJsonSchema[InputText],
        "input_image": SkipJsonSchema[InputImage],
        "input_json": SkipJsonSchema[InputJson],
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
    #: OpenAI's 2 to 255 (the Jev contract takes 1); OPENJEV_MAX_CHOICE_OPTIONS may lower the most.
    choices: list[ChoiceOption] = Field(..., json_schema_extra={"minItems": MIN_CHOICES, "maxItems": MAX_CHOICES})
    name: str | None = None

    @field_validator("choices")
    @classmethod
    def _options_per_choice(cls, choices: list[ChoiceOption]) -> list[ChoiceOption]:
        return counted(choices, MIN_CHOICES, MAX_CHOICES, "options per choice")


class ScoreLevelsQuestion(_Wire):
    """Rate the input against ordered levels, low to high."""

    type: Literal["score"]
    instructions: Instructions  # type: ignore[valid-type]
    levels: list[ScoreLevel] = Field(..., json_schema_extra={"minItems": MIN_LEVELS, "maxItems": MAX_LEVELS})
    name: str | None = None

    @field_validator("levels")
    @classmethod
    def _levels_per_score(cls, levels: list[ScoreLevel]) -> list[ScoreLevel]:
        return counted(levels, MIN_LEVELS, MAX_LEVELS, "levels per score")


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
        ...,
        json_schema_extra={"minItems": 1, "maxItems": MAX_QUESTIONS},
        description="Predicate, choice or score questions, answered in order.",
    )
    prompt_cache_key: str | None = Field(
        None, description="Names the conversation: requests with the same key are served from the same cache."
    )
    prompt_cache_options: PromptCacheOptions | None = Field(None, description="Accepted; openjev caches prefixes.")
    safety_identifier: str | None = Field(None, max_length=128, description="Accepted and not stored.")
    x_diagnostics: StrictBool = Field(
        False,
        description="openjev: each answer carries `diagnostics: {label_mass, argmax_is_label}`, how much of the "
        "next-token probability its labels held (vLLM's shape).",
    )
    # Declared only to refuse them by name (`UNSUPPORTED`), and hidden from the schema.
    temperature: SkipJsonSchema[Any] = None
    top_p: SkipJsonSchema[Any] = None
    stream: SkipJsonSchema[Any] = None
    tools: SkipJsonSchema[Any] = None
    tool_choice: SkipJsonSchema[Any] = None
    max_output_tokens: SkipJsonSchema[Any] = None
    reasoning: SkipJsonSchema[Any] = None

    @field_validator("questions")
    @classmethod
    def _questions_per_request(cls, questions: list[Any]) -> list[Any]:
        return counted(questions, 1, MAX_QUESTIONS, "questions per request")

    @field_validator(*UNSUPPORTED)
    @classmethod
    def _unsupported(cls, value: Any, info: ValidationInfo) -> Any:
        return refused_if_set(value, str(info.field_name))


#: The value a choice answer names, in the caller's type.
ChoiceValue = str | bool
