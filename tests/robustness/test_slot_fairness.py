"""Fair backend slots on a running server: one long call beside a request of 64 readouts never makes an
unrelated one-question request wait for the long call (the batch sends what the free slots take and
holds none idle, `backends/slots.py`)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.conftest import eventually

pytestmark = [pytest.mark.robustness, pytest.mark.timeout(120)]

#: How long the fake works on each call of the long request (its prompts are over LONG_PROMPT ids).
SLOW_SECONDS = 8.0
LONG_PROMPT = 1500


def body(state: str, questions: int) -> dict:
    asked = {f"q{index}": {"type": "noul", "instructions": f"Is point {index} true?"} for index in range(questions)}
    return {"model": "jev-latest", "state": state, "questions": asked}


def timed_post(url: str, payload: dict) -> tuple[int, float]:
    started = time.perf_counter()
    response = httpx.post(f"{url}/v1/systemone", json=payload, timeout=60)
    return response.status_code, time.perf_counter() - started


def test_a_long_call_beside_a_64_readout_batch_never_blocks_an_unrelated_small_request(
    openjev_on_fake, fake_sglang, figures
):
    fake_sglang.delay_for = lambda items: SLOW_SECONDS * any(len(item["input_ids"]) > LONG_PROMPT for item in items)
    url = openjev_on_fake.url
    assert timed_post(url, body("A warm start.", 1))[0] == 200
    with ThreadPoolExecutor(3) as pool:
        slow = pool.submit(timed_post, url, body("a long account of events. " * 400, 1))
        assert eventually(lambda: fake_sglang.in_flight >= 1, timeout=10)
        batch = pool.submit(timed_post, url, body("The parcel arrived late and damaged.", 64))
        # The batch has had the time to take its slots before the small request comes.
        time.sleep(1.0)
        small_status, small_seconds = timed_post(url, body("Is the sky blue today?", 1))
        batch_status, batch_seconds = batch.result()
        slow_status, slow_seconds = slow.result()
    figures(
        small_seconds=round(small_seconds, 3),
        batch_seconds=round(batch_seconds, 3),
        slow_seconds=round(slow_seconds, 3),
        slow_call_seconds=SLOW_SECONDS,
    )
    assert (small_status, batch_status, slow_status) == (200, 200, 200)
    assert slow_seconds >= SLOW_SECONDS
    # Neither the small request nor the batch waited for the long call.
    assert small_seconds < SLOW_SECONDS / 4, small_seconds
    assert batch_seconds < SLOW_SECONDS / 2, batch_seconds
