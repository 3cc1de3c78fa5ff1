"""`x_diagnostics: true` on every answering route, against openjev on the fake SGLang: each noul,
choice and score answer carries vLLM's `diagnostics: {label_mass, argmax_is_label}` read from its
readout as sent, and a request that does not ask is answered exactly as before."""

from __future__ import annotations

import math

import pytest

from openjev.answering.diagnostics import label_diagnostics
from openjev.backends.base import LabelLogprobs
from tests.fake_sglang.model import hashed_logprobs

JEV_ROUTES = ("/v1/systemone", "/api/alpha/decisions", "/api/v1/systemone")
STATE = "I was charged twice for my subscription this month and nobody answers my emails."
QUESTIONS = {
    "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
    "team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": None, "technical": None}},
    "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["Routine", "Urgent", "Emergency"]},
}


def post(http, route: str, questions: dict, **extra) -> dict:
    response = http.post(route, json={"model": "jev-latest", "state": STATE, "questions": questions, **extra})
    assert response.status_code == 200, response.text
    return response.json()["answers"]


def last_mass(fake) -> float:
    """The label mass of the fake's last readout: its label ids' logprobs, as the fake computes them."""
    body = fake.generate_calls[-1]["body"]
    return math.fsum(math.exp(value) for value in hashed_logprobs(body["input_ids"], body["token_ids_logprob"]))


@pytest.mark.parametrize("route", JEV_ROUTES)
def test_each_answer_carries_its_readouts_label_mass_and_argmax_when_asked(http, route):
    plain = post(http, route, QUESTIONS)
    asked = post(http, route, QUESTIONS, x_diagnostics=True)
    assert all("diagnostics" not in answer for answer in plain.values())
    for key, answer in asked.items():
        diagnostics = answer.pop("diagnostics")
        assert set(diagnostics) == {"label_mass", "argmax_is_label"}
        assert 0 < diagnostics["label_mass"] < 1
        # The fake samples its most probable label: the greedy id is a label.
        assert diagnostics["argmax_is_label"] is True
        assert answer == plain[key]
    assert post(http, route, QUESTIONS, x_diagnostics=False) == plain


@pytest.mark.parametrize("kind", ["refund", "urgency"])
def test_label_mass_is_the_summed_probability_of_the_readouts_labels(stack, http, kind):
    _, fake = stack
    answer = post(http, "/v1/systemone", {"q": QUESTIONS[kind]}, x_diagnostics=True)["q"]
    assert answer["diagnostics"]["label_mass"] == pytest.approx(last_mass(fake), rel=1e-9)


def test_v1_decisions_takes_x_diagnostics_from_the_openai_client(stack, client, http):
    questions = [
        {"type": "predicate", "instructions": "The customer asks for a refund."},
        {"type": "score", "instructions": "How urgent?", "levels": [{"label": "Routine"}, {"label": "Urgent"}]},
    ]
    plain = client.decisions.create(model="gpt-6-luna", input=STATE, questions=questions)
    asked = client.decisions.create(
        model="gpt-6-luna", input=STATE, questions=questions, extra_body={"x_diagnostics": True}
    )
    _, fake = stack
    assert asked.answers[1].model_extra["diagnostics"]["label_mass"] == pytest.approx(last_mass(fake), rel=1e-9)
    for before, after in zip(plain.answers, asked.answers, strict=True):
        assert "diagnostics" not in (before.model_extra or {})
        assert after.model_extra["diagnostics"]["argmax_is_label"] is True
        assert after.model_dump(exclude={"diagnostics"}) == before.model_dump()


def test_a_diagnostics_flag_that_is_no_boolean_is_refused_naming_it(http):
    response = http.post(
        "/v1/systemone", json={"model": "jev-latest", "state": STATE, "questions": QUESTIONS, "x_diagnostics": "true"}
    )
    assert response.status_code == 422, response.text
    assert [entry["loc"] for entry in response.json()["detail"]] == [["body", "x_diagnostics"]]
    questions = [{"type": "predicate", "instructions": "A refund?"}]
    body = {"model": "gpt-6-luna", "input": STATE, "questions": questions, "x_diagnostics": "true"}
    response = http.post("/v1/decisions", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "x_diagnostics"


@pytest.mark.parametrize(("top", "expected"), [(7, True), (8, False), (None, None)])
def test_argmax_is_label_says_whether_the_top_token_is_one_of_the_labels(top, expected):
    class Branch:
        question_id, offset, label_token_ids = "q", 0, (5, 7)

    result = LabelLogprobs((math.log(0.25), math.log(0.5)), 10, None, top_token=top)
    assert label_diagnostics(Branch(), result) == {"label_mass": pytest.approx(0.75), "argmax_is_label": expected}
