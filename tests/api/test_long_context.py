"""TypeSafe's long-context mode over real HTTP, openjev on a fake SGLang with a 65,536-token context and
the operator's cap raised to it: without `TypeSafe-Danger-Zone-Long-Context: true` a call holds the
official 32,768 tokens at most; with it, up to the model's context. Both routes of the System One
contract and OpenAI's route honour it; /v1/limits says both budgets."""

from __future__ import annotations

import httpx
import openai
import pytest
import typesafe_sdk
from typesafe_sdk import Noul, RetryPolicy, TypeSafeClient

from tests.fake_sglang import FakeSGLang

HEADER = {"TypeSafe-Danger-Zone-Long-Context": "true"}
#: About 40,000 tokens: over the standard budget, within the context.
DOCUMENT = " ".join(f"w{i}" for i in range(7_500))


@pytest.fixture(scope="module")
def server(qwen_tokenizer_dir, tmp_path_factory):
    from tests.conftest import launch_openjev, stop_openjev

    with FakeSGLang(context_length=65536) as fake:
        server = launch_openjev(
            "--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir), "--max-input-tokens", "65536",
            log_dir=tmp_path_factory.mktemp("logs"),
        )  # fmt: skip
        try:
            yield server
        finally:
            stop_openjev(server)
        assert fake.violations == []


def body(state=DOCUMENT):
    return {"model": "jev-latest", "state": state, "questions": {"q": {"type": "noul", "instructions": "Long?"}}}


def test_limits_say_both_budgets(server):
    limits = httpx.get(f"{server.url}/v1/limits").json()
    assert limits["max_input_tokens"] == 32768
    assert limits["max_input_tokens_long_context"] == 65536 - 6  # SGLang's own limit below its context
    assert limits["long_context_header"] == "TypeSafe-Danger-Zone-Long-Context"


@pytest.mark.parametrize("path", ["/v1/systemone", "/api/alpha/decisions"])
def test_a_long_state_needs_the_header(server, path):
    refused = httpx.post(f"{server.url}{path}", json=body(), timeout=120)
    assert refused.status_code == 422
    (issue,) = refused.json()["detail"]
    assert issue["loc"] == ["body", "state"] and issue["ctx"]["limit"] == 32768
    assert "TypeSafe-Danger-Zone-Long-Context: true" in issue["msg"]
    answered = httpx.post(f"{server.url}{path}", json=body(), headers=HEADER, timeout=120)
    assert answered.status_code == 200, answered.text
    assert answered.json()["usage"]["input_tokens"] > 32768  # the state alone is over the standard budget


def test_the_header_is_no_way_past_the_context(server):
    twice = " ".join(f"w{i}" for i in range(15_000))
    refused = httpx.post(f"{server.url}/v1/systemone", json=body(twice), headers=HEADER, timeout=120)
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["ctx"]["limit"] == 65536 - 6


def test_the_sdk_sends_the_header_as_an_extra_and_so_does_openais(server):
    with TypeSafeClient(base_url=server.url, api_key="k", retry=RetryPolicy(max_retries=0)) as sdk:
        with pytest.raises(typesafe_sdk.TypeSafeError):
            sdk.system_one(state=DOCUMENT, questions={"q": Noul(instructions="Long?")})
        answer = sdk.system_one(state=DOCUMENT, questions={"q": Noul(instructions="Long?")}, extra_headers=HEADER)
        assert 0 <= answer.nouls["q"].noul <= 1
    questions = [{"type": "predicate", "instructions": "Long?"}]
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            client.decisions.create(model="gpt-6-luna", input=DOCUMENT, questions=questions)
        assert caught.value.param == "input" and caught.value.code == "too_long"
        assert "TypeSafe-Danger-Zone-Long-Context: true" in caught.value.message
        decision = client.decisions.create(
            model="gpt-6-luna", input=DOCUMENT, questions=questions, extra_headers=HEADER
        )
        assert decision.usage.input_tokens > 32768
