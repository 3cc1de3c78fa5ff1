"""Score criteria as `{label, description}` objects (the form Effect's OpenRouter client sends) on the
three routes of the Jev contract, against openjev on the fake SGLang: the model reads each as
`/v1/decisions` shows a level (`label: description`), the `legend` repeats it as sent, a malformed one
is a 422 naming its field, and OpenRouter's own Python SDK sends the form unchanged."""

from __future__ import annotations

import json

import httpx
import pytest
from tokenizers import Tokenizer

from tests.api.test_decisions import last_prompt

JEV_ROUTES = ("/v1/systemone", "/api/alpha/decisions", "/api/v1/systemone")
STATE = "I was charged twice for my subscription this month and nobody answers my emails."
LEVELS = [
    {"label": "Routine"},
    {"label": "Urgent", "description": "needs an answer today"},
    {"label": "Emergency", "description": None},
]
AS_TEXT = ["Routine", "Urgent: needs an answer today", "Emergency"]


def score(criteria: list) -> dict:
    return {"type": "score", "instructions": "How urgent is it?", "criteria": criteria}


def answered(http: httpx.Client, route: str, criteria: list) -> dict:
    body = {"model": "jev-latest", "state": STATE, "questions": {"s": score(criteria)}}
    response = http.post(route, json=body)
    assert response.status_code == 200, response.text
    return response.json()["answers"]["s"]


@pytest.fixture(scope="module")
def tokenizer(qwen_tokenizer_dir):
    return Tokenizer.from_file(str(qwen_tokenizer_dir / "tokenizer.json"))


@pytest.mark.parametrize("route", JEV_ROUTES)
def test_labelled_levels_read_as_label_and_description_with_the_legend_as_sent(stack, http, tokenizer, route):
    _, fake = stack
    labelled = answered(http, route, LEVELS)
    prompt = last_prompt(fake, tokenizer)
    assert "A: Routine\nB: Urgent: needs an answer today\nC: Emergency\n" in prompt
    assert '"label"' not in prompt
    assert labelled["legend"] == {str(index): level for index, level in enumerate(LEVELS)}
    as_text = answered(http, route, AS_TEXT)
    assert labelled["probabilities"] == pytest.approx(as_text["probabilities"], abs=1e-9)
    # Before the form was read, each object was shown as its JSON, a different prompt and answer.
    as_json = answered(http, route, [json.dumps(level, ensure_ascii=False) for level in LEVELS])
    assert labelled["probabilities"] != pytest.approx(as_json["probabilities"], abs=1e-9)


def test_labelled_levels_answer_as_v1_decisions_levels(http):
    labelled = answered(http, "/v1/systemone", LEVELS)
    body = {
        "model": "gpt-6-luna",
        "input": STATE,
        "questions": [{"type": "score", "instructions": "How urgent is it?", "levels": LEVELS}],
    }
    response = http.post("/v1/decisions", json=body)
    assert response.status_code == 200, response.text
    decision = response.json()["answers"][0]
    assert decision["score"] == pytest.approx(labelled["score"], abs=1e-9)


@pytest.mark.parametrize("route", JEV_ROUTES)
@pytest.mark.parametrize(
    ("level", "field", "kind"),
    [
        ({"label": 3}, "label", "string_type"),
        ({"label": None, "description": "x"}, "label", "string_type"),
        ({"label": "Urgent", "description": ["today"]}, "description", "string_type"),
    ],
)
def test_a_malformed_labelled_level_is_a_422_naming_its_field(http, route, level, field, kind):
    body = {"model": "jev-latest", "state": STATE, "questions": {"s": score(["Routine", level])}}
    response = http.post(route, json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert [(entry["loc"], entry["type"]) for entry in detail] == [
        (["body", "questions", "s", "criteria", 1, field], kind)
    ]


@pytest.mark.parametrize("level", [{"description": "needs an answer today"}, {"label": "Urgent", "color": "red"}])
def test_an_object_of_other_keys_is_a_description_shown_as_its_json(stack, http, tokenizer, level):
    _, fake = stack
    answer = answered(http, "/v1/systemone", ["Routine", level])
    assert answer["legend"]["1"] == level
    assert f"B: {json.dumps(level, ensure_ascii=False)}\n" in last_prompt(fake, tokenizer)


def test_openrouters_sdk_sends_labelled_levels_unchanged(stack, http):
    openrouter = pytest.importorskip("openrouter", reason="the clients dependency group is not installed")
    server, _ = stack
    expected = answered(http, "/api/alpha/decisions", LEVELS)
    with openrouter.OpenRouter(api_key="unused", server_url=f"{server.url}/api/v1") as client:
        answers = client.system_one.create(model="jev-latest", state=STATE, questions={"s": score(LEVELS)}).answers
        alpha = client.alpha.decisions.create(
            model="~typesafe/jev-latest", state=STATE, questions={"s": score(LEVELS)}, server_url=server.url
        ).answers
    for answer in (answers["s"], alpha["s"]):
        assert answer.score == pytest.approx(expected["score"], abs=1e-9)
        assert answer.legend == expected["legend"]
