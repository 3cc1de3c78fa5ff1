"""What a vision model makes of an image: its vision tokens and how many positions an image takes.

A Qwen2-VL-family processor (Qwen2.5-VL, Qwen3-VL, Qwen3.5/3.6) resizes each image so both sides are
multiples of `factor = patch_size * merge_size` and its area lies in [min_pixels, max_pixels]
(`smart_resize`, the processor's own rule), cuts it into patch_size x patch_size patches and merges
each merge_size x merge_size block into one model position, so an image of resized size H x W takes

    (H / patch_size) * (W / patch_size) / merge_size**2 = (H / factor) * (W / factor)

positions between `<|vision_start|>` and `<|vision_end|>`. A backend's `vision` property describes the
model served; openjev sends one `<|image_pad|>` per image and the backend's processor expands it to
that count, which the token budgets count in full.

Grounding (box questions) is a property of the family too: Qwen3-VL and Qwen3.5/3.6 write box
coordinates as integers 0-1000 relative to the image (as Qwen2-VL did); Qwen2.5-VL as pixels of the
image as the processor resized it (`grounding_of`, by the config's `model_type`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from openjev.request.images import MAX_ASPECT_RATIO

#: The side of the relative coordinate space.
RELATIVE_SIDE = 1000
#: Model types that write box coordinates in pixels of the resized image.
PIXEL_GROUNDING_TYPES = frozenset({"qwen2_5_vl"})


class GroundingScale(StrEnum):
    """How a vision model writes box coordinates."""

    #: Integers 0-1000 relative to the image (Qwen3-VL, Qwen3.5/3.6).
    RELATIVE_1000 = "relative-1000"
    #: Pixels of the image as the processor resized it (Qwen2.5-VL).
    ABSOLUTE_PIXELS = "absolute-pixels"


def grounding_of(model_type: object) -> GroundingScale:
    """The grounding scale of a model by its config's `model_type`: Qwen2.5-VL's pixels, else the
    0-1000 relative scale of the Qwen3-VL family (and of Qwen2-VL)."""
    return GroundingScale.ABSOLUTE_PIXELS if model_type in PIXEL_GROUNDING_TYPES else GroundingScale.RELATIVE_1000


@dataclass(frozen=True, slots=True)
class VisionSpec:
    """The served model's image tokens and its processor's resize bounds."""

    vision_start: str
    image_pad: str
    vision_end: str
    patch_size: int
    merge_size: int
    min_pixels: int
    max_pixels: int
    grounding: GroundingScale = GroundingScale.RELATIVE_1000

    @property
    def factor(self) -> int:
        return self.patch_size * self.merge_size

    def resized(self, height: int, width: int) -> tuple[int, int]:
        """The processor's `smart_resize`: (height, width) after resizing, multiples of `factor`."""
        factor = self.factor
        if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
            raise ValueError(
                f"the aspect ratio {max(height, width) / min(height, width):.0f} is over {MAX_ASPECT_RATIO}"
            )
        h_bar = round(height / factor) * factor
        w_bar = round(width / factor) * factor
        if h_bar * w_bar > self.max_pixels:
            beta = math.sqrt((height * width) / self.max_pixels)
            h_bar = max(factor, math.floor(height / beta / factor) * factor)
            w_bar = max(factor, math.floor(width / beta / factor) * factor)
        elif h_bar * w_bar < self.min_pixels:
            beta = math.sqrt(self.min_pixels / (height * width))
            h_bar = math.ceil(height * beta / factor) * factor
            w_bar = math.ceil(width * beta / factor) * factor
        return h_bar, w_bar

    def image_tokens(self, height: int, width: int) -> int:
        """Model positions an image of this size takes (its `<|image_pad|>` expanded)."""
        h_bar, w_bar = self.resized(height, width)
        return (h_bar // self.factor) * (w_bar // self.factor)

    def grounding_extent(self, height: int, width: int) -> tuple[int, int]:
        """(width, height) of the space the model writes an image's box coordinates in."""
        if self.grounding is GroundingScale.RELATIVE_1000:
            return RELATIVE_SIDE, RELATIVE_SIDE
        h_bar, w_bar = self.resized(height, width)
        return w_bar, h_bar

    @property
    def largest_coordinate(self) -> int:
        """The largest box coordinate the model may write: the relative side, or the longest side an
        image may have after the processor's resize (at most `max_pixels`, aspect ratio at most 200)."""
        if self.grounding is GroundingScale.RELATIVE_1000:
            return RELATIVE_SIDE
        return math.isqrt(self.max_pixels * MAX_ASPECT_RATIO)
