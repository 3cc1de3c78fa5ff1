"""OpenRouter's own Python SDK (`openrouter`, the `clients` dependency group) against openjev on the fake
SGLang in vision mode, unchanged but for its server URL: `system_one.create()` posts to
`{server_url}/systemone` (its server URL is `.../api/v1`), and `alpha.decisions.create()` posts to
`/api/alpha/decisions` under its own per-call `server_url` (it ignores the SDK-wide one). Both answer
the request `/v1/systemone` answers, to 1e-9, images in the state included."""

from __future__ import annotations

import httpx
import pytest

from tests.api.test_decision_images import RED, data_url

openrouter = pytest.importorskip("openrouter", reason="the clients dependency group is not installed")

NOUL = {"type": "noul", "instructions": "Is the picture red?"}
CHOICE = {"type": "choice", "instructions": "Which team?", "criteria": {"billing": None, "technical": None}}
SCORE = {"type": "score", "instructions": "How urgent?", "criteria": ["Routine", "Urgent", "Emergency"]}
STATE = ["The customer sent:", {"type": "image_url", "image_url": {"url": data_url(RED)}}]
QUESTIONS = {"q": NOUL, "c": CHOICE, "s": SCORE}


@pytest.fixture(scope="module")
def server(vision_stack):
    return vision_stack[0]


def as_sent(server) -> dict:
    body = {"model": "jev-latest", "state": STATE, "questions": QUESTIONS}
    response = httpx.post(f"{server.url}/api/alpha/decisions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["answers"]


def check(answers, expected: dict) -> None:
    assert answers["q"].noul == pytest.approx(expected["q"]["noul"], abs=1e-9)
    assert answers["c"].choice == expected["c"]["choice"]
    assert answers["c"].probabilities == pytest.approx(expected["c"]["probabilities"], abs=1e-9)
    assert answers["s"].score == pytest.approx(expected["s"]["score"], abs=1e-9)


def test_system_one_create_is_answered_on_api_v1_systemone(server):
    with openrouter.OpenRouter(api_key="unused", server_url=f"{server.url}/api/v1") as client:
        response = client.system_one.create(model="jev-latest", state=STATE, questions=QUESTIONS)
    assert response.model == "Qwen/Qwen3.6-35B-A3B"
    check(response.answers, as_sent(server))


def test_alpha_decisions_create_is_answered_with_its_per_call_server_url(server):
    with openrouter.OpenRouter(api_key="unused", server_url=f"{server.url}/api/v1") as client:
        response = client.alpha.decisions.create(
            model="~typesafe/jev-latest", state=STATE, questions=QUESTIONS, server_url=server.url
        )
    check(response.answers, as_sent(server))


def test_api_v1_systemone_refuses_as_api_alpha_decisions_does(server):
    body = {
        "model": "jev-latest",
        "state": STATE,
        "questions": {"q": {"type": "noul"}, "c": {**CHOICE, "criteria": {}}},
    }
    refused = [
        httpx.post(f"{server.url}{path}", json=body, timeout=30)
        for path in ("/api/v1/systemone", "/api/alpha/decisions")
    ]
    assert refused[0].status_code == refused[1].status_code == 422
    assert refused[0].json() == refused[1].json()
