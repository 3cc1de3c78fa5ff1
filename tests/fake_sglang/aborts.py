"""How a request on the fake ends early: `/abort_request` with its exact rid, or its client gone.

SGLang's TokenizerManager looks at a waiting request's connection every few seconds (the Python
frontend's `SGLANG_REQUEST_STATE_WAIT_TIMEOUT`, 4 s) and aborts it once the client has closed it; the
Rust frontend notices at once. Every request of a list-form `/generate` shares its connection, so a
closed connection aborts them all; `/abort_request` aborts only the rid it names.
"""

from __future__ import annotations

import asyncio
import time

from starlette.requests import Request


async def work_until_aborted(
    request: Request, events: dict[str, asyncio.Event], seconds: float, check: float
) -> tuple[set[str], list[str]]:
    """Work for `seconds`: the rids aborted meanwhile, and those of them that a closed connection
    aborted (every rid not aborted before it)."""
    deadline = time.monotonic() + seconds
    aborted = {rid for rid, event in events.items() if event.is_set()}
    while (left := deadline - time.monotonic()) > 0 and len(aborted) < len(events):
        waiting = [asyncio.ensure_future(event.wait()) for rid, event in events.items() if rid not in aborted]
        done, pending = await asyncio.wait(waiting, timeout=min(check, left), return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        aborted |= {rid for rid, event in events.items() if event.is_set()}
        if not done and await request.is_disconnected():
            return set(events), [rid for rid in events if rid not in aborted]
    return aborted, []
