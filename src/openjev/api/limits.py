"""What `/v1/limits` says of token budgets, images and box questions (what is reachable, and their
limits), and each answering route's counts.

`None` for "accepted" until the backend is ready and has said whether its model sees; `None` for the
long-context budget until the backend has said its context length. A route's counts
(`route_limits`) are its contract's, lowered by the operator's caps (OPENJEV_MAX_QUESTIONS,
OPENJEV_MAX_CHOICE_OPTIONS, OPENJEV_MAX_SCORE_LEVELS, OPENJEV_MAX_IMAGES) where they are lower:
OpenAI's on `/v1/decisions` (`request/decision_limits.py`); TypeSafe's on `/v1/systemone` and
OpenRouter's route, which state no most questions, levels or images, so the caps are theirs (at least
one option or level, as the official schema takes).
"""

from __future__ import annotations

import math
from typing import Any

from openjev.answering.box_reading import BoxReader
from openjev.api.middleware import ANSWERING_PATHS
from openjev.config import Settings
from openjev.endpoints import DECISIONS_PATH
from openjev.prompting.budget import LONG_CONTEXT_HEADER, TokenBudget
from openjev.prompting.vision import VisionSpec
from openjev.request import decision_limits as openai

#: How every answering route counts a request against its budget (`prompting/budget.py`).
COUNTED = (
    "the caller's text alone: per question, the input, the question as sent and its output token in one call; "
    "per request, the input once and each question once (openjev's own views and readouts are never counted)"
)


def token_limits(settings: Settings, context_length: int | None) -> dict[str, Any]:
    """The most tokens reachable per question and per request, without and with the long-context header
    (the same on every answering route); `context_length`: the backend's, None until it is ready."""
    standard = TokenBudget.of(settings, context_length).reachable
    long = TokenBudget.of(settings, context_length, long_context=True).reachable if context_length else None
    return {
        "max_input_tokens": standard["per_question"],
        "max_total_input_tokens": standard["per_request"],
        "max_input_tokens_long_context": long and long["per_question"],
        "max_total_input_tokens_long_context": long and long["per_request"],
        "long_context_header": LONG_CONTEXT_HEADER,
        "token_budgets": {
            route: {"counted": COUNTED, "standard": standard, "long_context": long} for route in sorted(ANSWERING_PATHS)
        },
    }


def image_limits(settings: Settings, ready: bool, vision: VisionSpec | None) -> dict[str, Any]:
    """Whether images are accepted (None until the backend is ready and has said), and their limits;
    `square_image_tokens`: what a square image at the pixel budget costs the model."""
    side = math.isqrt(settings.max_image_pixels)
    return {
        "accepted": vision is not None if ready else None,
        "max_images": settings.max_images,
        "max_image_bytes": settings.max_image_bytes,
        "max_image_total_bytes": settings.max_image_total_bytes,
        "max_image_body_bytes": settings.max_image_body_bytes,
        "max_image_pixels": settings.max_image_pixels,
        "max_image_source_pixels": settings.max_image_source_pixels,
        "max_image_positions": settings.max_image_positions,
        "max_concurrent_image_preparations": settings.max_concurrent_image_preparations,
        "image_preparation_queue": settings.image_preparation_queue,
        "square_image_tokens": vision.image_tokens(side, side) if vision is not None else None,
    }


def box_limits(boxes: BoxReader | None) -> dict[str, Any]:
    """Whether box questions are accepted (None until the backend is ready), the model's grounding
    scale and the most ids a box's generation writes (None where boxes are refused)."""
    if boxes is None or not boxes.accepted or boxes.vision is None:
        return {"accepted": None if boxes is None else False, "grounding": None, "max_new_tokens": None}
    return {"accepted": True, "grounding": boxes.vision.grounding, "max_new_tokens": boxes.max_tokens}


def _counts(
    settings: Settings, questions: int, choices: tuple[int, int], levels: tuple[int, int], images: int
) -> dict[str, Any]:
    return {
        "max_questions": min(questions, settings.max_questions),
        "min_choice_options": choices[0],
        "max_choice_options": min(choices[1], settings.max_choice_options),
        "min_score_levels": levels[0],
        "max_score_levels": min(levels[1], settings.max_score_levels),
        "max_images": min(images, settings.max_images),
    }


def route_limits(settings: Settings) -> dict[str, dict[str, Any]]:
    """The counts each answering route takes, by path (module doc)."""
    typesafe = _counts(settings, settings.max_questions, (1, 255), (1, settings.max_score_levels), settings.max_images)
    decisions = _counts(
        settings,
        openai.MAX_QUESTIONS,
        (openai.MIN_CHOICES, openai.MAX_CHOICES),
        (openai.MIN_LEVELS, openai.MAX_LEVELS),
        openai.MAX_IMAGES,
    )
    # OpenAI's counts on its route; TypeSafe's on `/v1/systemone` and OpenRouter's, which takes its contract.
    return {path: decisions if path == DECISIONS_PATH else typesafe for path in sorted(ANSWERING_PATHS)}
