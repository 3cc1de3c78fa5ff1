"""The bounds the issues name, on the running server (openjev under uvicorn on the fake SGLang) and on all
three answering routes: an error body lists at most MAX_LISTED_ISSUES issues within LISTED_BYTES bytes of JSON,
then one `too_many_errors` entry counting them all; a body in two Content-Encoding layers is a 415 and one
of more than MAX_MEMBERS gzip members or zstd frames a 400; `openjev_requests_total` counts each answer
under its route and status."""

from __future__ import annotations

import gzip
import json
import re
from typing import Any

import httpx
import pytest
import zstandard

from openjev.api.body_decoding import MAX_MEMBERS
from openjev.api.errors import LISTED_BYTES, MAX_LISTED_ISSUES
from openjev.errors import json_bytes
from openjev.examples import support_ticket

SYSTEM_ONE, DECISIONS, OPENROUTER = "/v1/systemone", "/v1/decisions", "/api/alpha/decisions"
ROUTES = [SYSTEM_ONE, DECISIONS, OPENROUTER]
JSON = {"content-type": "application/json"}
#: Bytes an error body may take at most.
ERROR_BODY_BYTES = 64 * 1024
PREDICATE = [{"type": "predicate", "instructions": "Is the parcel late?"}]


def valid(path: str) -> dict[str, Any]:
    if path == DECISIONS:
        return {"model": "gpt-6-luna", "input": "The parcel came late.", "questions": PREDICATE}
    return support_ticket()


def many_issues(path: str, long_ids: bool = False) -> dict[str, Any]:
    """A request with hundreds of invalid questions (or inputs), each an issue of its own."""
    if path == DECISIONS:
        return {**valid(path), "input": [1] * 3000}
    if long_ids:  # two keys of 5,000 characters in each location: about 1,100 characters an entry once clipped
        long = {f"{'q' * 5000}{i}": {"type": "choice", "criteria": {f"{'x' * 5000}{i}": i}} for i in range(900)}
        return {**valid(path), "questions": long}
    return {**valid(path), "questions": {f"q{i}": {"type": "choice", "criteria": i} for i in range(900)}}


def counted(http: httpx.Client, path: str, status: int) -> float:
    exposition = http.get("/metrics").text
    found = re.search(rf'openjev_requests_total\{{route="{re.escape(path)}",status="{status}"\}} (\S+)', exposition)
    return float(found.group(1)) if found else 0.0


@pytest.mark.parametrize(
    ("path", "long_ids"),
    [*((path, False) for path in ROUTES), (SYSTEM_ONE, True), (OPENROUTER, True)],  # OpenAI's questions: a list
)
def test_an_error_body_lists_the_first_issues_and_counts_them_all(http, path, long_ids) -> None:
    status = 400 if path == DECISIONS else 422
    before = counted(http, path, status)
    answer = http.post(path, json=many_issues(path, long_ids))
    assert answer.status_code == status and len(answer.content) < ERROR_BODY_BYTES, (answer.status_code, answer.text)
    assert counted(http, path, status) == before + 1
    if path == DECISIONS:  # OpenAI's envelope: one message, the count of the rest in it
        assert re.search(r"more issues not listed \(\d+ in all\)", answer.json()["error"]["message"])
        return
    *issues, last = answer.json()["detail"]
    assert 1 <= len(issues) <= MAX_LISTED_ISSUES and all(issue["type"] != "too_many_errors" for issue in issues)
    assert sum(map(json_bytes, issues[1:])) <= LISTED_BYTES
    assert last["type"] == "too_many_errors" and last["ctx"]["count"] >= 900 > len(issues)
    if long_ids:  # the text bound stops the list first
        assert len(issues) < MAX_LISTED_ISSUES


def layered(path: str, coding: str, parts: int) -> bytes:
    """The route's valid request, cut into `parts` gzip members or zstd frames."""
    raw = json.dumps(valid(path)).encode()
    step = -(-len(raw) // parts)
    compress = gzip.compress if coding == "gzip" else zstandard.ZstdCompressor().compress
    pieces = [compress(raw[i : i + step]) for i in range(0, len(raw), step)]
    return b"".join(pieces + [compress(b"")] * (parts - len(pieces)))


def message_of(answer: httpx.Response, path: str) -> str:
    body = answer.json()
    return body["error"]["message"] if path == DECISIONS else body["detail"]["message"]


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
@pytest.mark.parametrize("path", ROUTES)
def test_members_or_frames_past_the_cap_are_a_400_and_up_to_it_decode(http, path, coding) -> None:
    headers = {**JSON, "content-encoding": coding}
    answered = counted(http, path, 200)
    assert http.post(path, content=layered(path, coding, MAX_MEMBERS), headers=headers).status_code == 200
    assert counted(http, path, 200) == answered + 1
    before = counted(http, path, 400)
    answer = http.post(path, content=layered(path, coding, MAX_MEMBERS + 1), headers=headers)
    assert answer.status_code == 400 and "members or frames" in message_of(answer, path), answer.text
    assert counted(http, path, 400) == before + 1


@pytest.mark.parametrize("header", ["gzip, gzip", "zstd, gzip"])
@pytest.mark.parametrize("path", ROUTES)
def test_two_content_encoding_layers_are_a_415(http, path, header) -> None:
    raw = json.dumps(valid(path)).encode()
    data = (
        gzip.compress(gzip.compress(raw))
        if header == "gzip, gzip"
        else gzip.compress(zstandard.ZstdCompressor().compress(raw))
    )
    before = counted(http, path, 415)
    answer = http.post(path, content=data, headers={**JSON, "content-encoding": header})
    assert answer.status_code == 415 and "Content-Encoding" in message_of(answer, path), answer.text
    assert counted(http, path, 415) == before + 1
