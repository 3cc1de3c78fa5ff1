"""The app's `asyncio.to_thread` work runs on openjev's worker pool, whose threads (on Linux) are
`WORKER_NICENESS` nicer than the event loop's thread."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from openjev.api import create_app, workers
from tests.api.test_routes import InstantBackend, settings_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's niceness is its own on Linux")


def niceness() -> tuple[int, str]:
    """The calling thread's niceness and name."""
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id()), threading.current_thread().name


def test_the_pool_s_threads_are_nicer_than_the_thread_that_made_them() -> None:
    own, _ = niceness()
    with workers.worker_pool() as pool:
        worker, name = pool.submit(niceness).result()
    assert worker == min(19, own + workers.WORKER_NICENESS) and name.startswith("openjev-worker")
    assert niceness()[0] == own  # the caller's own is untouched


def test_the_app_s_work_off_the_loop_runs_on_the_pool(qwen_tokenizer_dir: Path) -> None:
    app = create_app(settings_for(qwen_tokenizer_dir), InstantBackend())

    async def loop_and_worker() -> tuple[tuple[int, str], tuple[int, str]]:
        return niceness(), await asyncio.to_thread(niceness)

    with TestClient(app) as client:
        (loop, _), (worker, name) = client.portal.call(loop_and_worker)
    assert worker == min(19, loop + workers.WORKER_NICENESS) and name.startswith("openjev-worker")


def test_gil_bound_work_runs_on_one_thread_at_the_loop_s_priority() -> None:
    """Work that holds the GIL is not lowered: the loop waits for the GIL it holds."""

    async def loop_and_gil_bound() -> tuple[tuple[int, str], list[tuple[int, str]]]:
        done = await asyncio.gather(*(workers.gil_bound(niceness) for _ in range(4)))
        return niceness(), list(done)

    loop, done = asyncio.run(loop_and_gil_bound())
    assert set(done) == {(loop[0], done[0][1])} and done[0][1].startswith("openjev-gil-bound")
