"""uvicorn's HTTP/1.1 protocols with every state a connection can hold bounded in bytes and time.

Bounds, per connection (each kept before more is read or parsed):
- Head size: a request line and headers of more than `MAX_HEAD_BYTES` bytes or `MAX_HEAD_LINES` lines
  get a 431 and the connection is closed, before the key, the route or the body is looked at. The
  count is made on the bytes received (httptools keeps every header it parses, h11 the bytes it has
  not parsed), and restarts when the parser ends the previous message, not when its response is sent:
  a head pipelined behind a response the client does not read is counted as it arrives (10M header
  lines once took 1.15 GB that way). With httptools, every header the parser reports is counted per
  message, chunked trailers included, and no more than `MAX_HEAD_BYTES` (plus one read, 256 KiB) are
  fed to it without a body byte or a message end in between: a trailer or chunk extension that grows
  without end is refused as a head is (h11 bounds each incomplete event itself).
- Unread bodies: a response to a request whose body was not received to its end (answered before it,
  e.g. a 401 or a 529) ends the connection: further bytes are read and dropped for `LINGER_SECONDS`,
  then it is closed; its body is never parsed as the next request.
- Time: a connection must deliver a complete head within `timeout` seconds of opening, or of its
  previous response's end (uvicorn's keep-alive timer is cancelled by any byte, so a client sending one
  header byte now and then held its connection for ever); the body has its own deadline in
  `BodyDecoder`; a response the client stops reading (the transport's buffer full) is dropped after
  `timeout` seconds without progress; a refused or unread-body connection lingers `LINGER_SECONDS`.
- Count: at most `max_connections` open (`OPENJEV_MAX_CONNECTIONS`). A connection over it closes the
  oldest one still waiting for its first head byte or head end (no request in progress), so a fresh
  client is served while dribbling clients hold the rest; of the ROOM_SCAN oldest waiting, one that
  began a head goes before one idle between requests (a keep-alive client). Where none is waiting,
  the new one gets a 529 (with Retry-After) and is closed.

`http_protocol` picks uvicorn's httptools protocol (its compiled parser, measured faster in
`benchmarks/sidecar_overhead.py`) and falls back to the pure-Python h11 one where httptools is missing.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from openjev.api.middleware import DECISIONS_PATH
from openjev.api.openai_errors import envelope
from openjev.request.schema import error_body

#: Bytes of one request head (request line and headers) at most; the SDKs send under 1 KiB.
MAX_HEAD_BYTES = 64 * 1024
#: Lines of one request head at most, the blank line that ends it included: the request line and up to
#: 254 headers (Node allows 2000 headers, nginx 32 KiB of them).
MAX_HEAD_LINES = 256
#: How long a refused connection's further bytes are read and dropped before it is closed: closing at
#: once with bytes unread would reset it, and the client could lose the 431 it was sent.
LINGER_SECONDS = 1.0
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_TOO_LARGE = json.dumps(
    error_body(
        "request_header_fields_too_large",
        f"the request head exceeds {MAX_HEAD_BYTES} bytes or {MAX_HEAD_LINES} lines (request line and headers)",
    )
).encode()
_TOO_LARGE_OPENAI = json.dumps(
    envelope(
        json.loads(_TOO_LARGE)["detail"]["message"], "invalid_request_error", None, "request_header_fields_too_large"
    )
).encode()


def _refusal_431(body: bytes) -> bytes:
    return (
        b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
    )


#: The 431, in the envelope of the route the request line names (OpenAI's on `/v1/decisions`).
REFUSAL_431 = _refusal_431(_TOO_LARGE)
REFUSAL_431_OPENAI = _refusal_431(_TOO_LARGE_OPENAI)
_REQUEST_LINE = re.compile(rb"[A-Z]+ /")
_OPENAI_REQUEST_LINE = re.compile(rb"[A-Z]+ %s[?# ]" % re.escape(DECISIONS_PATH.encode()))
_BUSY = json.dumps(error_body("overloaded", "too many open connections; retry shortly")).encode()
REFUSAL_529 = (
    b"HTTP/1.1 529 Overloaded\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_BUSY), _BUSY)
)


class HeadDeadline:
    """Mixin for a uvicorn HTTP protocol: close a connection whose request head is late, or whose
    response the client stopped reading (module doc). The protocol provides `loop`, `transport`,
    `cycle` (the current request's, None before one) and `flow`."""

    head_timeout: float = 30.0
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)  # type: ignore[misc]
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        if self._write_deadline is not None:
            self._write_deadline.cancel()
        super().connection_lost(exc)  # type: ignore[misc]

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if not self.transport.is_closing():
            self._arm_head_deadline()

    def pause_writing(self) -> None:
        super().pause_writing()  # type: ignore[misc]
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self.head_timeout, self.transport.abort)

    def resume_writing(self) -> None:
        super().resume_writing()  # type: ignore[misc]
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _head_received(self) -> None:
        """Called by the protocol once it has parsed a request head."""
        if self._request_in_progress():
            self._disarm_head_deadline()

    def _request_in_progress(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _arm_head_deadline(self) -> None:
        self._disarm_head_deadline()
        self._head_deadline = self.loop.call_later(self.head_timeout, self._head_too_slow)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if not self._request_in_progress() and not self.transport.is_closing():
            self.transport.close()


#: Connections waiting for a head looked at, oldest first, for one that began its head (module doc).
ROOM_SCAN = 64


class HeadBounds(HeadDeadline):
    """A request head over `MAX_HEAD_BYTES` or `MAX_HEAD_LINES` is a 431 before the parser is fed the
    bytes that pass a bound (module doc). Counted on the bytes received from the connection's start, or
    from the end of the previous message, up to the blank line that ends the head; what follows in the
    same read is the body. Also: the unread-body close and the connection count (module doc)."""

    #: Connections open at most (module doc); None: no bound.
    max_connections: int | None = None
    connections: set[Any]
    server_state: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._start_head()
        self._refused = False
        self._by_age: dict[HeadBounds, None] = {}
        #: Whether the last request line named a route answering in OpenAI's envelope (the 431's).
        self._openai_route = False

    def _start_head(self) -> None:
        self._awaiting_head = True
        self._head_bytes = self._head_lines = 0
        self._head_start = b""  # the request line's start, for the refusal's envelope
        self._head_tail = b""  # the last bytes of the head so far: its end may straddle two reads

    def _head_received(self) -> None:
        super()._head_received()
        self._awaiting_head = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # The server's connections in the order they opened (a dict keeps it), shared through uvicorn's
        # server state: the oldest waiting one is found from the front, not by a scan of them all per
        # connection (600 dribbled connections past a limit of 200 were 80,000 checks).
        self._by_age: dict[HeadBounds, None] = self.server_state.__dict__.setdefault("openjev_by_age", {})
        self._by_age[self] = None
        if self.max_connections is not None and len(self.connections) > self.max_connections:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self._by_age.pop(self, None)
        super().connection_lost(exc)

    def _make_room(self) -> None:
        """Close the oldest connection waiting for a head, or refuse this one (module doc)."""
        waiting = (other for other in self._by_age if other is not self and other._idle() and not other._refused)
        oldest = first_idle = None
        # A head begun and never ended goes before a client idle between requests (a keep-alive connection
        # sends nothing until its next request), among the oldest ROOM_SCAN waiting: a bounded look.
        for seen, other in enumerate(waiting):
            first_idle = first_idle or other
            if other._head_bytes or seen + 1 >= ROOM_SCAN:
                oldest = other if other._head_bytes else first_idle
                break
        oldest = oldest or first_idle
        if oldest is not None:
            oldest._refused = True
            oldest.transport.close()
        else:
            self._refused = True
            self.transport.write(REFUSAL_529)
            self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def _idle(self) -> bool:
        return self._awaiting_head and not self._request_in_progress() and not self.transport.is_closing()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # read and dropped until the linger ends
        if self._awaiting_head:
            seen = self._head_tail + data
            end = _HEAD_END.search(seen)
            head = data if end is None else data[: max(0, end.end() - len(self._head_tail))]
            if len(self._head_start) < 64:
                self._head_start += head[: 64 - len(self._head_start)]
                # A head read from its middle on (pipelined) keeps the previous request's route.
                if _REQUEST_LINE.match(self._head_start.lstrip()):
                    self._openai_route = _OPENAI_REQUEST_LINE.match(self._head_start.lstrip()) is not None
            self._head_bytes += len(head)
            self._head_lines += head.count(b"\n")
            if self._head_bytes > MAX_HEAD_BYTES or self._head_lines > MAX_HEAD_LINES:
                self._refuse_head()
                return
            self._head_tail = seen[-3:]
        super().data_received(data)  # type: ignore[misc]

    def on_response_complete(self) -> None:
        unread = self.cycle is not None and self.cycle.more_body
        super().on_response_complete()
        if unread and not self.transport.is_closing():
            self._drop_connection()

    def _message_done(self) -> None:
        """The parser ended a message: the bytes after it are the next head's."""
        self._start_head()

    def _refuse_head(self) -> None:
        """A 431 where no response has started, else the connection dropped; a request in progress is
        told its client left (its later response is not written)."""
        if self._request_in_progress():
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        if self.cycle is not None and self.cycle.response_started and not self.cycle.response_complete:
            self._refused = True
            self.transport.abort()
            return
        self.transport.write(REFUSAL_431_OPENAI if self._openai_route else REFUSAL_431)
        self._drop_connection()

    def _drop_connection(self) -> None:
        self._refused = True
        self._disarm_head_deadline()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)


class HeadDeadlineH11Protocol(HeadBounds, H11Protocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # h11's own bound (16 KiB by default, then a 400) sits above ours: past `MAX_HEAD_BYTES` the bytes
        # never reach it, and it holds at most one read (asyncio reads 256 KiB at a time) beyond. It bounds
        # trailers too: they are one incomplete event until their blank line.
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES + 1024 * 1024)

    def handle_events(self) -> None:
        super().handle_events()
        if self._request_in_progress():
            self._head_received()
        if self.cycle is not None and not self.cycle.more_body and not self._awaiting_head:
            self._message_done()


def _httptools_protocol() -> type[Any] | None:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is not installed
        return None

    class HeadDeadlineHttpToolsProtocol(HeadBounds, HttpToolsProtocol):
        """Counts every header the parser reports per message, trailers included, and the bytes fed
        with no body byte or message end in between (module doc)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._message_headers = self._message_header_bytes = self._unprogressed = 0

        def data_received(self, data: bytes) -> None:
            self._unprogressed += len(data)
            super().data_received(data)
            if self._unprogressed > MAX_HEAD_BYTES and not self._refused and not self._awaiting_head:
                self._refuse_head()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._message_headers = self._message_header_bytes = 0

        def on_header(self, name: bytes, value: bytes) -> None:
            self._message_headers += 1
            self._message_header_bytes += len(name) + len(value) + 4
            if self._message_headers >= MAX_HEAD_LINES or self._message_header_bytes > MAX_HEAD_BYTES:
                if not self._refused:
                    self._refuse_head()
                return
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._unprogressed = 0
            super().on_headers_complete()
            self._head_received()

        def on_body(self, body: bytes) -> None:
            self._unprogressed = 0
            super().on_body(body)

        def on_message_complete(self) -> None:
            self._unprogressed = 0
            super().on_message_complete()
            self._message_done()

    return HeadDeadlineHttpToolsProtocol


def http_protocol(head_timeout: float, max_connections: int | None = None) -> type[HeadBounds]:
    """The protocol class for `uvicorn.Config(http=...)`, with this head deadline and connection bound:
    httptools when installed, else h11."""
    base = _httptools_protocol() or HeadDeadlineH11Protocol
    bounds = {"head_timeout": head_timeout, "max_connections": max_connections}
    return type(f"{base.__name__}At{head_timeout:g}s", (base,), bounds)
