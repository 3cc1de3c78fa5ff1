"""An image's framing checked in its bytes before Pillow opens it: work bounded by the chunk count.

Pillow's `Image.open` walks a PNG's chunks (and a JPEG's segments before its first scan) in Python,
several microseconds each, before the pixel check can run: a PNG of a million tiny chunks (10 MiB, or
a few KB compressed in the body) took 19-27 s of CPU. `check_framing(data, kind)` walks the same
framing here, stopping at the first bound passed, so its work is at most MAX_PNG_CHUNKS or
MAX_JPEG_SEGMENTS steps, and refuses (`ImageRefused`):

- a PNG of more than MAX_PNG_CHUNKS chunks (libpng's 8 KiB IDAT chunks make 1,280 for the 10 MiB an
  image may have), or with more than one `iCCP` (an embedded ICC profile: the format allows one);
- a JPEG of more than MAX_JPEG_SEGMENTS marker segments before its first scan (a camera's file has
  a few dozen), with bytes other than fill bytes (0xFF) between two segments (Pillow skips such junk
  one byte at a time), or with `ICC_PROFILE` segments that are not the pieces of one profile (one
  piece count, each sequence number once).

A file whose framing ends early is left to Pillow, which refuses it as truncated.
"""

from __future__ import annotations

import re

#: Chunks a PNG may have (about 0.1 s of Pillow's chunk walk at most).
MAX_PNG_CHUNKS = 8192
#: Marker segments a JPEG may have before its first scan.
MAX_JPEG_SEGMENTS = 512
PNG_SIGNATURE_BYTES = 8
#: A chunk's length, type and CRC: 12 bytes around its data.
PNG_CHUNK_FRAMING = 12
#: JPEG markers without a length: TEM and RST0-7 (SOI and EOI are handled on their own).
STANDALONE_MARKERS = frozenset({0x01, *range(0xD0, 0xD8)})
SOS, EOI, APP2 = 0xDA, 0xD9, 0xE2
ICC_TAG = b"ICC_PROFILE\0"
FILL_BYTES = re.compile(rb"\xff+")


class ImageRefused(ValueError):
    """The bytes are not an image openjev takes; the message says why."""


def check_framing(data: bytes, kind: str) -> None:
    """The module's contract for the bytes of a `PNG` or `JPEG`; `ImageRefused` when a bound is passed."""
    if kind == "PNG":
        check_png_chunks(data)
    elif kind == "JPEG":
        check_jpeg_segments(data)


def check_png_chunks(data: bytes) -> None:
    at, chunks, profiles = PNG_SIGNATURE_BYTES, 0, 0
    while at + PNG_CHUNK_FRAMING <= len(data):
        length, kind = int.from_bytes(data[at : at + 4], "big"), data[at + 4 : at + 8]
        chunks += 1
        if chunks > MAX_PNG_CHUNKS:
            raise ImageRefused(f"the PNG has more than {MAX_PNG_CHUNKS} chunks")
        profiles += kind == b"iCCP"
        if profiles > 1:
            raise ImageRefused("the PNG has more than one iCCP chunk (an image has at most one ICC profile)")
        if kind == b"IEND":
            return
        at += PNG_CHUNK_FRAMING + length


def check_jpeg_segments(data: bytes) -> None:
    at, segments, pieces = 2, 0, []  # after SOI; pieces: each ICC_PROFILE segment's (sequence number, count)
    while at < len(data):
        if data[at] != 0xFF:
            raise ImageRefused(f"the JPEG has bytes that are not a marker between its segments (at byte {at})")
        at = FILL_BYTES.match(data, at).end()  # type: ignore[union-attr]  # data[at] is 0xFF
        if at >= len(data) or data[at] in (SOS, EOI):
            return
        marker, at = data[at], at + 1
        segments += 1
        if segments > MAX_JPEG_SEGMENTS:
            raise ImageRefused(f"the JPEG has more than {MAX_JPEG_SEGMENTS} marker segments before its image data")
        if marker in STANDALONE_MARKERS:
            continue
        if marker == APP2 and data[at + 2 : at + 2 + len(ICC_TAG)] == ICC_TAG:
            pieces.append(data[at + 2 + len(ICC_TAG) : at + 4 + len(ICC_TAG)])
            if len({piece[:1] for piece in pieces}) != len(pieces) or len({piece[1:] for piece in pieces}) != 1:
                raise ImageRefused("the JPEG's ICC_PROFILE segments are not the pieces of one profile")
        at += max(2, int.from_bytes(data[at : at + 2], "big"))
