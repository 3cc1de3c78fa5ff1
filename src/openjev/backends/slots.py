"""The process-wide bound on backend work in flight: OPENJEV_MAX_CONCURRENT_BRANCHES slots.

Contract:
- `async with slots:` holds one slot around one backend call (a readout, a generation).
- `await slots.in_chunks(items, send)` sends readouts that go out together (a batch,
  `Backend.readout_batch`) in the slots that are free: it waits, holding nothing, until one slot is
  free, takes it and every other slot free with nobody else waiting (at most what is left to send),
  sends that many items at once as one chunk, and goes on with the rest the same way while the chunk
  runs. So the bound counts readouts whether they go out alone or together, and no slot is ever held
  idle: a long call elsewhere never makes a batch hold slots that unrelated small requests wait for.
- Waiters are served in arrival order (a single readout never waits behind a batch that holds slots
  and waits for more). Cancelled while waiting, a taker holds nothing; a chunk's slots are given back
  when its call ends, however it ends. The first chunk to fail cancels the others and is raised.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class BackendSlots:
    def __init__(self, size: int) -> None:
        self.size = size
        self._free = asyncio.Semaphore(size)

    async def __aenter__(self) -> None:
        await self._free.acquire()

    async def __aexit__(self, *_: object) -> None:
        self._free.release()

    async def _take(self, most: int) -> int:
        """One slot (waiting for it, holding nothing), then every other one free at once, `most` in all."""
        await self._free.acquire()
        taken = 1
        # `locked()` is also true while others wait: those are served first, in their order.
        while taken < most and not self._free.locked():
            await self._free.acquire()  # free, nobody waiting: returns at once
            taken += 1
        return taken

    def _give(self, count: int) -> None:
        for _ in range(count):
            self._free.release()

    async def in_chunks(
        self, items: Sequence[Item], send: Callable[[Sequence[Item]], Awaitable[list[Result]]]
    ) -> list[Result]:
        """`send`'s answers for every item, in order, each chunk sent in the slots free when it was taken."""
        if not items:
            return []
        taken = await self._take(len(items))
        if taken == len(items):  # the common case, one chunk: sent from this task, no task of its own
            try:
                return await send(items)
            finally:
                self._give(taken)
        return await self._chunked(items, send, taken)

    async def _chunked(
        self, items: Sequence[Item], send: Callable[[Sequence[Item]], Awaitable[list[Result]]], taken: int
    ) -> list[Result]:
        """`in_chunks` past its first chunk of `taken` items, whose slots are held."""
        tasks: list[asyncio.Task[list[Result]]] = []
        try:
            async with asyncio.TaskGroup() as group:
                sent = 0
                while sent < len(items):
                    taken = taken or await self._take(len(items) - sent)
                    try:
                        task = group.create_task(send(items[sent : sent + taken]))
                    except BaseException:
                        self._give(taken)
                        raise
                    # A done callback runs however the task ends, even cancelled before it started.
                    task.add_done_callback(lambda _, count=taken: self._give(count))
                    tasks.append(task)
                    sent, taken = sent + taken, 0
        except* Exception as failures:
            # The first failure, as one call's would be; the other chunks are cancelled (and aborted).
            raise failures.exceptions[0] from None
        return [result for task in tasks for result in task.result()]
