"""OpenAI's Decisions API answer on the wire (`openai/types/decision.py`, the `openai` 3.63.0 SDK's types),
and OpenAI's error envelope: what `/v1/decisions` returns, for the published schema and the route's
response model. `answering/decisions.py` builds the payload these describe.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StrictBool, StrictStr

from openjev.request.schema import Diagnostics


class PredicateAnswer(BaseModel):
    type: Literal["predicate"] = "predicate"
    name: str | None
    probability: float = Field(..., ge=0, le=1, description="Probability that the statement is true.")
    diagnostics: Diagnostics | None = Field(None, description="Only when the request sets `x_diagnostics`.")


class ChoiceProbability(BaseModel):
    value: StrictStr | StrictBool
    probability: float = Field(..., ge=0, le=1)


class ChoiceListAnswer(BaseModel):
    type: Literal["choice"] = "choice"
    name: str | None
    choice: StrictStr | StrictBool = Field(..., description="The most probable value (ties: the first listed).")
    confidence: float = Field(..., ge=0, le=1)
    probabilities: list[ChoiceProbability] = Field(..., description="Every choice, in request order; sums to 1.")
    diagnostics: Diagnostics | None = Field(None, description="Only when the request sets `x_diagnostics`.")


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
    diagnostics: Diagnostics | None = Field(None, description="Only when the request sets `x_diagnostics`.")


class InputTokensDetails(BaseModel):
    cached_tokens: int = Field(..., description="Of input_tokens, those the backend held from earlier requests.")
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
