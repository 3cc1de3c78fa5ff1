"""The defaults are sound on every route: over the fake SGLang serving the knowing stand-in
(`tests/fake_sglang/knowing.py`), `/v1/systemone`, `/api/alpha/decisions` and `/v1/decisions` serve one
uncorrected readout's answer, the content's best, for choice, score and noul (predicate) questions in any
order of their options or levels, each question read exactly once."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openjev.config import Settings
from tests.conftest import running_stack
from tests.fake_sglang import FakeSGLang
from tests.fake_sglang.knowing import knowing_logprobs
from tests.test_sound_defaults import TYPES, check_answer, questions, systemone_question

ROUTES = ("/v1/systemone", "/api/alpha/decisions", "/v1/decisions")


@pytest.fixture(scope="module")
def knowing_stack(qwen_tokenizer_dir, tmp_path_factory):
    """openjev with default settings over the fake SGLang serving the knowing stand-in."""
    fake = FakeSGLang(logprobs=knowing_logprobs(qwen_tokenizer_dir))
    with running_stack(fake, qwen_tokenizer_dir, tmp_path_factory.mktemp("logs")) as stack:
        yield stack


def decisions_question(kind: str, head: str, order: list[str]) -> dict:
    if kind == "choice":
        return {"type": "choice", "instructions": head, "choices": [{"value": text} for text in order]}
    if kind == "score":
        return {"type": "score", "instructions": head, "levels": [{"label": text} for text in order]}
    return {"type": "predicate", "instructions": head}


def as_systemone(kind: str, answer: dict) -> dict:
    """An OpenAI Decisions answer in `/v1/systemone`'s shape, for the one check of both."""
    if kind == "choice":
        probabilities = {entry["value"]: entry["probability"] for entry in answer["probabilities"]}
        return {"choice": answer["choice"], "probabilities": probabilities}
    if kind == "score":
        legend = {str(entry["value"]): entry["label"] for entry in answer["probabilities"]}
        return {"legend": legend, "probabilities": {str(e["value"]): e["probability"] for e in answer["probabilities"]}}
    return {"noul": answer["probability"]}


def ask(url: str, route: str, kind: str, head: str, scores: dict[str, float], order: list[str]) -> dict:
    if route == "/v1/decisions":
        body = {
            "model": "gpt-6-luna",
            "input": json.dumps(scores),
            "questions": [decisions_question(kind, head, order)],
        }
    else:
        body = {
            "model": "jev-latest",
            "state": json.dumps(scores),
            "questions": {"q": systemone_question(kind, head, order)},
        }
    response = httpx.post(f"{url}{route}", json=body, timeout=30)
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    return as_systemone(kind, answers[0]) if route == "/v1/decisions" else answers["q"]


def question_readouts(fake: FakeSGLang, since: int) -> int:
    """The readouts of questions (more than one label id; a warm-up reads one) the fake answered since."""
    return sum(len(entry["body"]["token_ids_logprob"]) > 1 for entry in fake.generate_calls[since:])


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("kind", TYPES)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_route_serves_the_contents_best_in_any_order(knowing_stack, route, kind, data):
    server, fake = knowing_stack
    head, scores, reordered = data.draw(questions(kind))
    defaults = Settings()
    temperature = defaults.score_temperature if kind == "score" and defaults.score_temperature else defaults.temperature
    for order in (list(scores), reordered):
        before = len(fake.generate_calls)
        check_answer(kind, ask(server.url, route, kind, head, scores, order), head, scores, temperature)
        assert question_readouts(fake, before) == 1
