"""`/health`'s backend probe, shared: however many callers ask at once, one probe is in flight.

Contract: `SharedProbe.get(probe)` returns the answer of a probe that started at most `ttl` seconds
ago, or of the one in flight, and starts one only when there is neither. The probe travels on the
backend's control connections, the few that also carry aborts: a flood of unauthenticated `GET
/health` used to take all four, and a client that left had none of its readouts aborted. Now the
flood costs the backend one probe per `ttl`, whatever its rate. `forget()` drops the shared answer:
a request that found the backend failing makes the next `/health` ask again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")

#: Seconds a probe's answer is shared: `/health` is polled every few seconds by orchestrators.
PROBE_TTL = 1.0


class SharedProbe(Generic[T]):
    def __init__(self, ttl: float = PROBE_TTL) -> None:
        self.ttl = ttl
        self._answer: tuple[float, T] | None = None
        self._in_flight: asyncio.Future[T] | None = None

    async def get(self, probe: Callable[[], Awaitable[T]]) -> T:
        if self._answer is not None and time.monotonic() - self._answer[0] < self.ttl:
            return self._answer[1]
        if self._in_flight is None:
            self._in_flight = asyncio.ensure_future(self._run(probe))
        # A caller that leaves does not cancel the probe the others wait for.
        return await asyncio.shield(self._in_flight)

    def forget(self) -> None:
        self._answer = None

    async def _run(self, probe: Callable[[], Awaitable[T]]) -> T:
        started = time.monotonic()
        try:
            answer = await probe()
        finally:
            self._in_flight = None
        self._answer = (started, answer)
        return answer
