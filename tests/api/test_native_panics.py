"""A native library's panic is not an `Exception`: what openjev does with one, and with the input that made
tiktoken panic (a megabyte of spaces in a state, which was a plain-text 500 without a request id).

- Over the fake SGLang: a megabyte of spaces (a 1,000,010-character run) in the state or input is
  answered on every answering route, plain or as a 148-byte zstd body.
- openjev's own middleware stack (as `create_app` orders it) around an application that raises a real
  `pyo3_runtime.PanicException` (tiktoken's, on the same run): a 500 in the route's envelope with the
  request id, counted by route and by exception class.
"""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import tiktoken
from starlette.types import Receive, Scope, Send

from openjev import metrics
from openjev.api.middleware import ANSWERING_PATHS, RequestIdMiddleware, StatusMetricsMiddleware
from openjev.api.openai_errors import OpenAIErrorEnvelope
from openjev.endpoints import DECISIONS_PATH
from tests.conftest import RunningOpenJev, zstd_compress

SPACES = " " * 1_000_010
NOUL = {"type": "noul", "instructions": "Is the state empty?"}
BODIES = {
    "/v1/systemone": {"model": "jev-latest", "state": SPACES, "questions": {"q": NOUL}},
    "/api/alpha/decisions": {"model": "jev-latest", "state": SPACES, "questions": {"q": NOUL}},
    "/v1/decisions": {
        "model": "gpt-6-luna",
        "input": SPACES,
        "questions": [{"type": "predicate", "instructions": "?"}],
    },
}


def test_a_megabyte_of_spaces_is_answered_on_every_answering_route(openjev_on_fake: RunningOpenJev) -> None:
    statuses = {}
    with openjev_on_fake.client(timeout=120) as http:
        for path, body in BODIES.items():
            plain = http.post(path, json=body)
            packed = zstd_compress(json.dumps(body).encode())
            headers = {"content-encoding": "zstd", "content-type": "application/json"}
            compressed = http.post(path, content=packed, headers=headers)
            statuses[path] = (plain.status_code, compressed.status_code, len(packed) < 200)
            assert plain.status_code != 200 or plain.json()["usage"]["input_tokens"] > 7800
    assert statuses == dict.fromkeys(BODIES, (200, 200, True))


async def panicking(scope: Scope, receive: Receive, send: Send) -> None:
    """An application whose preparation panics in native code, as tiktoken did on a megabyte of spaces."""
    encoding = tiktoken.Encoding(
        "panics", pat_str=r"\s+(?!\S)|\S", mergeable_ranks={bytes([b]): b for b in range(256)}, special_tokens={}
    )
    encoding.encode_ordinary(SPACES)
    raise AssertionError("tiktoken did not panic")


def counted(path: str, status: str) -> float:
    return metrics.REGISTRY.get_sample_value("openjev_requests_total", {"route": path, "status": status}) or 0.0


def test_a_native_panic_is_a_500_in_the_routes_envelope_with_its_request_id() -> None:
    stack = StatusMetricsMiddleware(
        OpenAIErrorEnvelope(RequestIdMiddleware(panicking, retry_after=1), paths=frozenset({DECISIONS_PATH}))
    )

    async def post_each() -> dict[str, httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=stack), base_url="http://openjev") as http:
            return {path: await http.post(path, json={}) for path in sorted(ANSWERING_PATHS)}

    before = {path: counted(path, "500") for path in ANSWERING_PATHS}
    panics = metrics.REGISTRY.get_sample_value("openjev_unexpected_errors_total", {"exception": "PanicException"})
    answers = asyncio.run(post_each())
    for path, answer in answers.items():
        assert answer.status_code == 500 and counted(path, "500") == before[path] + 1
        if path == DECISIONS_PATH:
            error = answer.json()["error"]
            assert error["type"] == "internal_error" or error["code"] == "internal_error", error
            request_id = answer.headers["x-request-id"]
        else:
            error = answer.json()["detail"]
            assert error["error_type"] == "internal_error"
            request_id = answer.headers["x-typesafe-request-id"]
        assert re.fullmatch(r"[0-9a-f]{32}", request_id) and request_id in error["message"]
    after = metrics.REGISTRY.get_sample_value("openjev_unexpected_errors_total", {"exception": "PanicException"})
    assert after == (panics or 0.0) + len(ANSWERING_PATHS)
