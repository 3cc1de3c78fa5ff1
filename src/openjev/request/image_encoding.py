"""A safe image encoded again in its source's compact form: a JPEG stays a JPEG, a PNG a PNG.

Contract (`encode(image, source)`, for the pixels `images.py` made safe and what the caller's file
was, `SourceEncoding`):
- a JPEG is encoded as a JPEG with the source's own quantization tables and chroma subsampling (its
  quality, neither raised nor lowered: decoded and encoded again at the same tables, the file keeps
  about its size, smaller when resized); a grey or CMYK source, whose tables do not cover RGB's
  channels, gets table 0 for luma and the last for chroma, and 4:2:0. One byte (0x00) follows its
  end marker: SGLang 0.5.19 (`utils/common.py` `is_jpeg_with_cuda`) decodes a file that ends with the
  end marker on the GPU when it has one, into a tensor its Qwen-VL processor cannot size, so it falls
  back to decoding the prompt's ids and tokenizing them again (`base_processor.py`, token drift);
  with the byte after it, Pillow decodes it on the CPU (Pillow ignores what follows the end marker)
  and openjev's ids are kept;
- a PNG is encoded as a PNG at zlib level 1 (fast), and at level 9 when that is larger than the
  source file, so what the backend reads is not inflated beyond what was sent where the pixels allow.
No byte of the caller's file is copied: only its pixels and, for a JPEG, its tables.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from PIL import Image, JpegImagePlugin

#: After a JPEG's end marker, so that SGLang 0.5.19 decodes it on the CPU (see the module docstring).
JPEG_TAIL = b"\x00"
#: The chroma subsampling a JPEG gets when its source's does not apply (4:2:0, libjpeg's default).
DEFAULT_SUBSAMPLING = 2
#: zlib levels: the fast one first, the smallest when the fast one is larger than the source.
FAST_LEVEL, SMALL_LEVEL = 1, 9


@dataclass(frozen=True, slots=True)
class SourceEncoding:
    """What the caller's file was: `kind` (`PNG` or `JPEG`), its size in bytes and, for a JPEG, its
    quantization tables (None: another format) and chroma subsampling (-1: not three channels)."""

    kind: str
    size: int
    qtables: tuple[Any, ...] | None = None
    subsampling: int = -1


def source_encoding(opened: Image.Image, kind: str, size: int) -> SourceEncoding:
    """`SourceEncoding` of a file Pillow has opened (before any pixel is changed)."""
    if kind != "JPEG" or not isinstance(opened, JpegImagePlugin.JpegImageFile) or not opened.quantization:
        return SourceEncoding(kind, size)
    tables = tuple(opened.quantization[index] for index in sorted(opened.quantization))
    return SourceEncoding(kind, size, tables, JpegImagePlugin.get_sampling(opened))


def encode(image: Image.Image, source: SourceEncoding) -> tuple[bytes, str]:
    """The bytes the backend reads and their format (`PNG` or `JPEG`)."""
    if source.kind == "JPEG" and source.qtables:
        return _jpeg(image, source), "JPEG"
    png = _png(image, FAST_LEVEL)
    if len(png) > source.size:
        png = min(png, _png(image, SMALL_LEVEL), key=len)
    return png, "PNG"


def _jpeg(image: Image.Image, source: SourceEncoding) -> bytes:
    assert source.qtables is not None
    three_channels = source.subsampling >= 0 and len(source.qtables) >= 2
    tables = list(source.qtables[:2]) if three_channels else [source.qtables[0], source.qtables[-1]]
    out = io.BytesIO()
    image.save(
        out, format="JPEG", qtables=tables, subsampling=source.subsampling if three_channels else DEFAULT_SUBSAMPLING
    )
    return out.getvalue() + JPEG_TAIL


def _png(image: Image.Image, level: int) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=level)
    return out.getvalue()
