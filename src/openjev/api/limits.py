"""What `/v1/limits` says of token budgets, images and box questions: what is reachable, and their limits.

`None` for "accepted" until the backend is ready and has said whether its model sees; `None` for the
long-context budget until the backend has said its context length.
"""

from __future__ import annotations

import math
from typing import Any

from openjev.answering.box_reading import BoxReader
from openjev.api.middleware import ANSWERING_PATHS
from openjev.config import Settings
from openjev.prompting.budget import LONG_CONTEXT_HEADER, TokenBudget
from openjev.prompting.vision import VisionSpec

#: How every answering route counts a request against its budget (`prompting/budget.py`).
COUNTED = (
    "per question: the input, one question and its output token in one call; per request: the input once, "
    "each readout's own tokens, each content-free readout and each thinking call"
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
