"""uvicorn's HTTP/1.1 protocols with a deadline for request headers.

uvicorn closes a connection that stays idle between requests (`timeout_keep_alive`), but any byte
received cancels that timer, and nothing bounds how long the headers of a request may take: a
client that sends one header byte now and then holds its connection for ever (slowloris). Here a
connection must deliver a complete request head within `timeout` seconds of opening, or of the end of
its previous response; the body has its own deadline in `BodyDecoder`.

Heads are bounded in size too, before any parser sees them (`HeadBounds`): a request line and headers
of more than `MAX_HEAD_BYTES` bytes or `MAX_HEAD_LINES` lines get a 431 and the connection is closed,
before the key, the route or the body is looked at. httptools keeps every header it parses and h11
(at uvicorn's settings) only the bytes it has not parsed, so the count is made here, on the bytes
received, the same for both: 10M header lines (80 MB) from one connection once took the server from
300 MB to 1.5 GB and held its event loop 3 s.

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
REFUSAL_431 = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_TOO_LARGE), _TOO_LARGE)
)


class HeadDeadline:
    """Mixin for a uvicorn HTTP protocol: close a connection whose request head is late.
    The protocol provides `loop`, `transport` and `cycle` (the current request's, None before one)."""

    head_timeout: float = 30.0
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)  # type: ignore[misc]
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)  # type: ignore[misc]

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if not self.transport.is_closing():
            self._arm_head_deadline()

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


class HeadBounds(HeadDeadline):
    """A request head over `MAX_HEAD_BYTES` or `MAX_HEAD_LINES` is a 431 before the parser is fed the
    bytes that pass a bound (module doc). Counted on the bytes received from the connection's start, or
    from the end of the previous exchange (its response sent and its body received), up to the blank
    line that ends the head; what follows in the same read is the body."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._start_head()
        self._refused = False

    def _start_head(self) -> None:
        self._awaiting_head = True
        self._head_bytes = self._head_lines = 0
        self._head_tail = b""  # the last bytes of the head so far: its end may straddle two reads

    def _head_received(self) -> None:
        super()._head_received()
        self._awaiting_head = False

    def _exchange_done(self) -> None:
        """The head of the next request starts once the response is sent and the body received."""
        if self.cycle is not None and self.cycle.response_complete and not self.cycle.more_body:
            self._start_head()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # read and dropped until the linger ends
        if self._awaiting_head:
            seen = self._head_tail + data
            end = _HEAD_END.search(seen)
            head = data if end is None else data[: max(0, end.end() - len(self._head_tail))]
            self._head_bytes += len(head)
            self._head_lines += head.count(b"\n")
            if self._head_bytes > MAX_HEAD_BYTES or self._head_lines > MAX_HEAD_LINES:
                self._refuse_head()
                return
            self._head_tail = seen[-3:]
        super().data_received(data)  # type: ignore[misc]

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._exchange_done()

    def _refuse_head(self) -> None:
        self._refused = True
        self._disarm_head_deadline()
        self.transport.write(REFUSAL_431)
        self.loop.call_later(LINGER_SECONDS, self.transport.close)


class HeadDeadlineH11Protocol(HeadBounds, H11Protocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # h11's own bound (16 KiB by default, then a 400) sits above ours: past `MAX_HEAD_BYTES` the bytes
        # never reach it, and it holds at most one read (asyncio reads 256 KiB at a time) beyond.
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES + 1024 * 1024)

    def handle_events(self) -> None:
        super().handle_events()
        if self._request_in_progress():
            self._head_received()
        self._exchange_done()


def _httptools_protocol() -> type[Any] | None:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is not installed
        return None

    class HeadDeadlineHttpToolsProtocol(HeadBounds, HttpToolsProtocol):
        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._head_received()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._exchange_done()

    return HeadDeadlineHttpToolsProtocol


def http_protocol(head_timeout: float) -> type[HeadBounds]:
    """The protocol class for `uvicorn.Config(http=...)`, with this head deadline: httptools when
    installed, else h11."""
    base = _httptools_protocol() or HeadDeadlineH11Protocol
    return type(f"{base.__name__}At{head_timeout:g}s", (base,), {"head_timeout": head_timeout})
