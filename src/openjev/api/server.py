"""uvicorn's HTTP/1.1 protocols with a deadline for request headers.

uvicorn closes a connection that stays idle between requests (`timeout_keep_alive`), but any byte
received cancels that timer, and nothing bounds how long the headers of a request may take: a
client that sends one header byte now and then holds its connection for ever (slowloris). Here a
connection must deliver a complete request head within `timeout` seconds of opening, or of the end of
its previous response; the body has its own deadline in `BodyDecoder`.

`http_protocol` picks uvicorn's httptools protocol (its compiled parser, measured faster in
`benchmarks/sidecar_overhead.py`) and falls back to the pure-Python h11 one where httptools is missing.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol


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


class HeadDeadlineH11Protocol(HeadDeadline, H11Protocol):
    def handle_events(self) -> None:
        super().handle_events()
        self._head_received()


def _httptools_protocol() -> type[Any] | None:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is not installed
        return None

    class HeadDeadlineHttpToolsProtocol(HeadDeadline, HttpToolsProtocol):
        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._head_received()

    return HeadDeadlineHttpToolsProtocol


def http_protocol(head_timeout: float) -> type[HeadDeadline]:
    """The protocol class for `uvicorn.Config(http=...)`, with this head deadline: httptools when
    installed, else h11."""
    base = _httptools_protocol() or HeadDeadlineH11Protocol
    return type(f"{base.__name__}At{head_timeout:g}s", (base,), {"head_timeout": head_timeout})
