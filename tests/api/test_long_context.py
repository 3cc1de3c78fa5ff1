"""Token budgets and TypeSafe's long-context mode over real HTTP, on a default deployment: openjev with no
budget setting, on a fake SGLang advertising a 131,072-token context, with the real Qwen3 tokenizer.

Without `TypeSafe-Danger-Zone-Long-Context: true` a call holds the official 32,768 tokens at most and a
request 65,536, counted as the backend computes (the input once); with it, up to the model's context.
Both routes of the System One contract and OpenAI's route honour it; /v1/limits says what each
reaches; `usage` counts the input once."""

from __future__ import annotations

import httpx
import openai
import pytest
import typesafe_sdk
from tokenizers import Tokenizer
from typesafe_sdk import Noul, RetryPolicy, TypeSafeClient

from tests.fake_sglang import FakeSGLang

HEADER = {"TypeSafe-Danger-Zone-Long-Context": "true"}
CONTEXT = 131072
#: SGLang's own limit sits six tokens below its context (`max_req_input_len`).
REACHABLE = CONTEXT - 6


def words(count: int) -> str:
    return " ".join(f"w{i}" for i in range(count))


#: About 36,000 tokens: over the standard budget, within the context.
DOCUMENT = words(7_500)


@pytest.fixture(scope="module")
def server(qwen_tokenizer_dir, tmp_path_factory):
    from tests.conftest import launch_openjev, stop_openjev

    with FakeSGLang(context_length=CONTEXT) as fake:
        server = launch_openjev(
            "--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir), log_dir=tmp_path_factory.mktemp("logs")
        )
        try:
            yield server
        finally:
            stop_openjev(server)
        assert fake.violations == []


@pytest.fixture(scope="module")
def tokens(qwen_tokenizer_dir):
    tokenizer = Tokenizer.from_file(str(qwen_tokenizer_dir / "tokenizer.json"))
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def body(state=DOCUMENT, count=1):
    questions = {f"q{i}": {"type": "noul", "instructions": f"Does the text mention w{i * 97}?"} for i in range(count)}
    return {"model": "jev-latest", "state": state, "questions": questions}


def test_limits_say_what_each_route_reaches_with_and_without_the_header(server):
    limits = httpx.get(f"{server.url}/v1/limits").json()
    assert limits["max_input_tokens"] == 32768 and limits["max_total_input_tokens"] == 65536
    # No setting to raise: the header reaches the model's context.
    assert limits["max_input_tokens_long_context"] == REACHABLE
    assert limits["max_total_input_tokens_long_context"] == 2 * REACHABLE
    assert limits["long_context_header"] == "TypeSafe-Danger-Zone-Long-Context"
    for route in ("/v1/systemone", "/v1/decisions", "/api/alpha/decisions"):
        budgets = limits["token_budgets"][route]
        assert budgets["standard"] == {"per_question": 32768, "per_request": 65536}
        assert budgets["long_context"] == {"per_question": REACHABLE, "per_request": 2 * REACHABLE}


def test_a_29k_input_with_64_questions_is_answered_and_billed_once(server, tokens):
    state = words(6_100)
    assert 28_000 < tokens(state) < 30_000
    request = body(state, count=64)
    response = httpx.post(f"{server.url}/v1/systemone", json=request, timeout=300)
    assert response.status_code == 200, response.text
    assert len(response.json()["answers"]) == 64
    sent = tokens(state) + sum(tokens(q["instructions"]) for q in request["questions"].values())
    usage = response.json()["usage"]
    # The input once and each question's own text with the template around it: within 10% of what was sent.
    assert sent <= usage["input_tokens"] <= 1.1 * sent
    assert usage["output_tokens"] == 64
    # The backend was sent the prefix in every call: openjev's own work, in a header and in /metrics.
    assert int(response.headers["x-openjev-backend-input-tokens"]) > 64 * tokens(state)
    metrics = httpx.get(f"{server.url}/metrics").text
    assert f"openjev_usage_input_tokens_total {float(usage['input_tokens'])}" in metrics


@pytest.mark.parametrize("path", ["/v1/systemone", "/api/alpha/decisions"])
def test_a_long_state_needs_the_header(server, path, tokens):
    refused = httpx.post(f"{server.url}{path}", json=body(), timeout=120)
    assert refused.status_code == 422
    (issue,) = refused.json()["detail"]
    assert issue["loc"] == ["body", "state"] and issue["ctx"]["limit"] == 32768
    assert issue["type"] == "context_length_exceeded" and "maximum context length is 32768 tokens" in issue["msg"]
    assert "TypeSafe-Danger-Zone-Long-Context: true" in issue["msg"]
    answered = httpx.post(f"{server.url}{path}", json=body(), headers=HEADER, timeout=120)
    assert answered.status_code == 200, answered.text
    assert tokens(DOCUMENT) < answered.json()["usage"]["input_tokens"] < 1.1 * tokens(DOCUMENT)


def test_a_100k_input_is_answered_with_the_header(server, tokens):
    state = words(19_000)
    assert tokens(state) > 100_000
    answered = httpx.post(f"{server.url}/v1/systemone", json=body(state, count=4), headers=HEADER, timeout=300)
    assert answered.status_code == 200, answered.text
    assert tokens(state) < answered.json()["usage"]["input_tokens"] < 1.1 * tokens(state)


def test_the_header_is_no_way_past_the_context(server):
    refused = httpx.post(f"{server.url}/v1/systemone", json=body(words(26_000)), headers=HEADER, timeout=120)
    assert refused.status_code == 422
    (issue,) = refused.json()["detail"]
    assert issue["loc"] == ["body", "state"] and issue["ctx"]["limit"] == REACHABLE
    assert f"maximum context length is {REACHABLE} tokens" in issue["msg"] and "context length" in issue["msg"]


def test_the_sdk_sends_the_header_as_an_extra_and_so_does_openais(server, tokens):
    with TypeSafeClient(base_url=server.url, api_key="k", retry=RetryPolicy(max_retries=0)) as sdk:
        with pytest.raises(typesafe_sdk.TypeSafeError):
            sdk.system_one(state=DOCUMENT, questions={"q": Noul(instructions="Long?")})
        answer = sdk.system_one(state=DOCUMENT, questions={"q": Noul(instructions="Long?")}, extra_headers=HEADER)
        assert 0 <= answer.nouls["q"].noul <= 1
    questions = [{"type": "predicate", "instructions": "Long?"}]
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            client.decisions.create(model="gpt-6-luna", input=DOCUMENT, questions=questions)
        # OpenAI's code and words for a context overflow, which clients (langchain-openai) act on.
        assert caught.value.param == "input" and caught.value.code == "context_length_exceeded"
        assert "maximum context length is 32768 tokens" in caught.value.message
        # langchain-openai's test for a context overflow (`_handle_openai_bad_request`), on openai 3.63's text.
        assert caught.value.message.startswith("Error code: 400 - Input tokens exceed the configured limit of 32768")
        assert "TypeSafe-Danger-Zone-Long-Context: true" in caught.value.message
        decision = client.decisions.create(
            model="gpt-6-luna", input=DOCUMENT, questions=questions, extra_headers=HEADER
        )
        assert tokens(DOCUMENT) < decision.usage.input_tokens < 1.1 * tokens(DOCUMENT)
        assert (
            decision.usage.total_tokens
            == decision.usage.input_tokens + decision.usage.output_tokens
            == (decision.usage.input_tokens + 1)
        )


def choices(count: int, options: int = 4, examples: list[str] | None = None) -> dict:
    entry = {"what": "an option", "examples": examples} if examples else None
    return {
        f"c{i}": {
            "type": "choice",
            "instructions": f"Which word comes first in part {i}?",
            "criteria": {f"w{i * options + k}": entry for k in range(options)},
        }
        for i in range(count)
    }


def test_a_29k_input_with_190_choices_is_answered_counting_only_the_callers_text(qwen_tokenizer_dir, tmp_path, tokens):
    """With each choice read in two rotations, each with a content-free readout (named here: the default
    reads each once), openjev's own work is never the caller's (it once made this request "need 71,735
    tokens (... 380 question prompts)"). Default budgets; the fake's 400 calls of 29k ids each take minutes
    on a small CI machine, hence the longer request timeout."""
    from tests.conftest import launch_openjev, stop_openjev

    state = words(6_100)
    request = {"model": "jev-latest", "state": state, "questions": choices(190)}
    with FakeSGLang(context_length=CONTEXT) as fake:
        server = launch_openjev(
            "--connect",
            fake.url,
            "--tokenizer",
            str(qwen_tokenizer_dir),
            "--request-timeout",
            "600",
            "--option-shifts",
            "2",
            "--rotation-skip-above",
            "1",
            "--contextual-calibration",
            "choice",
            log_dir=tmp_path,
        )
        try:
            response = httpx.post(f"{server.url}/v1/systemone", json=request, timeout=600)
        finally:
            stop_openjev(server)
    assert response.status_code == 200, response.text
    assert len(response.json()["answers"]) == 190
    # Each choice's two rotations and their two content-free readouts (a warm-up reads one id).
    assert sum(len(call["body"]["token_ids_logprob"]) > 1 for call in fake.generate_calls) == 4 * 190
    usage = response.json()["usage"]
    # The state once and each choice once, as sent: within the default 65,536, far below twice the state.
    assert tokens(state) < usage["input_tokens"] < min(65_536, 2 * tokens(state))


def test_a_request_far_over_its_budget_costs_about_its_budget_in_tokenizing(server):
    """100 choices with worked examples, thousands of tokens each (each within its call):
    refused naming the questions once their sum is certainly over 65,536, the tokenizer having made
    about that many ids (it made all of them, both rotations included)."""

    def tokenized() -> float:
        metrics = httpx.get(f"{server.url}/metrics").text
        return float(
            next(line for line in metrics.splitlines() if line.startswith("openjev_tokenized_tokens_total")).split()[-1]
        )

    examples = [" ".join(f"e{k}x{j}" for j in range(100)) for k in range(8)]
    questions = {
        qid: {
            **question,
            "criteria": {
                key: {"what": key, "examples": [f"{qid} {text}" for text in examples]} for key in question["criteria"]
            },
        }
        for qid, question in choices(100, options=2).items()
    }
    before = tokenized()
    request = {"model": "jev-latest", "state": "A short state.", "questions": questions}
    response = httpx.post(f"{server.url}/v1/systemone", json=request, timeout=300)
    assert response.status_code == 422, response.text
    (issue,) = response.json()["detail"]
    assert issue["loc"] == ["body", "questions"] and "at least" in issue["msg"] and issue["ctx"]["limit"] == 65_536
    assert "OPENJEV_MAX_TOTAL_INPUT_TOKENS unset: openjev's capacity default" in issue["msg"]
    assert 65_536 < tokenized() - before < 1.3 * 65_536
