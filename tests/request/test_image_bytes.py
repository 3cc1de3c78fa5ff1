"""An image's bytes: its framing bounded before Pillow opens it (`request/image_headers.py`) and its
encoding kept compact (`request/image_encoding.py`), through `make_safe`."""

from __future__ import annotations

import io
import random
import struct
import time
import zlib

import pytest
from PIL import Image

from openjev.request.image_headers import MAX_JPEG_SEGMENTS, MAX_PNG_CHUNKS
from openjev.request.images import ImageRefused, make_safe

LIMITS = {"max_pixels": 1024 * 1024, "max_source_pixels": 40_000_000}


def noise(width: int, height: int, seed: int = 1) -> Image.Image:
    return Image.frombytes("RGB", (width, height), random.Random(seed).randbytes(width * height * 3))


def encoded(image: Image.Image, kind: str, **options: object) -> bytes:
    out = io.BytesIO()
    image.save(out, format=kind, **options)
    return out.getvalue()


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def with_chunks(png: bytes, chunks: list[bytes]) -> bytes:
    """`png` with `chunks` after its IHDR (signature 8 bytes, IHDR 25)."""
    return png[:33] + b"".join(chunks) + png[33:]


def with_segments(jpeg: bytes, segments: list[bytes]) -> bytes:
    """`jpeg` with marker segments right after its SOI."""
    return jpeg[:2] + b"".join(segments) + jpeg[2:]


def segment(marker: int, data: bytes) -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", len(data) + 2) + data


def test_a_jpeg_stays_a_jpeg_of_about_its_source_s_size_and_a_png_is_never_inflated():
    for quality in (50, 75, 95):
        source = encoded(noise(320, 240), "JPEG", quality=quality)
        safe = make_safe(source, **LIMITS)
        assert safe.kind == "JPEG" and safe.data.startswith(b"\xff\xd8\xff")
        # One byte after the end marker: SGLang decodes it on the CPU and keeps openjev's ids.
        assert safe.data.endswith(b"\xff\xd9\x00")
        assert len(safe.data) <= 1.2 * len(source), (quality, len(safe.data), len(source))
    # Resized to the pixel budget: smaller still.
    large = encoded(noise(1600, 1200), "JPEG", quality=90)
    assert len(make_safe(large, **LIMITS).data) < len(large)
    grey = make_safe(encoded(noise(64, 48).convert("L"), "JPEG", quality=80), **LIMITS)
    assert grey.kind == "JPEG" and Image.open(io.BytesIO(grey.data)).mode == "RGB"
    # A PNG compressed harder than level 1 by its writer is not sent larger than it came.
    smooth = Image.linear_gradient("L").resize((512, 512)).convert("RGB")
    source = encoded(smooth, "PNG", compress_level=9)
    safe = make_safe(source, **LIMITS)
    assert safe.kind == "PNG" and len(safe.data) <= len(source)
    assert Image.open(io.BytesIO(safe.data)).tobytes() == smooth.tobytes()


def test_png_chunk_bombs_and_a_second_icc_profile_are_refused_before_pillow_walks_them():
    png = encoded(noise(8, 8), "PNG")
    within = with_chunks(png, [chunk(b"tEXt", b"k\0v")] * (MAX_PNG_CHUNKS - 3))
    assert make_safe(within, **LIMITS).kind == "PNG"
    bomb = with_chunks(png, [chunk(b"tEXt", b"k\0v")] * 400_000)  # 6 MB: seconds in Pillow's walk
    started = time.perf_counter()
    with pytest.raises(ImageRefused, match=f"more than {MAX_PNG_CHUNKS} chunks"):
        make_safe(bomb, **LIMITS)
    assert time.perf_counter() - started < 0.5
    profile = chunk(b"iCCP", b"p\0\0" + zlib.compress(b"x" * 100))
    with pytest.raises(ImageRefused, match="more than one iCCP"):
        make_safe(with_chunks(png, [profile, profile]), **LIMITS)


def test_jpeg_segment_bombs_junk_and_two_icc_profiles_are_refused():
    jpeg = encoded(noise(16, 16), "JPEG")
    comment = segment(0xFE, b"hello")
    assert make_safe(with_segments(jpeg, [comment] * 10), **LIMITS).kind == "JPEG"
    with pytest.raises(ImageRefused, match=f"more than {MAX_JPEG_SEGMENTS} marker segments"):
        make_safe(with_segments(jpeg, [comment] * 200_000), **LIMITS)
    with pytest.raises(ImageRefused, match="not a marker"):
        make_safe(with_segments(jpeg, [comment, b"junk" * 1000]), **LIMITS)
    # One profile in two pieces is fine; two profiles (a piece number twice) are not.
    pieces = [segment(0xE2, b"ICC_PROFILE\0" + bytes([n, 2]) + b"data") for n in (1, 2)]
    assert make_safe(with_segments(jpeg, pieces), **LIMITS).kind == "JPEG"
    with pytest.raises(ImageRefused, match="one profile"):
        make_safe(with_segments(jpeg, pieces + pieces), **LIMITS)
