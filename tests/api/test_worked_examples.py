"""Criteria entries with worked examples, through real openjev on the fake SGLang: what is accepted,
what gets a 422 naming the field, and what the model is shown."""

from __future__ import annotations

import httpx
import pytest
from tokenizers import Tokenizer

from tests.fake_sglang import FakeSGLang

ROUTES = ["/v1/systemone", "/api/alpha/decisions"]
TICKET = "I was charged twice for my subscription this month."


def ask(http: httpx.Client, questions: dict, route: str = "/v1/systemone") -> httpx.Response:
    return http.post(route, json={"model": "jev-latest", "state": TICKET, "questions": questions})


def routing(billing: object) -> dict:
    return {"q": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": billing, "sales": None}}}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(
    ("billing", "where"),
    [
        ({"what": "Payments", "examples": "Refund me"}, ["examples"]),
        ({"what": "Payments", "examples": ["Refund me"] * 33}, ["examples"]),
        ({"what": "Payments", "examples": ["Refund me", 7]}, ["examples", 1]),
        ({"what": "Payments", "examples": ["x" * 16385]}, ["examples", 0]),
        ({"what": 7, "examples": ["Refund me"]}, ["what"]),
    ],
)
def test_bad_worked_examples_get_422_naming_the_field(http, route, billing, where):
    response = ask(http, routing(billing), route)
    assert response.status_code == 422, response.text
    locs = [entry["loc"] for entry in response.json()["detail"]]
    assert locs == [["body", "questions", "q", "criteria", "billing", *where]]


@pytest.mark.parametrize(
    ("question", "loc"),
    [
        ({"type": "score", "criteria": ["low", {"what": "high", "examples": [None]}]}, [1, "examples", 0]),
        ({"type": "noul", "instructions": "Refund?", "criteria": {"true": {"examples": {}}}}, ["true", "examples"]),
    ],
)
def test_noul_and_score_entries_are_checked_too(http, question, loc):
    response = ask(http, {"q": question})
    assert response.status_code == 422, response.text
    assert [entry["loc"] for entry in response.json()["detail"]] == [["body", "questions", "q", "criteria", *loc]]


@pytest.mark.parametrize("route", ROUTES)
def test_worked_entries_are_answered_for_every_question_type(http, route):
    level = {"what": "Very angry", "examples": [{"text": "This is outrageous!"}]}
    questions = {
        **routing({"what": "Payments and refunds", "examples": ["Please refund my order.", {"msg": "Card declined"}]}),
        "n": {"type": "noul", "instructions": "Refund asked?", "criteria": {"true": {"examples": ["Money back!"]}}},
        "s": {"type": "score", "criteria": ["Calm", level]},
    }
    response = ask(http, questions, route)
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    assert set(answers["q"]["probabilities"]) == {"billing", "sales"}
    assert 0 <= answers["n"]["noul"] <= 1
    assert answers["s"]["legend"] == {"0": "Calm", "1": level}


def test_an_object_with_other_keys_stays_a_plain_description(http):
    plain = {"what": "Payments", "examples": ["Refund me"], "owner": "finance"}
    response = ask(http, routing(plain))
    assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def tokenizer(qwen_tokenizer_dir):
    return Tokenizer.from_file(str(qwen_tokenizer_dir / "tokenizer.json"))


def prompts_of(fake: FakeSGLang, tokenizer: Tokenizer, since: int) -> list[str]:
    calls = fake.generate_calls[since:]
    return [tokenizer.decode(call["body"]["input_ids"], skip_special_tokens=False) for call in calls]


@pytest.mark.parametrize("route", ROUTES)
def test_the_model_reads_each_example_beside_its_options_letter_not_the_json(stack, http, tokenizer, route):
    _, fake = stack
    since = len(fake.generate_calls)
    billing = {"what": "Payments and refunds", "examples": ["Please refund my order."]}
    response = ask(http, routing(billing), route)
    assert response.status_code == 200, response.text
    prompt = next(text for text in prompts_of(fake, tokenizer, since) if "Which team?" in text)
    assert "A: Payments and refunds\nB: sales" in prompt
    assert "Example: Please refund my order.\nAnswer: A\n" in prompt
    assert '"examples"' not in prompt and '"what"' not in prompt
