"""Fits as tenants, on the real app under uvicorn over the fake SGLang: fits read in slots of their own,
so callers are never refused on their account; one fit past OPENJEV_TASK_MAX_FITS is a 529 at post time;
a fit's arithmetic never holds the event loop."""

from __future__ import annotations

import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.api import test_tasks
from tests.api.test_task_fits import follow
from tests.api.test_tasks import EXAMPLES, QUESTION, start

#: The fake SGLang these fits read: test_tasks.py's, letter-biased.
fake = test_tasks.fake
ASKED = {"model": "jev-latest", "state": "Ticket: my parcel is late", "questions": {"q": QUESTION}}


def fit_body(number: int) -> dict:
    """A fit of its own (its examples differ from every other number's)."""
    return {"question": QUESTION, "examples": [{**e, "state": f"{e['state']} (set {number})"} for e in EXAMPLES]}


def caller_statuses(url: str, requests: int) -> list[int]:
    """A well-behaved caller: one request at a time, the next once the last is answered."""
    with httpx.Client(base_url=url, timeout=60) as http:
        return [http.post("/v1/systemone", json=ASKED).status_code for _ in range(requests)]


def test_eight_background_fits_never_make_a_caller_s_request_a_529_and_the_fifth_is_refused_at_post(
    serve_openjev, fake, qwen_tokenizer_dir, tmp_path
):
    """Each fit used to read as many at once as the slots held and nothing capped them: 8 held every
    evaluation slot, and a caller got 529 on most of its requests."""
    server = start(serve_openjev, fake, qwen_tokenizer_dir, tmp_path / "tasks", OPENJEV_TASK_WORKED_EXAMPLES="0")
    fake.generate_delay = 0.2
    with server.client() as http:
        posted = [http.post("/v1/tasks", params={"background": "true"}, json=fit_body(n)) for n in range(8)]
        assert [answer.status_code for answer in posted] == [202] * 4 + [529] * 4, [a.text for a in posted]
        refused = posted[-1]
        assert refused.headers["retry-after"] == "1"
        assert "OPENJEV_TASK_MAX_FITS=4" in refused.json()["detail"]["message"]
        with ThreadPoolExecutor(2) as callers:
            statuses = [status for each in callers.map(caller_statuses, [server.url] * 2, [25] * 2) for status in each]
        assert statuses == [200] * 50
        running = [http.get(f"/v1/tasks/fits/{answer.json()['id']}").json() for answer in posted[:4]]
        assert all(job["status"] == "running" for job in running)  # the fits were reading all along
        caps = http.get("/v1/limits").json()["tasks"]
        assert (caps["max_running_fits"], caps["running_fits"], caps["fit_readouts"]) == (4, 4, 1)
        shown = (caps["max_tasks"], caps["max_examples"], caps["max_task_bytes"], caps["page_bytes"])
        assert shown == (1000, 1000, 1024 * 1024, 1024 * 1024)
        fake.generate_delay = 0.0
        for answer in posted[:4]:
            follow(http, answer.json()["id"], lambda seen: seen["status"] == "done", timeout=300)
        # Room again: a refused fit is taken now.
        assert http.post("/v1/tasks", params={"background": "true"}, json=fit_body(7)).status_code == 202


def live_latencies(url: str, stop: threading.Event) -> list[float]:
    found = []
    with httpx.Client(base_url=url, timeout=30) as http:
        while not stop.is_set():
            started = time.perf_counter()
            http.get("/health/live").raise_for_status()
            found.append(time.perf_counter() - started)
            time.sleep(0.01)
    return found


def test_a_fit_of_a_255_option_choice_never_holds_the_event_loop(serve_openjev, fake, qwen_tokenizer_dir, tmp_path):
    """Its nested cross-validation is seconds of pure Python: on the loop (and on a thread, holding the
    GIL) it kept `/health/live` waiting for seconds (a stall is one late answer, so the longest counts
    too); in a process of its own, p99 stays under 50 ms and none waits a second."""
    server = start(serve_openjev, fake, qwen_tokenizer_dir, tmp_path / "tasks", OPENJEV_TASK_WORKED_EXAMPLES="0")
    options = {f"team {n}": None for n in range(255)}
    question = {"type": "choice", "instructions": "Which team?", "criteria": options}
    examples = [{"state": f"Ticket {i}: parcel {i} went astray", "label": f"team {i % 255}"} for i in range(510)]
    stop = threading.Event()
    with ThreadPoolExecutor(1) as poller, server.client(timeout=600) as http:
        polled = poller.submit(live_latencies, server.url, stop)
        fitted = http.post("/v1/tasks", json={"question": question, "examples": examples})
        stop.set()
        latencies = polled.result()
    assert fitted.status_code == 201, fitted.text
    p99 = statistics.quantiles(latencies, n=100, method="inclusive")[98]
    assert p99 < 0.05 and max(latencies) < 1.0, (p99, max(latencies), len(latencies))
