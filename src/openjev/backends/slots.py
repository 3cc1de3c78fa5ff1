"""The process-wide bound on backend work in flight: OPENJEV_MAX_CONCURRENT_BRANCHES slots.

Contract:
- `async with slots:` holds one slot around one backend call (a readout, a generation).
- `async with slots.held(n):` holds `n` slots around one call that carries `n` readouts (a batch,
  `Backend.readout_batch`), so the bound counts readouts whether they go out alone or together;
  `n` is at most `size` (a caller cuts larger batches into chunks of `size`).
- Takers of several slots take them one after another (a lock): none holds part of its slots while
  another such taker holds the rest, so two batches never wait on each other forever, and a taker of
  one slot never waits for anything while holding it. Cancelled while taking, a taker releases what
  it took.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class BackendSlots:
    def __init__(self, size: int) -> None:
        self.size = size
        self._free = asyncio.Semaphore(size)
        self._several = asyncio.Lock()

    async def __aenter__(self) -> None:
        await self._free.acquire()

    async def __aexit__(self, *_: object) -> None:
        self._free.release()

    @contextlib.asynccontextmanager
    async def held(self, count: int) -> AsyncIterator[None]:
        if not 1 <= count <= self.size:
            raise ValueError(f"{count} slots asked of {self.size}")
        taken = 0
        try:
            if count == 1:
                await self._free.acquire()
                taken = 1
            else:
                async with self._several:
                    for _ in range(count):
                        await self._free.acquire()
                        taken += 1
            yield
        finally:
            for _ in range(taken):
                self._free.release()
