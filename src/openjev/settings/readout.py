"""The readout's settings: how a question is cued and read, its rotations, its calibration, and the
thinking tier's escalation; a part of `config.Settings`, which inherits them, read, documented and
mirrored by CLI flags as every other `OPENJEV_*` setting.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings

from openjev.options import (
    QUESTION_TYPES,
    AnswerCue,
    ConfidenceMode,
    OptionOrder,
    RotationAverage,
    ScoreLabels,
    WorkedExamples,
)


class ReadoutSettings(BaseSettings):
    # Readout.
    temperature: float = Field(1.0, gt=0, description="Divides label logprobs before renormalising.")
    confidence: ConfidenceMode = Field(
        ConfidenceMode.typesafe, description="`typesafe` (official definition) or `entropy` (1 - H/log n)."
    )
    answer_cue: AnswerCue = Field(
        AnswerCue.plain,
        description="What ends the question turn, right before the label: `plain` (`Answer:` and a newline) "
        'or `json` (`{"answer": "`).',
    )
    option_shifts: int = Field(
        1,
        ge=1,
        le=255,
        description="Choice questions of at most 26 options: read in up to this many cyclic rotations, combined "
        "(1 = off); a longer list is read once.",
    )
    rotation_average: RotationAverage = Field(
        RotationAverage.probability,
        description="How a choice's rotations are combined: `probability` (their mean) or `log` (their "
        "renormalised geometric mean).",
    )
    rotation_skip_above: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Choice questions with option shifts: the rotations after the first are read only where the "
        "first readout's top probability (its content-free prior divided out, before the temperature) is at "
        "most this; 1 = always read, with the first.",
    )
    option_order: OptionOrder = Field(
        OptionOrder.given,
        description="Choice questions: show the options `given` (as sent) or `canonical` (sorted by their text, then "
        "key, before lettering and rotating), so that any two listings of the same options get the same answer.",
    )
    option_keys: bool = Field(False, description="Choice questions: show each option's key beside its description.")
    answer_cue_noul: AnswerCue | None = Field(
        None, description="The answer cue of noul questions; unset: OPENJEV_ANSWER_CUE."
    )
    answer_cue_choice: AnswerCue | None = Field(
        None, description="The answer cue of choice questions; unset: OPENJEV_ANSWER_CUE."
    )
    answer_cue_score: AnswerCue | None = Field(
        None, description="The answer cue of score questions; unset: OPENJEV_ANSWER_CUE."
    )
    worked_examples: WorkedExamples = Field(WorkedExamples.block, description="Worked examples as `block` or `lines`.")
    score_labels: ScoreLabels = Field(
        ScoreLabels.letters,
        description="Score questions: label the levels `letters` (A, B, ...) or `digits` (1, 2, ...; rubrics of "
        "up to 9 levels, longer ones stay lettered).",
    )
    score_temperature: float | None = Field(
        None, gt=0, description="Score questions: their readout's temperature; unset: OPENJEV_TEMPERATURE."
    )
    score_reverse: bool = Field(
        False,
        description="Score questions: also read the rubric in reverse order and combine both readouts in log "
        "space (one more backend call per score question).",
    )
    contextual_calibration: str = Field(
        "",
        description="Question types (comma-separated: noul, choice, score) whose readout is divided by a "
        "content-free readout of the same question (state `N/A`), each view by its own, cached per question "
        "text; empty: none.",
    )
    content_free_cache_bytes: int = Field(
        16 * 1024 * 1024, ge=0, description="Bytes of content-free readouts kept (calibration), by question text."
    )
    calibration_file: Path | None = Field(
        None,
        description="JSON file of temperatures per question type and option count (evals/calibrate.py); "
        "used in place of OPENJEV_TEMPERATURE where it has an entry.",
    )

    # The thinking tier (openjev.answering.thinking).
    think_model: str = Field(
        "openjev-think",
        description="Model name of the thinking tier: low-margin questions think first, then are read again.",
    )
    think_margin: float = Field(
        0.5,
        ge=0,
        description="Thinking tier: a question escalates when its top-two log-probability margin (nats, after "
        "normalisation) is below this.",
    )
    think_max_share: float = Field(
        0.2,
        ge=0,
        le=1,
        description="Thinking tier: the most questions that may escalate, as a share of its last "
        "OPENJEV_THINK_WINDOW questions (and of each request's).",
    )
    think_window: int = Field(1000, ge=1, description="Thinking tier: questions in the escalation share's window.")
    think_budget_tokens: int | None = Field(
        None,
        ge=1,
        description="Thinking tier: most reasoning tokens generated per escalated question; default 1024 on "
        "SGLang, 64 on the embedded backend.",
    )

    @field_validator("contextual_calibration")
    @classmethod
    def _known_question_types(cls, value: str) -> str:
        types = [part.strip() for part in value.split(",") if part.strip()]
        unknown = sorted(set(types) - set(QUESTION_TYPES))
        if unknown:
            raise ValueError(f"unknown question type(s) {', '.join(unknown)}; expected {', '.join(QUESTION_TYPES)}")
        return ",".join(kind for kind in QUESTION_TYPES if kind in types)

    def answer_cue_of(self, question_type: str) -> AnswerCue:
        """The answer cue of a question type: its own setting, else OPENJEV_ANSWER_CUE."""
        return getattr(self, f"answer_cue_{question_type}") or self.answer_cue

    @field_validator("calibration_file")
    @classmethod
    def _calibration_file_is_usable(cls, value: Path | None) -> Path | None:
        # Checked here so a bad file stops `openjev serve` before the model loads, with the reason.
        if value is not None:
            from openjev.calibration import load_calibration

            load_calibration(value)
        return value
