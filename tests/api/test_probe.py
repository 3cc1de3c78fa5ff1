"""`SharedProbe`: one probe in flight however many ask, its answer shared for `ttl` seconds, asked afresh
after `forget()`, and neither a caller that leaves nor a probe that fails leaves it stuck."""

from __future__ import annotations

import asyncio

import pytest

from openjev.api.probe import SharedProbe


class Probe:
    """Counts its calls; each waits for `release` and answers its call number."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = asyncio.Event()
        self.fail = False

    async def __call__(self) -> int:
        self.calls += 1
        call = self.calls
        await self.release.wait()
        if self.fail:
            raise RuntimeError("backend down")
        return call


async def _callers_at_once_share_one_probe_and_its_answer_for_the_ttl() -> None:
    shared, probe = SharedProbe[int](ttl=0.2), Probe()
    waiting = [asyncio.create_task(shared.get(probe)) for _ in range(16)]
    await asyncio.sleep(0.01)
    probe.release.set()
    assert await asyncio.gather(*waiting) == [1] * 16 and probe.calls == 1
    assert await shared.get(probe) == 1  # within the ttl: no probe
    await asyncio.sleep(0.25)
    assert await shared.get(probe) == 2 and probe.calls == 2


async def _forget_makes_the_next_caller_probe_again() -> None:
    shared, probe = SharedProbe[int](ttl=60), Probe()
    probe.release.set()
    assert await shared.get(probe) == 1 and await shared.get(probe) == 1
    shared.forget()
    assert await shared.get(probe) == 2 and probe.calls == 2


async def _a_caller_that_leaves_does_not_cancel_the_probe_others_wait_for() -> None:
    shared, probe = SharedProbe[int](ttl=60), Probe()
    leaving, staying = asyncio.create_task(shared.get(probe)), asyncio.create_task(shared.get(probe))
    await asyncio.sleep(0.01)
    leaving.cancel()
    probe.release.set()
    assert await staying == 1 and probe.calls == 1
    with pytest.raises(asyncio.CancelledError):
        await leaving


async def _a_failed_probe_is_not_shared() -> None:
    shared, probe = SharedProbe[int](ttl=60), Probe()
    probe.fail = True
    probe.release.set()
    with pytest.raises(RuntimeError):
        await shared.get(probe)
    probe.fail = False
    assert await shared.get(probe) == 2 and probe.calls == 2


def test_callers_at_once_share_one_probe_and_its_answer_for_the_ttl() -> None:
    asyncio.run(_callers_at_once_share_one_probe_and_its_answer_for_the_ttl())


def test_forget_makes_the_next_caller_probe_again() -> None:
    asyncio.run(_forget_makes_the_next_caller_probe_again())


def test_a_caller_that_leaves_does_not_cancel_the_probe_others_wait_for() -> None:
    asyncio.run(_a_caller_that_leaves_does_not_cancel_the_probe_others_wait_for())


def test_a_failed_probe_is_not_shared() -> None:
    asyncio.run(_a_failed_probe_is_not_shared())
