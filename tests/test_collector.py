"""The collector kept off large acyclic values (`openjev/collector.py`): paused while a body is parsed,
a fit's values frozen out of its walk while the fit runs, and everything as it was afterwards."""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import threading

import orjson
import pytest

from openjev.api.parsing import parse_body
from openjev.collector import frozen, paused
from openjev.tasks.jobs import FitJobs
from openjev.tasks.schema import TaskRequest


@pytest.fixture(autouse=True)
def collector_restored():
    enabled = gc.isenabled()
    yield
    assert gc.get_freeze_count() == 0
    if enabled:
        gc.enable()


def test_paused_nests_across_threads_and_restores_what_it_found() -> None:
    gc.enable()
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        with paused():
            entered.set()
            release.wait(10)

    other = threading.Thread(target=hold)
    with paused():
        other.start()
        entered.wait(10)
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread still parses
    release.set()
    other.join(10)
    assert gc.isenabled()
    gc.disable()
    with paused():
        pass
    assert not gc.isenabled()  # off before: left off


def test_frozen_until_the_last_holder_leaves() -> None:
    value = [[[]] for _ in range(1000)]
    with frozen():
        assert gc.get_freeze_count() > 0
        with frozen():
            pass
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    assert gc.is_tracked(value)


def nested_fit_body() -> bytes:
    """16 states of 300 lists 50 deep: 240,000 values, within the body's value cap."""
    nested = [functools.reduce(lambda inner, _: [inner], range(49), [])] * 300
    question = {"type": "choice", "instructions": "Which team?", "criteria": {"billing": None, "shipping": None}}
    examples = [{"state": [nested, i], "label": ["billing", "shipping"][i % 2]} for i in range(16)]
    return json.dumps({"question": question, "examples": examples}).encode()


def collections_during(work) -> tuple[object, list[int]]:
    """What `work()` returns, and the generation of each collection started while it ran."""
    started: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.enable()
    gc.collect()
    gc.callbacks.append(count)
    try:
        return work(), started
    finally:
        gc.callbacks.remove(count)


def test_a_body_is_parsed_with_the_collector_paused() -> None:
    body = nested_fit_body()
    parsed, collections = collections_during(lambda: parse_body(body, "application/json", TaskRequest))
    assert parsed.request is not None and len(parsed.request.examples) == 16
    # At most the one young collection the allocations made meanwhile call for, once it is on again;
    # unpaused, building the 240,000 lists runs hundreds, each walking the young value so far.
    assert len(collections) <= 1 and gc.isenabled()
    _, unpaused = collections_during(lambda: orjson.loads(body))
    assert len(unpaused) > 100


def test_a_fit_s_values_are_frozen_while_it_runs(tmp_path) -> None:
    async def scenario() -> tuple[int, int]:
        jobs = FitJobs(tmp_path, max_running=2, answer_settings={})
        reading, finish = asyncio.Event(), asyncio.Event()
        seen = []

        async def run(kept, progress):
            reading.set()
            await finish.wait()
            seen.append(gc.get_freeze_count())
            return {"id": "task"}

        job = jobs.start("task_" + "0" * 24, run)
        await reading.wait()
        during = gc.get_freeze_count()
        finish.set()
        await job.task
        assert job.status == "done"
        return during, seen[0]

    during, at_end = asyncio.run(scenario())
    assert during > 0 and at_end > 0
    assert gc.get_freeze_count() == 0


def test_the_collector_walks_no_frozen_value() -> None:
    """What the collector walks is what `gc.get_objects` lists: a frozen value is not among it, and is again after."""
    value = [[[i]] for i in range(1000)]

    def walked() -> bool:
        return any(each is value for each in gc.get_objects())

    assert walked()
    with frozen():
        assert not walked()
    assert walked()
