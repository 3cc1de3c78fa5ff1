"""The wire contract of `POST /v1/systemone` and `GET /v1/models`, as the official SDK parses it.

Field names, optionality and value types follow TypeSafe's published schema (the `typesafe-sdk`
wire models). Static shape errors come from pydantic and reach the client as FastAPI's 422
`{"detail": [{"loc", "msg", "type"}]}`; limits that depend on settings are checked in
`validation.py` and reported in the same shape.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints, WrapValidator
from pydantic.json_schema import SkipJsonSchema

from openjev.examples import support_ticket
from openjev.request.score_levels import checked_level

#: A free-form value that the model reads: text, or a JSON object or array that is serialized intact.
FreeForm = str | dict[str, Any] | list[Any]


def render_value(value: FreeForm) -> str:
    """A string stays as sent; JSON objects and arrays are serialized intact on one line, non-ASCII
    kept. No indentation: with it, nested values cost tokens quadratically in their depth (a 1.9 KB
    body nested 900 deep became 31.7k tokens)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


QuestionId = Annotated[str, StringConstraints(min_length=1)]
OptionName = Annotated[str, StringConstraints(min_length=1)]


class _Question(BaseModel):
    # The SDK forwards caller extras; unknown keys are ignored rather than rejected.
    model_config = ConfigDict(extra="ignore")

    x_task: str | None = Field(
        None, description="openjev: a task's id (`POST /v1/tasks`): its worked examples and calibration apply."
    )


class NoulCriteria(BaseModel):
    model_config = ConfigDict(extra="forbid")

    true: FreeForm | None = Field(None, description="What counts as a yes answer.")
    false: FreeForm | None = Field(None, description="What counts as a no answer.")


class NoulQuestion(_Question):
    type: Literal["noul"]
    instructions: FreeForm | None = Field(None, description="The yes/no question or statement to evaluate.")
    criteria: NoulCriteria | None = Field(None, description="What counts as yes and as no; either side optional.")


class ChoiceQuestion(_Question):
    type: Literal["choice"]
    instructions: FreeForm | None = Field(None, description="What to decide when choosing an option.")
    criteria: dict[OptionName, FreeForm | None] = Field(
        ..., description="Option names and when each applies; a null description lets the name speak."
    )


#: A score level: a description, or a `{label, description}` object (`score_levels.py`).
ScoreLevel = Annotated[FreeForm, WrapValidator(checked_level)]


class ScoreQuestion(_Question):
    type: Literal["score"]
    instructions: FreeForm | None = Field(None, description="What to rate.")
    criteria: list[ScoreLevel] = Field(
        ...,
        description="Level descriptions, low to high; level i scores i. A `{label, description}` object is "
        "read as `label: description`.",
    )


class BoxQuestion(_Question):
    """Where in the request's one image: a vision model only (else a 422 naming the question)."""

    type: Literal["box"]
    instructions: FreeForm | None = Field(None, description="What to locate in the image.")
    #: Not a field: a box has no criteria, and code that walks every question's criteria reads None.
    criteria: ClassVar[None] = None


Question = Annotated[NoulQuestion | ChoiceQuestion | ScoreQuestion | BoxQuestion, Field(discriminator="type")]


AssetKey = Annotated[str, StringConstraints(min_length=1)]


class Asset(BaseModel):
    """An image: its bytes as `data_base64` (JSON body), or the multipart `part` that holds them."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["image"]
    format: Literal["png", "jpg", "jpeg"] | None = Field(
        None, description="Required with data_base64; the actual format is detected from the bytes."
    )
    data_base64: str | None = Field(None, description="The image file's bytes, base64-encoded.")
    part: str | None = Field(
        None, description="In a multipart request, the name of the part holding the image; data_base64 is ignored."
    )
    # Extension, kept out of the official schema: `low` shows the image within 512x512 pixels (the detail of
    # an `images` item or an OpenAI `input_image`); else within OPENJEV_MAX_IMAGE_PIXELS.
    detail: SkipJsonSchema[Literal["auto", "low", "high"] | None] = None


class ImageURL(BaseModel):
    """An image as the chat APIs write one: its URL (a base64 data URL here), and how closely to look."""

    model_config = ConfigDict(extra="ignore")

    url: str = Field(..., description="data:image/png;base64,... or data:image/jpeg;base64,...")
    detail: Literal["auto", "low", "high"] | None = Field(
        None, description="`low` shows the image within 512x512 pixels; else within OPENJEV_MAX_IMAGE_PIXELS."
    )


class SystemOneRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra={"examples": [support_ticket()]})

    model: str = Field(..., description="`jev-latest`, the served model name, or a configured alias.")
    state: FreeForm = Field(..., description="The content every question refers to: text, JSON, or chat messages.")
    questions: dict[QuestionId, Question] = Field(
        ..., min_length=1, description="Questions keyed by a name you choose; answers use the same names."
    )
    assets: dict[AssetKey, Asset] | None = Field(
        None,
        description="Images keyed by a placeholder; wherever a string of the state, of a question's instructions "
        "or of its criteria holds the placeholder, the model sees the image there. A vision model only: a "
        "text-only deployment refuses them (422 naming `assets`).",
    )
    images: list[str | ImageURL] | None = Field(
        None,
        description="Extension (SGLang's and Ollama's `/v1/systemone`): images shown before the state, in order, "
        'each a base64 data URL, bare base64, or `{"url", "detail"}`; image assets in every other way '
        "(a vision model only; a refusal names `images[i]`).",
    )
    x_diagnostics: StrictBool = Field(
        False,
        description="openjev: each noul, choice and score answer carries `diagnostics: {label_mass, "
        "argmax_is_label}`, how much of the next-token probability its labels held (vLLM's shape).",
    )


class Diagnostics(BaseModel):
    label_mass: float = Field(..., ge=0, le=1, description="Next-token probability the labels held, summed.")
    argmax_is_label: bool | None = Field(
        ..., description="Whether the most probable next token is a label; null where the backend does not say."
    )


class NoulAnswer(BaseModel):
    type: Literal["noul"] = "noul"
    noul: float = Field(..., ge=0, le=1, description="Probability of yes.")
    diagnostics: Diagnostics | None = Field(None, description="Only when the request sets `x_diagnostics`.")


class ChoiceAnswer(BaseModel):
    type: Literal["choice"] = "choice"
    choice: str = Field(..., description="The most probable option (ties: first in request order).")
    probabilities: dict[str, float] = Field(..., description="Probability of each option; sums to 1.")
    confidence: float = Field(..., ge=0, le=1)
    diagnostics: Diagnostics | None = Field(None, description="Only when the request sets `x_diagnostics`.")


class ScoreAnswer(BaseModel):
    type: Literal["score"] = "score"
    score: float = Field(..., description="Expected level: sum of i * p_i.")
    legend: dict[str, FreeForm] = Field(..., description="Level index to the request's level description.")
    probabilities: dict[str, float] = Field(..., description="Probability of each level; sums to 1.")
    confidence: float = Field(..., ge=0, le=1)
    diagnostics: Diagnostics | None = Field(None, description="Only when the request sets `x_diagnostics`.")


class BoxCoordinates(BaseModel):
    top: float = Field(..., ge=0, le=1, description="Top edge, as a fraction of the image height from the top.")
    bottom: float = Field(..., ge=0, le=1, description="Bottom edge, as a fraction of the image height from the top.")
    left: float = Field(..., ge=0, le=1, description="Left edge, as a fraction of the image width from the left.")
    right: float = Field(..., ge=0, le=1, description="Right edge, as a fraction of the image width from the left.")


class BoxAnswer(BaseModel):
    type: Literal["box"] = "box"
    box: BoxCoordinates = Field(..., description="Each edge is the expected value of its predicted position.")
    confidence: float | None = Field(
        ..., ge=0, le=1, description="From the spread of the edges' distributions; null when the backend gives none."
    )


Answer = Annotated[NoulAnswer | ChoiceAnswer | ScoreAnswer | BoxAnswer, Field(discriminator="type")]


class Usage(BaseModel):
    input_tokens: int = Field(..., description="What the caller sent, counted once: the input and each question.")
    output_tokens: int = Field(..., description="One per question, plus every id a generation wrote (boxes, thinking).")


class SystemOneResponse(BaseModel):
    model: str
    answers: dict[str, Answer]
    usage: Usage


class ErrorDetail(BaseModel):
    error_type: str = Field(..., examples=["overloaded"])
    message: str = Field(..., examples=["Too many evaluations in progress; retry shortly."])


class ErrorResponse(BaseModel):
    """Every non-validation error: `{"detail": {"error_type", "message"}}`."""

    detail: ErrorDetail


def error_body(error_type: str, message: str) -> dict[str, Any]:
    """The `ErrorResponse` body, ready to serialize."""
    return {"detail": {"error_type": error_type, "message": message}}


class ValidationIssue(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ValidationErrorResponse(BaseModel):
    detail: list[ValidationIssue]


class ModelMetadata(BaseModel):
    name: str
    description: str
    release_date: str = Field(..., description="YYYY-MM-DD")
    x_images: bool | None = Field(
        None, description="Whether this model takes image `assets` (null until the backend is ready)."
    )


class OpenAIModel(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "openjev"
    output_modalities: list[str] = Field(["decisions"], description="What the model answers: decisions.")


class ModelList(BaseModel):
    models: list[ModelMetadata]
    object: Literal["list"] = "list"
    data: list[OpenAIModel]
