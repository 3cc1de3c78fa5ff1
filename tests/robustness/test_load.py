"""Load at twice OPENJEV_MAX_CONCURRENT_REQUESTS against openjev on a fake SGLang with a per-call delay:
every request is answered, only with 200 or 529 + Retry-After, /metrics counts what the clients saw,
and nothing stays in flight."""

from __future__ import annotations

import asyncio
import collections
import re

import httpx
import pytest

from tests.conftest import eventually

pytestmark = [pytest.mark.robustness, pytest.mark.timeout(240)]

MAX_CONCURRENT_REQUESTS = 4
CLIENTS = 2 * MAX_CONCURRENT_REQUESTS
REQUESTS_PER_CLIENT = 60
BODY = {
    "model": "jev-latest",
    "state": "The invoice was paid twice; please refund one payment.",
    "questions": {
        "refund": {"type": "noul", "instructions": "Is a refund requested?"},
        "team": {"type": "choice", "criteria": {"billing": None, "support": None}},
    },
}


COUNTER = re.compile(r'openjev_requests_total\{route="/v1/systemone",status="(\d+)"\} (\S+)')


def requests_by_status(exposition: str) -> collections.Counter[str]:
    return collections.Counter({status: float(value) for status, value in COUNTER.findall(exposition)})


async def client_run(http: httpx.AsyncClient, outcomes: collections.Counter[str], problems: list[str]) -> None:
    for _ in range(REQUESTS_PER_CLIENT):
        try:
            response = await http.post("/v1/systemone", json=BODY)
        except httpx.HTTPError as error:
            outcomes["lost"] += 1
            problems.append(repr(error))
            continue
        outcomes[str(response.status_code)] += 1
        if response.status_code == 529 and not response.headers.get("retry-after"):
            problems.append("529 without Retry-After")


async def load(url: str) -> tuple[collections.Counter[str], list[str]]:
    outcomes: collections.Counter[str] = collections.Counter()
    problems: list[str] = []
    limits = httpx.Limits(max_connections=CLIENTS)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
        await asyncio.gather(*(client_run(http, outcomes, problems) for _ in range(CLIENTS)))
    return outcomes, problems


def test_twice_the_concurrency_limit_is_answered_200_or_529(serve_openjev, fake_sglang, qwen_tokenizer_dir, figures):
    fake_sglang.generate_delay = 0.02
    server = serve_openjev(
        "--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir),
        "--max-concurrent-requests", str(MAX_CONCURRENT_REQUESTS),
    )  # fmt: skip
    before = requests_by_status(httpx.get(f"{server.url}/metrics").text)
    outcomes, problems = asyncio.run(load(server.url))
    after = requests_by_status(httpx.get(f"{server.url}/metrics").text)
    counted = {status: int(after[status] - before[status]) for status in after if after[status] != before[status]}
    sent = CLIENTS * REQUESTS_PER_CLIENT
    answered = sum(count for status, count in outcomes.items() if status != "lost")
    figures(sent=sent, answered=answered, lost=outcomes["lost"], statuses=dict(outcomes), metrics_counted=counted)
    assert problems == [] and answered == sent
    assert set(outcomes) <= {"200", "529"} and outcomes["200"] > 0 and outcomes["529"] > 0, outcomes
    assert counted == dict(outcomes)
    assert eventually(lambda: httpx.get(f"{server.url}/health").json()["in_flight"] == 0, timeout=5)
    assert re.search(r"^openjev_in_flight_requests 0\.0$", httpx.get(f"{server.url}/metrics").text, re.M)
