"""ASGI middleware for request bodies: bounded size, gzip/zstd decoded (`body_decoding.py`), no surprises.

Contract, for every request that carries a body (`Door` let through only those a route will answer):
- more than its cap on the wire -> 413, decided from Content-Length when present and while reading
  otherwise; the rest of the body is never read into memory. The cap is decided from the head: a
  route whose body may carry images (`image_paths`: the answering routes, whose data URLs and assets
  are images) and any `multipart/form-data` body get `max_image_body_bytes`, others `max_body_bytes`;
- `Content-Encoding` identity, gzip (also x-gzip) or zstd, one layer at most (415 naming
  Content-Encoding for two), is decoded with a hard output cap of the same cap -> 413 past it, so a
  compression bomb costs at most that much; any other coding -> 415; a body that does not decode, or
  holds more than MAX_MEMBERS gzip members or zstd frames -> 400;
- at most `max_reads` bodies arrive at once, each within `read_timeout` seconds (408 past it). One
  more, with every slot taken, ends the slowest read (fewest bytes a second) of those that have
  held their slot at least SLOT_GRACE seconds (408 naming the slots, its connection closed), and
  takes its slot; where none is that old, it is a 529 before a byte is read. So slow bodies hold
  the slots only until a new body comes, never a caller out until their deadline: a body sent with
  its head arrives within the grace, a large upload arriving at speed outlasts bodies sent a few
  bytes at a time, and a refused slow one cost its sender a connection. An answer given before the
  whole body arrived closes the connection, so a slow or unwanted body is never drained.
- the body bytes held at once, all requests together, stay within `max_bytes_in_flight`
  (OPENJEV_MAX_BODY_BYTES_IN_FLIGHT, `HeldBytes`): each piece as it arrives, the joined body, the
  decoded body (its room reserved before decoding, so decoding stops where the room ends), held until
  the route has answered. A body that would pass the bound is refused with 529 and Retry-After (before
  a byte is read when its Content-Length says so), the connection closed; /metrics shows the bytes
  held (`openjev_body_bytes_in_flight`) and their peak.
Bodies in transit hold at most `max_reads` x the larger cap, and all bodies `max_bytes_in_flight`.
Decoding is `body_decoding.py`'s, bounded by work, not output. A body that arrives as more than
INLINE_BYTES is joined from its pieces on a worker thread.
Downstream sees the decoded body, no Content-Encoding and a matching Content-Length; after the body,
`receive` is the server's own, so the endpoint can still notice a client disconnect.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openjev.api.body_decoding import INLINE_BYTES, decode_off_loop, parse_encodings, too_large, undecodable
from openjev.api.errors import HttpError, error_response
from openjev.errors import OpenJevError
from openjev.metrics import BODY_BYTES_IN_FLIGHT, BODY_BYTES_PEAK

#: Seconds a body read holds its slot before a new body, finding every slot taken, may end it.
SLOT_GRACE = 1.0


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


@dataclass(eq=False)
class BodyRead:
    """A body being received: when it took its slot, the bytes received so far, and its deadline
    (brought forward to end it)."""

    started: float
    deadline: asyncio.Timeout
    received: int = 0
    ended_for_room: bool = False

    def rate(self, now: float) -> float:
        """Bytes a second since it took its slot."""
        return self.received / max(now - self.started, 1e-9)


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
        self.reads: list[BodyRead] = []
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
        held while it arrives (one held SLOT_GRACE seconds may be ended for it), and it must all
        arrive within `read_timeout` seconds."""
        headers = Headers(scope=scope)
        limit = self._limit(scope, headers)
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise too_large(limit, "size declared in Content-Length")
        parse_encodings(headers.get("content-encoding"))
        if declared is not None and declared.isdigit() and int(declared) > self.bytes.room():
            self.bytes.take(int(declared))  # raises: it cannot fit now
        if len(self.reads) >= self.max_reads and not self._end_slowest_read():
            raise HttpError(
                529,
                "overloaded",
                f"{len(self.reads)} request bodies are being received "
                f"(OPENJEV_MAX_CONCURRENT_BODY_READS={self.max_reads}); retry shortly",
            )
        read: BodyRead | None = None
        try:
            async with asyncio.timeout(self.read_timeout) as deadline:
                read = BodyRead(asyncio.get_running_loop().time(), deadline)
                self.reads.append(read)
                return await self._read_all(receive, limit, self.bytes, read)
        except TimeoutError:
            raise self._timed_out(read) from None
        finally:
            if read in self.reads:
                self.reads.remove(read)

    def _end_slowest_read(self) -> bool:
        """Ends the slowest read (fewest bytes a second) of those that have held their slot SLOT_GRACE
        seconds or more, so a large upload arriving at speed outlasts a body sent a few bytes at a time:
        its deadline brought to now, its slot free at once (it ends at the loop's next turn). False
        where every read is younger: the slots are busy, not held."""
        now = asyncio.get_running_loop().time()
        past_grace = [read for read in self.reads if now - read.started >= SLOT_GRACE]
        if not past_grace:
            return False
        slowest = min(past_grace, key=lambda read: read.rate(now))
        slowest.ended_for_room = True
        self.reads.remove(slowest)
        slowest.deadline.reschedule(now)
        return True

    def _timed_out(self, read: BodyRead | None) -> HttpError:
        if read is not None and read.ended_for_room:
            return HttpError(
                408,
                "request_timeout",
                f"the request body was still arriving after {SLOT_GRACE:g}s while all "
                f"OPENJEV_MAX_CONCURRENT_BODY_READS={self.max_reads} body slots were taken; it was ended to make "
                "room for another",
            )
        return HttpError(
            408,
            "request_timeout",
            f"the request body did not arrive within OPENJEV_BODY_READ_TIMEOUT={self.read_timeout:g}s",
        )

    @staticmethod
    async def _read_all(receive: Receive, limit: int, held: HeldBytes, read: BodyRead) -> bytes:
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
                    raise undecodable("the client disconnected while sending the body")
                piece = message.get("body", b"")
                held.take(len(piece))
                pieces.append(piece)
                size += len(piece)
                read.received = size
                if size > limit:
                    raise too_large(limit, "sent")
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
