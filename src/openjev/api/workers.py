"""The event loop's worker threads run at a lower CPU priority than the loop's own thread.

`asyncio.to_thread` work (decoding and splitting bodies, joining large ones, preparing images, building
backend calls, preparing large prompts) takes milliseconds to hundreds of milliseconds; the loop's own
work (a `/health/live` probe, admission, a small request) takes a fraction of one. Where that work
keeps every core busy (a few image uploads do on two cores), the kernel shares the cores among
runnable threads alike, so the loop waits for a turn behind them on every wake-up. With the workers
`WORKER_NICENESS` below the loop, it runs as soon as it wakes. The workers lose nothing on an idle
machine, and little of their work holds the GIL (Pillow, zstd, hashing and large `bytes.join` release
it), so a lowered thread seldom holds what the loop waits for.

Linux only, where a thread's niceness is its own (setpriority(2)); elsewhere the pool is a plain one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

#: Niceness the workers add to the loop thread's (Linux caps the sum at 19).
WORKER_NICENESS = 10


def lower_priority() -> None:
    """Make the calling thread `WORKER_NICENESS` nicer than it is (a no-op where it cannot)."""
    thread = threading.get_native_id()
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + WORKER_NICENESS))


def worker_pool() -> ThreadPoolExecutor:
    """The loop's default executor: asyncio's own sizing, the threads lowered on Linux."""
    initializer = lower_priority if sys.platform.startswith("linux") else None
    return ThreadPoolExecutor(thread_name_prefix="openjev-worker", initializer=initializer)


#: Work that holds the GIL throughout (parsing and validating JSON, listing its issues) runs here: on
#: one thread, because such work cannot run two at once anyway and the loop then waits for at most one
#: piece of it; at the loop's own priority, because the loop is waiting for the GIL this thread holds,
#: and a lowered thread holding it is descheduled behind every other busy thread (a priority inversion).
GIL_BOUND = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openjev-gil-bound")


async def gil_bound(work: Callable[[], T]) -> T:
    """`work()` on the GIL_BOUND thread."""
    return await asyncio.get_running_loop().run_in_executor(GIL_BOUND, work)
