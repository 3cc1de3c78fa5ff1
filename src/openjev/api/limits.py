"""What `/v1/limits` says of images and box questions: whether each is accepted, and their limits.

`None` for "accepted" until the backend is ready and has said whether its model sees.
"""

from __future__ import annotations

import math
from typing import Any

from openjev.answering.box_reading import BoxReader
from openjev.config import Settings
from openjev.prompting.vision import VisionSpec


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
