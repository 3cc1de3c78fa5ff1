"""OPENJEV_OPTION_ORDER=canonical: any two listings of the same options get the same answer, over real HTTP,
on a stand-in that does have a letter bias (the knowing stand-in plus a bias by shown position), where the
given order does not; the answer keeps the caller's keys in the caller's order. Sound on the knowing
stand-in without a letter bias: tests/test_sound_defaults.py runs the property under this setting too."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openjev.prompting.option_order import canonical_keys
from tests.conftest import launch_openjev, stop_openjev
from tests.fake_sglang import FakeSGLang
from tests.fake_sglang.knowing import knowing_logprobs
from tests.fake_sglang.model import Logprobs
from tests.test_sound_defaults import questions
from tests.test_sound_routes import decisions_question

#: Nats added to the label shown at each position (A, B, C, ...): the first strongly preferred (none is
#: positive, so every logprob stays at most 0, as a real backend's does).
LETTER_BIAS = (0.0, -2.5, -4.0, -5.0, -6.0)


def letter_biased(read: Logprobs) -> Logprobs:
    def biased(prompt: Sequence[int], labels: Sequence[int]) -> list[float]:
        return [value + LETTER_BIAS[min(i, len(LETTER_BIAS) - 1)] for i, value in enumerate(read(prompt, labels))]

    return biased


@pytest.fixture(scope="module")
def biased_servers(qwen_tokenizer_dir, tmp_path_factory) -> Iterator[dict[str, str]]:
    """The letter-biased stand-in behind two openjev servers: options `given` and `canonical`."""
    fake = FakeSGLang(logprobs=letter_biased(knowing_logprobs(qwen_tokenizer_dir)))
    fake.start()
    logs = tmp_path_factory.mktemp("logs")
    connect = ("--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir))
    servers = {}
    try:
        for order in ("given", "canonical"):
            servers[order] = launch_openjev(*connect, "--option-order", order, log_dir=logs)
        yield {order: server.url for order, server in servers.items()}
    finally:
        for server in servers.values():
            stop_openjev(server)
        fake.stop()
    assert fake.violations == []


def ask(url: str, route: str, head: str, scores: dict[str, float], order: list[str]) -> dict:
    """The choice answer over `route`: (choice, [(key, probability)] as listed)."""
    if route == "/v1/decisions":
        body = {
            "model": "gpt-6-luna",
            "input": json.dumps(scores),
            "questions": [decisions_question("choice", head, order)],
        }
    else:
        question = {"type": "choice", "instructions": head, "criteria": {text: None for text in order}}
        body = {"model": "jev-latest", "state": json.dumps(scores), "questions": {"q": question}}
    response = httpx.post(f"{url}{route}", json=body, timeout=30)
    assert response.status_code == 200, response.text
    if route == "/v1/decisions":
        answer = response.json()["answers"][0]
        return {"choice": answer["choice"], "listed": [(e["value"], e["probability"]) for e in answer["probabilities"]]}
    answer = response.json()["answers"]["q"]
    return {"choice": answer["choice"], "listed": list(answer["probabilities"].items())}


@pytest.mark.parametrize("route", ["/v1/systemone", "/v1/decisions"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_canonical_order_answers_two_listings_alike(biased_servers, route, data):
    head, scores, reordered = data.draw(questions("choice"))
    given_order = list(scores)
    first = ask(biased_servers["canonical"], route, head, scores, given_order)
    second = ask(biased_servers["canonical"], route, head, scores, reordered)
    assert first["choice"] == second["choice"]
    assert dict(first["listed"]) == dict(second["listed"])
    assert [key for key, _ in first["listed"]] == given_order
    assert [key for key, _ in second["listed"]] == reordered


def test_the_given_order_follows_the_letter_bias(biased_servers):
    """The stand-in's bias is real: in the given order the first option listed wins whatever it is."""
    scores = {"alpha": 0.0, "beta": -0.5, "gamma": -1.0}
    for route in ("/v1/systemone", "/v1/decisions"):
        for order in (["alpha", "beta", "gamma"], ["gamma", "beta", "alpha"]):
            assert ask(biased_servers["given"], route, "which fits", scores, order)["choice"] == order[0]


def test_the_canonical_order_sorts_by_text_then_key():
    assert canonical_keys({"b": "Zeta", "a": "Alpha", "c": None}) == ["a", "b", "c"]
    assert canonical_keys({"z": "Same", "y": "Same", "x": "Other"}) == ["x", "y", "z"]
    assert canonical_keys({"b": None, "a": "b"}) == ["a", "b"]
