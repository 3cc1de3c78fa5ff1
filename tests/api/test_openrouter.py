"""An OpenRouter-shaped client against openjev on the fake SGLang in vision mode, over raw HTTP in
OpenRouter's exact shape (no client package speaks this route with a configurable base): it discovers
the decision models with `GET /api/v1/models?output_modalities=decisions`, then posts to
`/api/alpha/decisions` with the slugs OpenRouter's clients send, a `state` that mixes text and
`image_url` items; `/v1/models` says its models' `output_modalities` and filters on them."""

from __future__ import annotations

import httpx
import pytest

from tests.api.test_decision_images import RED, asset, data_url, systemone

NOUL = {"type": "noul", "instructions": "Is the picture red?"}
CHOICE = {"type": "choice", "instructions": "Which team?", "criteria": {"billing": None, "technical": None}}
STATE = ["The customer sent:", {"type": "image_url", "image_url": {"url": data_url(RED)}}]
SLUGS = [
    "~typesafe/jev-latest",
    "typesafe/jev-1.14",
    "typesafe/jev-1.13-20260917",
    "openai/gpt-6-luna-decisions",
    "~typesafe/jev-latest:nitro",
]


@pytest.fixture(scope="module")
def openrouter(vision_stack):
    server, _ = vision_stack
    with httpx.Client(
        base_url=server.url, timeout=30, headers={"HTTP-Referer": "https://example.com", "X-Title": "test"}
    ) as http:
        yield http


def decide(openrouter: httpx.Client, model: str) -> httpx.Response:
    return openrouter.post("/api/alpha/decisions", json={"model": model, "state": STATE, "questions": {"q": NOUL}})


@pytest.mark.parametrize("slug", SLUGS)
def test_openrouter_slugs_are_answered_by_the_served_model(vision_stack, openrouter, slug):
    server, _ = vision_stack
    response = decide(openrouter, slug)
    assert response.status_code == 200, response.text
    assert response.json()["model"] == "Qwen/Qwen3.6-35B-A3B"
    jev = systemone(server, ["The customer sent:", "<image:x>"], {"q": NOUL}, {"<image:x>": asset(RED)})
    assert response.json()["answers"]["q"]["noul"] == pytest.approx(jev["q"]["noul"], abs=1e-9)


@pytest.mark.parametrize("slug", ["anthropic/claude-opus-latest", "typesafe/jev-latest:free", "typesafe/jev-next"])
def test_a_slug_of_no_served_model_is_a_404_naming_it(openrouter, slug):
    response = decide(openrouter, slug)
    assert response.status_code == 404, response.text
    assert slug in response.text


def test_the_catalog_lists_the_decision_models_only_when_asked_as_openrouter_does(openrouter):
    assert openrouter.get("/api/v1/models").json() == {"data": []}  # text models only, by default
    assert openrouter.get("/api/v1/models", params={"output_modalities": "text,image"}).json() == {"data": []}
    listed = openrouter.get("/api/v1/models", params={"output_modalities": "decisions"}).json()["data"]
    assert openrouter.get("/api/v1/models", params={"output_modalities": "all"}).json()["data"] == listed
    ids = [model["id"] for model in listed]
    assert ids == ["Qwen/Qwen3.6-35B-A3B", "~typesafe/jev-latest", "openai/gpt-6-luna-decisions"]
    for model in listed:
        assert model["canonical_slug"] == model["id"] and isinstance(model["created"], int)
        assert model["architecture"]["output_modalities"] == ["decisions"]
        assert model["architecture"]["input_modalities"] == ["text", "image"]
        assert set(model["pricing"]) >= {"prompt", "completion"} and model["context_length"] > 0


def test_every_id_the_catalog_lists_is_answered_on_the_decisions_route(openrouter):
    listed = openrouter.get("/api/v1/models", params={"output_modalities": "decisions"}).json()["data"]
    for model in listed:
        body = {"model": model["id"], "state": "I was charged twice.", "questions": {"team": CHOICE}}
        response = openrouter.post("/api/alpha/decisions", json=body)
        assert response.status_code == 200, (model["id"], response.text)
        assert set(response.json()["answers"]["team"]["probabilities"]) == {"billing", "technical"}


def test_v1_models_says_the_output_modalities_and_filters_on_them(openrouter):
    every = openrouter.get("/v1/models").json()
    assert every["data"] and all(model["output_modalities"] == ["decisions"] for model in every["data"])
    assert openrouter.get("/v1/models", params={"output_modalities": "decisions"}).json() == every
    assert openrouter.get("/v1/models", params={"output_modalities": "text"}).json() == {
        "models": [],
        "object": "list",
        "data": [],
    }
