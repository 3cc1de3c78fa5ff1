"""uvicorn's HTTP/1.1 protocol with a deadline for request headers.

uvicorn closes a connection that stays idle between requests (`timeout_keep_alive`), but any byte
received cancels that timer, and nothing bounds how long the headers of a request may take: a
client that sends one header byte now and then holds its connection for ever (slowloris). Here a
connection must deliver a complete request head within `timeout` seconds of opening, or of the end of
its previous response; the body has its own deadline in `BodyDecoder`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol


class HeadDeadlineH11Protocol(H11Protocol):
    head_timeout: float = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_deadline()

    def handle_events(self) -> None:
        super().handle_events()
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


def h11_protocol(head_timeout: float) -> type[HeadDeadlineH11Protocol]:
    """The protocol class for `uvicorn.Config(http=...)`, with this head deadline."""
    return type("H11WithHeadDeadline", (HeadDeadlineH11Protocol,), {"head_timeout": head_timeout})
