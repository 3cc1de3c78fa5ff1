"""Error bodies at most 64 KiB in serialized bytes, whatever the request held, on the running server (openjev
under uvicorn on the fake SGLang), on all three answering routes and both envelopes: lone surrogates
under a 1.5M-character key (once a 1,500,133-byte 422), 900 question ids of control characters (each
6 bytes of JSON: once a 168,846-byte 422), long keys, many entries, a long model name."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.test_error_bounds import DECISIONS, ROUTES, valid

#: Bytes an error body may take at most.
ERROR_BODY_BYTES = 64 * 1024
LONG = "k" * 1_500_000
CONTROL = "".join(chr(c) for c in range(1, 32))


def questions(path: str, ids: list[str], question: dict[str, Any]) -> Any:
    if path == DECISIONS:
        return [{**question, "name": name} for name in ids]
    return dict.fromkeys(ids, question)


def bodies(path: str) -> dict[str, str]:
    """Each input as raw JSON text (a lone surrogate cannot be written by `json.dumps` from a str)."""
    kind = "predicate" if path == DECISIONS else "noul"
    surrogate = {"type": kind, "instructions": "SURROGATE"}
    bad = {"type": kind, "instructions": 1}
    return {
        "surrogate_under_long_key": json.dumps({**valid(path), "questions": questions(path, [LONG], surrogate)}),
        "surrogate_long_unknown_field": json.dumps({**valid(path), LONG + "SURROGATE": 1}),
        "control_character_ids": json.dumps(
            {**valid(path), "questions": questions(path, [CONTROL * 17 + str(i) for i in range(900)], bad)}
        ),
        "surrogate_ids": json.dumps(
            {**valid(path), "questions": questions(path, ["SURROGATE" * 600 + str(i) for i in range(900)], bad)}
        ),
        "long_model": json.dumps({**valid(path), "model": CONTROL * 50_000}),
        "many_long_entries": json.dumps(
            {**valid(path), "questions": questions(path, [LONG[:5000] + str(i) for i in range(300)], bad)}
        ),
    }


@pytest.mark.parametrize("path", ROUTES)
def test_every_error_body_fits_64_kib_in_bytes(http, path) -> None:
    sizes = {}
    for name, text in bodies(path).items():
        raw = text.replace("SURROGATE", "\\ud800").encode()
        answer = http.post(path, content=raw, headers={"content-type": "application/json"})
        assert 400 <= answer.status_code < 500, (name, answer.status_code, answer.text[:300])
        answer.json()  # one JSON document, whole
        sizes[name] = len(answer.content)
    assert {name: size for name, size in sizes.items() if size > ERROR_BODY_BYTES} == {}, sizes


def test_the_tasks_route_and_unknown_routes_fit_too(http) -> None:
    """FastAPI's own validation (`/v1/tasks`) and the door's 404 and 405 bodies."""
    ids = {CONTROL * 17 + str(i): 1 for i in range(900)}
    tasks = json.dumps({"question": {LONG + "SURROGATE": 1, **ids}, "examples": [ids] * 3})
    answers = [
        http.post(
            "/v1/tasks",
            content=tasks.replace("SURROGATE", "\\ud800").encode(),
            headers={"content-type": "application/json"},
        ),
        http.post("/v1/tasks", json={"question": {LONG: 1, **ids}, "examples": [ids] * 3}),
        http.get("/" + LONG[:60_000]),
        http.put("/v1/systemone"),
    ]
    assert [answer.status_code // 100 for answer in answers] == [4, 4, 4, 4]
    assert [len(answer.content) <= ERROR_BODY_BYTES for answer in answers] == [True] * 4, [
        len(a.content) for a in answers
    ]
