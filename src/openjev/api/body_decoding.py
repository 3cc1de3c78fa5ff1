"""A request body's `Content-Encoding` undone (gzip, x-gzip or zstd, one layer), bounded by work, not output.

The output is capped at the route's body cap (413 past it), so a compression bomb costs at most that
much; a body that does not decode, or holds more than MAX_MEMBERS gzip members or zstd frames, is a
400; any other coding, or two, a 415. The input is fed STEP_INPUT bytes at a time (linear in the
body, whatever its framing), each call writes at most STEP_OUTPUT bytes, and the GIL is held only
between calls. It runs on the event loop only for an input of at most INLINE_INPUT_BYTES whose output
stays within INLINE_BYTES; anything else (a 1.6 KB zstd bomb decodes to 40 MiB) is decoded on a worker
thread. `body.py` reads the body and calls it.
"""

from __future__ import annotations

import asyncio
import zlib

import zstandard

from openjev.api.errors import HttpError


def too_large(limit: int, what: str) -> HttpError:
    return HttpError(413, "request_too_large", f"the request body {what} is over the limit of {limit} bytes")


def undecodable(message: str) -> HttpError:
    return HttpError(400, "invalid_body", message)


#: Gzip members or zstd frames one body may hold: concatenated members are one valid stream, but a
#: body of thousands of empty ones is work without output (2 MiB of empty gzip members held the loop
#: for 3.7 s when each member cost a pass over the rest of the body).
MAX_MEMBERS = 16
#: Compressed bytes fed to a decoder at a time, and output it may write in one call: each call holds
#: the GIL only to copy what it was given (zlib and zstd inflate without it), so a body is decoded in
#: time linear in its size, whatever its framing, and the loop waits at most one step for the GIL.
STEP_INPUT = 64 * 1024
STEP_OUTPUT = 1 << 20


def _too_many_members(coding: str) -> HttpError:
    return undecodable(f"the {coding} body holds more than {MAX_MEMBERS} members or frames (Content-Encoding)")


def _gunzip(data: bytes, limit: int) -> bytes:
    """Every gzip member in turn (concatenated members are one valid gzip stream), `MAX_MEMBERS` at most,
    fed STEP_INPUT bytes at a time; anything after the last complete member, or a member cut short,
    does not decode."""
    chunks: list[bytes] = []
    size, members, position, view = 0, 0, 0, memoryview(data)
    try:
        while position < len(view):
            members += 1
            if members > MAX_MEMBERS:
                raise _too_many_members("gzip")
            decoder = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            while not decoder.eof:
                piece = decoder.unconsumed_tail
                if not piece:
                    if position == len(view):
                        raise undecodable("the gzip body is truncated")
                    piece = view[position : position + STEP_INPUT]
                    position += len(piece)
                chunks.append(decoder.decompress(piece, min(STEP_OUTPUT, limit + 1 - size)))
                size += len(chunks[-1])
                if size > limit:
                    raise too_large(limit, "decompressed")
            position -= len(decoder.unused_data)  # the next member starts in the last piece
    except zlib.error as error:
        raise undecodable(f"the gzip body does not decode: {error}") from error
    return b"".join(chunks)


#: Input bytes a zstd block takes at least: an RLE block, a 3-byte header and its byte (RFC 8878 3.1.1.2).
_ZSTD_MIN_BLOCK_BYTES = 4
#: The smallest step of input fed to the zstd decoder: at most 9 blocks (1.1 MiB) come of it.
_ZSTD_MIN_STEP = 32


def _unzstd(data: bytes, limit: int) -> bytes:
    """One zstd frame, the usual body, decoded in one call that releases the GIL, into a buffer of the
    frame's declared size or of the cap; a frame that declares more than the cap is refused undecoded
    (the decoder holds a frame to its declared size). Anything else (several frames, a cut one, or not
    zstd) goes the careful way, which says what is wrong."""
    try:
        declared = zstandard.frame_content_size(data)
        if declared > limit:
            raise too_large(limit, "decompressed")
        if declared != 0:  # a size, or -1: none declared (an empty frame's checks are the careful way's)
            out = zstandard.ZstdDecompressor().decompress(data, max_output_size=limit + 1, allow_extra_data=False)
            if len(out) <= limit:
                return out
    except zstandard.ZstdError:
        pass
    return _unzstd_frames(data, limit)


def _unzstd_frames(data: bytes, limit: int) -> bytes:
    """Every zstd frame in turn, in steps of input that cannot decode past the cap: a block decodes to
    at most `zstandard.BLOCKSIZE_MAX` bytes and takes at least `_ZSTD_MIN_BLOCK_BYTES`, so a step of n
    bytes yields at most n / 4 + 1 blocks, and a bomb costs at most the cap and a block. A frame cut
    short does not decode (a stream reader would silently return what it holds)."""
    chunks: list[bytes] = []
    size, rest, decompressor, ratio = 0, memoryview(data), zstandard.ZstdDecompressor(), 1
    try:
        for _ in range(MAX_MEMBERS):
            if not rest:
                break
            frame = decompressor.decompressobj()
            position = 0
            while not frame.eof:
                if position == len(rest):
                    raise undecodable("the zstd body is truncated")
                bound = _ZSTD_MIN_BLOCK_BYTES * (limit - size) // zstandard.BLOCKSIZE_MAX
                step = max(_ZSTD_MIN_STEP, min(bound, STEP_OUTPUT // ratio))
                chunks.append(frame.decompress(rest[position : position + step]))
                position = min(position + step, len(rest))
                size += len(chunks[-1])
                ratio = max(1, len(chunks[-1]) // step)
                if size > limit:
                    raise too_large(limit, "decompressed")
            rest = rest[position - len(frame.unused_data) :]  # the next frame starts in the last step
        if rest:
            raise _too_many_members("zstd")
    except zstandard.ZstdError as error:
        raise undecodable(f"the zstd body does not decode: {error}") from error
    return b"".join(chunks)  # past 1 MiB bytes.join copies without the GIL


DECODERS = {"gzip": _gunzip, "x-gzip": _gunzip, "zstd": _unzstd}
#: Bytes of output a body's decoding (or a multipart body's split in `fast_path`) may produce on the
#: event loop; past it, the work runs on a worker thread.
INLINE_BYTES = 64 * 1024
#: Compressed bytes decoded on the event loop at most: the inline pass is bounded by the input it
#: consumes as well as by its output (empty members produce none).
INLINE_INPUT_BYTES = 16 * 1024


def decode_body(data: bytes, encodings: list[str], limit: int) -> bytes:
    """Undo the codings in reverse order of application, each capped at `limit` bytes of output."""
    for coding in reversed(encodings):
        data = DECODERS[coding](data, limit)
    return data


async def decode_off_loop(data: bytes, encodings: list[str], limit: int) -> bytes:
    """`decode_body`, here when the input is small and the output stays within INLINE_BYTES, else on a
    worker thread."""
    if not encodings:
        return data
    if limit > INLINE_BYTES and len(data) <= INLINE_INPUT_BYTES:
        try:
            return decode_body(data, encodings, INLINE_BYTES)
        except HttpError as error:
            if error.status != 413:
                raise
    return await asyncio.to_thread(decode_body, data, encodings, limit)


def parse_encodings(header: str | None) -> list[str]:
    """The body's coding: none, gzip or zstd. One layer at most: a second one only multiplies the work
    a few bytes can ask for (six 3 KB `gzip, gzip` bodies held the worker threads for seconds)."""
    if not header:
        return []
    codings = [part.strip().lower() for part in header.split(",") if part.strip()]
    codings = [coding for coding in codings if coding != "identity"]
    unknown = [coding for coding in codings if coding not in DECODERS]
    if unknown:
        raise HttpError(
            415,
            "unsupported_media_type",
            f"Content-Encoding {', '.join(unknown)} is not supported; use gzip or zstd",
        )
    if len(codings) > 1:
        raise HttpError(
            415,
            "unsupported_media_type",
            f"Content-Encoding {header.strip()!r} has {len(codings)} codings; send at most one (gzip or zstd)",
        )
    return codings
