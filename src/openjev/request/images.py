"""Images made safe before any model sees them: one decode, one resize, one encoding in the source's format.

Contract, for the bytes of one image asset (`ImagePreparer.prepare`):
- the bytes decide the format: a PNG or JPEG signature, nothing else (the declared `format` is not
  trusted); anything else is refused;
- its framing (a PNG's chunks, a JPEG's segments) is walked in bytes first, within bounds on their
  count and one ICC profile at most (`image_headers.py`), so that Pillow's own walk is bounded too;
- the size in the file's header is checked before any pixel is decoded: more than
  OPENJEV_MAX_IMAGE_SOURCE_PIXELS is refused, and Pillow's own decompression-bomb guard is an error,
  never a warning; a truncated or corrupt file is refused;
- decoded, it is turned upright (its EXIF orientation), made RGB (transparency over white; a wide
  grayscale mode, 16-bit `I;16`/`I;16B`/`I;16L` or 32-bit `I` and `F`, scaled from 0-65535 to 0-255,
  as Pillow's own conversion would clip it to white) and, when it has more than
  OPENJEV_MAX_IMAGE_PIXELS pixels, resized (bicubic, as the Qwen-VL processors
  resize) to the largest size within that budget with the same aspect ratio:
  scale s = sqrt(budget / (H * W)), size (max(1, floor(H * s)), max(1, floor(W * s))); a JPEG is decoded
  at the smallest DCT scale that still covers that size, which decodes a large photo several times
  faster;
- an image whose longer side is more than MAX_ASPECT_RATIO (200) times its shorter one, as resized,
  is refused: the Qwen-VL processors refuse it (`smart_resize`), and the official API states no
  padding that would change what its box fractions mean;
- it is encoded once again from its pixels, in its source's compact form (a JPEG as a JPEG at the
  source's own quantization tables, a PNG as a PNG, never larger than the source where a higher zlib
  level avoids it: `image_encoding.py`): no byte the caller sent reaches a backend (a PNG's ancillary
  chunks, a JPEG's metadata), so what a backend is sent per image is bounded by its pixels (at most
  OPENJEV_MAX_IMAGE_PIXELS x 3 bytes and the file's framing) and about the source's own size,
  whatever the caller's file held. It is named by its sha256 in every cache downstream.
Each refusal is an `ImageRefused` whose message says why; `ImagePreparer` reports it as a 422 naming
`["assets", KEY]`. An asset of low detail is resized within LOW_DETAIL_PIXELS (512x512) instead of
OPENJEV_MAX_IMAGE_PIXELS, where that is smaller. A repeated image (the same sha256 of its bytes as
sent, at the same pixel budget) is prepared once and kept
in a byte-bounded LRU (OPENJEV_IMAGE_CACHE_BYTES), shared by the preparation threads.
"""

from __future__ import annotations

import hashlib
import io
import math
import threading
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from PIL import Image, ImageOps

from openjev.config import Settings
from openjev.errors import Issue, RequestRejected
from openjev.request.image_encoding import SourceEncoding, encode, source_encoding
from openjev.request.image_headers import ImageRefused, check_framing

#: File signatures of the formats a vision backend is sent (both read by every Qwen-VL processor).
SIGNATURES = {b"\x89PNG\r\n\x1a\n": "PNG", b"\xff\xd8\xff": "JPEG"}
#: Past this aspect ratio (longer side over shorter) the Qwen-VL processors refuse an image.
MAX_ASPECT_RATIO = 200
#: Grayscale modes wider than 8 bits: a PNG's 16-bit gray decodes to `I;16` (or `I`), and Pillow's
#: `convert("L")`/`convert("RGB")` clips their values at 255 (a 16-bit photo turns white).
WIDE_GRAY_MODES = frozenset({"I;16", "I;16L", "I;16B", "I;16N", "I", "F"})
#: 65535 / 255: a 16-bit value to 8 bits.
WIDE_GRAY_SCALE = 257
#: An image asked for at low detail (OpenAI's `detail: "low"`, whose budget is about 512x512) is resized within this.
LOW_DETAIL_PIXELS = 512 * 512


@dataclass(frozen=True, slots=True)
class ImageInput:
    """One image of a prompt, made safe once (decoded, oriented, RGB, resized within the pixel budget,
    encoded again in its source's format, `image_encoding.py`): `data` is what the backend's processor
    reads, `kind` its format (`PNG` or `JPEG`), `sha256` its digest, which names the image in every
    cache, and `height` x `width` its size in pixels."""

    data: bytes
    sha256: str
    height: int
    width: int
    kind: str = "PNG"


def image_format(data: bytes) -> str | None:
    """`PNG` or `JPEG` from the file signature; None for anything else."""
    return next((name for signature, name in SIGNATURES.items() if data.startswith(signature)), None)


def fitted_size(height: int, width: int, max_pixels: int) -> tuple[int, int]:
    """The largest size with the same aspect ratio and at most `max_pixels` pixels (the size itself when it fits)."""
    if height * width <= max_pixels:
        return height, width
    scale = math.sqrt(max_pixels / (height * width))
    return max(1, math.floor(height * scale)), max(1, math.floor(width * scale))


def as_rgb(image: Image.Image) -> Image.Image:
    """`image` as RGB: transparency over white, a wide grayscale mode scaled (`WIDE_GRAY_MODES`)."""
    if image.mode == "RGB":
        return image
    if image.mode in WIDE_GRAY_MODES:
        # Scaled, not clipped: as floats, 0-65535 onto 0-255 (rounded), then gray to RGB.
        return image.convert("F").point(lambda value: value / WIDE_GRAY_SCALE + 0.5).convert("L").convert("RGB")
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


#: EXIF's orientation tag; 1 (or none) is upright.
ORIENTATION = 0x0112


def _decoded(data: bytes, kind: str, max_pixels: int, max_source_pixels: int) -> tuple[Image.Image, SourceEncoding]:
    """The upright RGB image within `max_pixels` and its source's encoding; `ImageRefused` for anything
    that does not decode."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(data), formats=[kind])
            source = source_encoding(image, kind, len(data))
            width, height = image.size
            if width * height > max_source_pixels:
                raise ImageRefused(
                    f"the image is {width}x{height} ({width * height} pixels), over the limit of "
                    f"{max_source_pixels} pixels (OPENJEV_MAX_IMAGE_SOURCE_PIXELS)"
                )
            target_height, target_width = fitted_size(height, width, max_pixels)
            if kind == "JPEG":
                image.draft("RGB", (target_width, target_height))
            image.load()
            turned = image.getexif().get(ORIENTATION, 1) != 1
            image = as_rgb(ImageOps.exif_transpose(image) if turned else image)
        except ImageRefused:
            raise
        except (
            OSError,
            ValueError,
            SyntaxError,
            EOFError,
            Image.DecompressionBombError,
            Image.DecompressionBombWarning,
        ) as error:
            raise ImageRefused(f"the {kind} image does not decode: {error}") from error
    height, width = image.height, image.width
    target_height, target_width = fitted_size(height, width, max_pixels)
    ratio = max(target_height, target_width) / min(target_height, target_width)
    if ratio > MAX_ASPECT_RATIO:
        raise ImageRefused(
            f"the image is {target_width}x{target_height} pixels, an aspect ratio of {ratio:.0f}:1; the model's "
            f"image processor takes at most {MAX_ASPECT_RATIO}:1 (pad the image to a less extreme shape)"
        )
    if (target_height, target_width) != (height, width):
        image = image.resize((target_width, target_height), Image.Resampling.BICUBIC)
    return image, source


def make_safe(data: bytes, *, max_pixels: int, max_source_pixels: int) -> ImageInput:
    """The module's contract for one image's bytes; `ImageRefused` when they are not one openjev takes."""
    kind = image_format(data)
    if kind is None:
        raise ImageRefused("the bytes are not a PNG or JPEG image (the format is detected from the bytes)")
    check_framing(data, kind)
    image, source = _decoded(data, kind, max_pixels, max_source_pixels)
    encoded, encoded_kind = encode(image, source)
    return ImageInput(encoded, hashlib.sha256(encoded).hexdigest(), image.height, image.width, encoded_kind)


class ImagePreparer:
    """`make_safe` with the settings' limits and a byte-bounded LRU by the sha256 of the bytes as sent."""

    def __init__(self, settings: Settings) -> None:
        self.max_pixels = settings.max_image_pixels
        self.max_source_pixels = settings.max_image_source_pixels
        self.capacity_bytes = settings.image_cache_bytes
        self.bytes = 0
        self.hits = 0
        self._entries: OrderedDict[str, ImageInput] = OrderedDict()
        self._lock = threading.Lock()

    def prepare(self, sources: Mapping[str, bytes], low: frozenset[str] = frozenset()) -> dict[str, ImageInput]:
        """Each asset's image, by key; a `RequestRejected` naming every asset that is refused. The
        assets in `low` (low detail) are resized within LOW_DETAIL_PIXELS."""
        images: dict[str, ImageInput] = {}
        issues = []
        for key, data in sources.items():
            try:
                images[key] = self._one(
                    data, min(self.max_pixels, LOW_DETAIL_PIXELS) if key in low else self.max_pixels
                )
            except ImageRefused as error:
                issues.append(Issue(("assets", key), str(error), "image_invalid"))
        if issues:
            raise RequestRejected(issues)
        return images

    def _one(self, data: bytes, max_pixels: int) -> ImageInput:
        digest = hashlib.sha256(data).hexdigest() + ("" if max_pixels == self.max_pixels else f"@{max_pixels}")
        with self._lock:
            found = self._entries.get(digest)
            if found is not None:
                self._entries.move_to_end(digest)
                self.hits += 1
                return found
        image = make_safe(data, max_pixels=max_pixels, max_source_pixels=self.max_source_pixels)
        cost = len(image.data) + 256
        with self._lock:
            if cost <= self.capacity_bytes and digest not in self._entries:
                while self.bytes + cost > self.capacity_bytes:
                    _, old = self._entries.popitem(last=False)
                    self.bytes -= len(old.data) + 256
                self._entries[digest] = image
                self.bytes += cost
        return image
