"""ASGI middleware for request bodies: bounded size, gzip/zstd decoding, no surprises.

Contract, for every request that carries a body (`Door` let through only those a route will answer):
- more than its cap on the wire -> 413, decided from Content-Length when present and while reading
  otherwise; the rest of the body is never read into memory. The cap is decided from the head: a
  route whose body may carry images (`image_paths`: the answering routes, whose data URLs and assets
  are images) and any `multipart/form-data` body get `max_image_body_bytes`, others `max_body_bytes`;
- `Content-Encoding` identity, gzip (also x-gzip) or zstd, one layer at most (415 naming
  Content-Encoding for two), is decoded with a hard output cap of the same cap -> 413 past it, so a
  compression bomb costs at most that much; any other coding -> 415; a body that does not decode, or
  holds more than MAX_MEMBERS gzip members or zstd frames -> 400;
- at most `max_reads` bodies arrive at once (529 past it, before a byte is read), each within
  `read_timeout` seconds (408 past it); an answer given before the whole body arrived closes the
  connection, so a slow or unwanted body is never drained.
- the body bytes held at once, all requests together, stay within `max_bytes_in_flight`
  (OPENJEV_MAX_BODY_BYTES_IN_FLIGHT, `HeldBytes`): each piece as it arrives, the joined body, the
  decoded body (its room reserved before decoding, so decoding stops where the room ends), held until
  the route has answered. A body that would pass the bound is refused with 529 and Retry-After (before
  a byte is read when its Content-Length says so), the connection closed; /metrics shows the bytes
  held (`openjev_body_bytes_in_flight`) and their peak.
Bodies in transit hold at most `max_reads` x the larger cap, and all bodies `max_bytes_in_flight`.
Decoding is bounded by work, not output: the input is fed STEP_INPUT bytes at a time (linear in the
body, whatever its framing), each call writes at most STEP_OUTPUT bytes, and the GIL is held only
between calls. It runs on the event loop only for an input of at most INLINE_INPUT_BYTES whose output
stays within INLINE_BYTES; anything else (a 1.6 KB zstd bomb decodes to 40 MiB) is decoded on a worker
thread. A body that arrives as more than INLINE_BYTES is joined from its pieces on a worker thread too.
Downstream sees the decoded body, no Content-Encoding and a matching Content-Length; after the body,
`receive` is the server's own, so the endpoint can still notice a client disconnect.
"""

from __future__ import annotations

import asyncio
import zlib

import zstandard
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openjev.api.errors import HttpError, error_response
from openjev.errors import OpenJevError
from openjev.metrics import BODY_BYTES_IN_FLIGHT, BODY_BYTES_PEAK


def _too_large(limit: int, what: str) -> HttpError:
    return HttpError(413, "request_too_large", f"the request body {what} is over the limit of {limit} bytes")


def _undecodable(message: str) -> HttpError:
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
    return _undecodable(f"the {coding} body holds more than {MAX_MEMBERS} members or frames (Content-Encoding)")


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
                        raise _undecodable("the gzip body is truncated")
                    piece = view[position : position + STEP_INPUT]
                    position += len(piece)
                chunks.append(decoder.decompress(piece, min(STEP_OUTPUT, limit + 1 - size)))
                size += len(chunks[-1])
                if size > limit:
                    raise _too_large(limit, "decompressed")
            position -= len(decoder.unused_data)  # the next member starts in the last piece
    except zlib.error as error:
        raise _undecodable(f"the gzip body does not decode: {error}") from error
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
            raise _too_large(limit, "decompressed")
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
                    raise _undecodable("the zstd body is truncated")
                bound = _ZSTD_MIN_BLOCK_BYTES * (limit - size) // zstandard.BLOCKSIZE_MAX
                step = max(_ZSTD_MIN_STEP, min(bound, STEP_OUTPUT // ratio))
                chunks.append(frame.decompress(rest[position : position + step]))
                position = min(position + step, len(rest))
                size += len(chunks[-1])
                ratio = max(1, len(chunks[-1]) // step)
                if size > limit:
                    raise _too_large(limit, "decompressed")
            rest = rest[position - len(frame.unused_data) :]  # the next frame starts in the last step
        if rest:
            raise _too_many_members("zstd")
    except zstandard.ZstdError as error:
        raise _undecodable(f"the zstd body does not decode: {error}") from error
    return b"".join(chunks)  # past 1 MiB bytes.join copies without the GIL


def replay(message: Message, receive: Receive) -> Receive:
    """A `receive` that gives `message` first (a whole body), then whatever `receive` gives (a disconnect)."""
    delivered = False

    async def replaying() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return message
        return await receive()

    return replaying


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


class HeldBytes:
    """Body bytes held in memory, every request together, within `bound`; `take` refuses (529) what
    would pass it. The event loop is the only caller, so no lock."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.held = 0
        self.peak = 0

    def room(self) -> int:
        return max(0, self.bound - self.held)

    def refusal(self, size: int) -> HttpError:
        """The 529 for a body that needs `size` bytes more than there is room for."""
        return HttpError(
            529,
            "overloaded",
            f"request bodies hold {self.held} bytes and this one needs {size} more "
            f"(OPENJEV_MAX_BODY_BYTES_IN_FLIGHT={self.bound}); retry shortly",
        )

    def take(self, size: int) -> None:
        if size > self.room():
            raise self.refusal(size)
        self.held += size
        BODY_BYTES_IN_FLIGHT.set(self.held)
        if self.held > self.peak:
            self.peak = self.held
            BODY_BYTES_PEAK.set(self.peak)

    def give(self, size: int) -> None:
        self.held -= size
        BODY_BYTES_IN_FLIGHT.set(self.held)


class BodyDecoder:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        read_timeout: float,
        max_reads: int,
        retry_after: int,
        max_image_body_bytes: int | None = None,
        image_paths: frozenset[str] = frozenset(),
        max_bytes_in_flight: int = 1 << 62,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_image_body_bytes = max_body_bytes if max_image_body_bytes is None else max_image_body_bytes
        self.read_timeout = read_timeout
        self.max_reads = max_reads
        self.retry_after = retry_after
        self.image_paths = image_paths
        self.reading = 0
        self.bytes = HeldBytes(max_bytes_in_flight)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in {"POST", "PUT", "PATCH"}:
            await self.app(scope, receive, send)
            return
        received, held = False, 0
        try:
            data = await self._receive(scope, receive)
            received, held = True, len(data)
            headers = Headers(scope=scope)
            body = await self._decode(
                data, parse_encodings(headers.get("content-encoding")), self._limit(scope, headers)
            )
            held = len(body)
        except OpenJevError as error:
            self.bytes.give(held)
            response = error_response(error, self.retry_after)
            if not received:
                # The rest of the body is not wanted: close rather than drain it for a keep-alive.
                response.headers["Connection"] = "close"
            await response(scope, receive, send)
            return
        del data
        headers = [
            (name, value) for name, value in scope["headers"] if name not in (b"content-encoding", b"content-length")
        ]
        headers.append((b"content-length", str(len(body)).encode()))
        whole = {"type": "http.request", "body": body, "more_body": False}
        del body
        try:
            await self.app({**scope, "headers": headers}, replay(whole, receive), send)
        finally:
            self.bytes.give(held)

    async def _decode(self, data: bytes, encodings: list[str], limit: int) -> bytes:
        """`decode_off_loop` within the room left for body bytes: that room (up to `limit`) is taken
        before decoding and the decoder stops at it; past it, 529 where the body's cap allows more.
        After, the body held is the decoded one: the room not used and the encoded bytes are given back."""
        if not encodings:
            return data
        reserved = min(limit, self.bytes.room())
        self.bytes.take(reserved)
        try:
            body = await decode_off_loop(data, encodings, reserved)
        except HttpError as error:
            self.bytes.give(reserved)
            if error.status == 413 and reserved < limit:
                # Stopped by the room, not by the cap: overload, whatever room other bodies gave back
                # while this one decoded (taking `limit` now could succeed and would never be given).
                raise self.bytes.refusal(limit) from None
            raise
        self.bytes.give(reserved - len(body) + len(data))
        return body

    def _limit(self, scope: Scope, headers: Headers) -> int:
        """The body cap, from the head alone: the image body's on a route whose body may carry images
        (data URLs, assets) and for any multipart body, else the JSON body's."""
        multipart = headers.get("content-type", "").lower().startswith("multipart/form-data")
        return self.max_image_body_bytes if multipart or scope["path"] in self.image_paths else self.max_body_bytes

    async def _receive(self, scope: Scope, receive: Receive) -> bytes:
        """The raw body, after every check that needs only the headers; one of `max_reads` slots is
        held while it arrives, and it must all arrive within `read_timeout` seconds."""
        headers = Headers(scope=scope)
        limit = self._limit(scope, headers)
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _too_large(limit, "size declared in Content-Length")
        parse_encodings(headers.get("content-encoding"))
        if declared is not None and declared.isdigit() and int(declared) > self.bytes.room():
            self.bytes.take(int(declared))  # raises: it cannot fit now
        if self.reading >= self.max_reads:
            raise HttpError(
                529,
                "overloaded",
                f"{self.reading} request bodies are being received "
                f"(OPENJEV_MAX_CONCURRENT_BODY_READS={self.max_reads}); retry shortly",
            )
        self.reading += 1
        try:
            async with asyncio.timeout(self.read_timeout):
                return await self._read_all(receive, limit, self.bytes)
        except TimeoutError:
            raise HttpError(
                408,
                "request_timeout",
                f"the request body did not arrive within OPENJEV_BODY_READ_TIMEOUT={self.read_timeout:g}s",
            ) from None
        finally:
            self.reading -= 1

    @staticmethod
    async def _read_all(receive: Receive, limit: int, held: HeldBytes) -> bytes:
        """The body's pieces, joined once: on a worker thread past INLINE_BYTES (a 9 MB upload's copy
        would hold the loop for milliseconds; `bytes.join` makes it without the GIL). Each piece is
        taken from `held` as it arrives, the join's copy before it is made; what is held after is the
        body's size (else nothing: a refused body gives back all it took)."""
        pieces: list[bytes] = []
        size = 0
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise _undecodable("the client disconnected while sending the body")
                piece = message.get("body", b"")
                held.take(len(piece))
                pieces.append(piece)
                size += len(piece)
                if size > limit:
                    raise _too_large(limit, "sent")
                if not message.get("more_body", False):
                    break
            if size <= INLINE_BYTES:
                return b"".join(pieces)
            held.take(size)
            try:
                return await asyncio.to_thread(b"".join, pieces)
            finally:
                held.give(size)  # the pieces, freed on return
        except BaseException:
            held.give(size)
            raise
