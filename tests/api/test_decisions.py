"""`POST /v1/decisions` with the real `openai` 3.57.0 client, against openjev on the fake SGLang: every
question type, typed choice values, names, usage, tool calls, images, OpenAI's error envelope and its
exception classes, overload as a 429 the SDK retries, and the answers equal to `/v1/systemone`'s."""

from __future__ import annotations

import base64
import concurrent.futures
import json
import math

import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.decision import Decision
from tokenizers import Tokenizer

from tests.api.test_images import png
from tests.conftest import eventually, running_stack, zstd_compress
from tests.fake_sglang import FakeSGLang

TICKET = "I was charged twice for my subscription this month and nobody answers my emails."
QUESTIONS = [
    {"type": "predicate", "name": "refund", "instructions": "The customer asks for a refund."},
    {
        "type": "choice",
        "name": "team",
        "instructions": "Which team should handle this?",
        "choices": [
            {"value": "billing", "description": "Payments and invoices"},
            {"value": "technical"},
            {"value": "sales"},
        ],
    },
    {
        "type": "score",
        "instructions": "How urgent is it?",
        "levels": [
            {"label": "Routine"},
            {"label": "Urgent", "description": "needs an answer today"},
            {"label": "Emergency"},
        ],
    },
]


@pytest.fixture(scope="module")
def stack(qwen_tokenizer_dir, tmp_path_factory):
    with running_stack(FakeSGLang(), qwen_tokenizer_dir, tmp_path_factory.mktemp("logs")) as stack:
        yield stack


@pytest.fixture(scope="module")
def client(stack):
    server, _ = stack
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def http(stack):
    server, _ = stack
    with httpx.Client(base_url=server.url, timeout=30) as http:
        yield http


@pytest.fixture(scope="module")
def tokenizer(qwen_tokenizer_dir):
    return Tokenizer.from_file(str(qwen_tokenizer_dir / "tokenizer.json"))


def last_prompt(fake: FakeSGLang, tokenizer: Tokenizer) -> str:
    return tokenizer.decode(fake.generate_calls[-1]["body"]["input_ids"], skip_special_tokens=False)


# -- answers --------------------------------------------------------------------------------------


def test_the_sdk_gets_every_question_type_typed_and_in_order(client):
    decision = client.decisions.create(model="gpt-6-luna", input=TICKET, questions=QUESTIONS)
    assert isinstance(decision, Decision) and decision.model == "Qwen/Qwen3.6-35B-A3B"
    predicate, choice, score = decision.answers
    assert (predicate.type, predicate.name) == ("predicate", "refund") and 0 <= predicate.probability <= 1
    assert (choice.type, choice.name) == ("choice", "team")
    assert [p.value for p in choice.probabilities] == ["billing", "technical", "sales"]
    assert math.fsum(p.probability for p in choice.probabilities) == pytest.approx(1)
    assert choice.choice == max(choice.probabilities, key=lambda p: p.probability).value
    assert 0 <= choice.confidence <= 1
    assert (score.type, score.name) == ("score", None)
    assert [(p.value, p.label) for p in score.probabilities] == [(0, "Routine"), (1, "Urgent"), (2, "Emergency")]
    assert score.score == pytest.approx(sum(p.value * p.probability for p in score.probabilities))
    usage = decision.usage
    assert usage.input_tokens > 0 and usage.output_tokens >= 4
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert 0 <= usage.input_tokens_details.cached_tokens <= usage.input_tokens
    assert usage.output_tokens_details.reasoning_tokens == 0


def test_the_same_request_again_reports_the_backends_cached_tokens(client):
    questions = [{"type": "predicate", "instructions": "Is the customer angry?"}]
    client.decisions.create(model="gpt-6-luna", input=TICKET + " Again.", questions=questions)
    again = client.decisions.create(model="gpt-6-luna", input=TICKET + " Again.", questions=questions)
    assert again.usage.input_tokens_details.cached_tokens > 0


def test_typed_choice_values_come_back_typed_and_the_model_sees_them_apart(stack, client, tokenizer):
    _, fake = stack
    choices = [{"value": "true"}, {"value": True}, {"value": False}, {"value": "maybe"}]
    decision = client.decisions.create(
        model="gpt-6-luna", input=TICKET, questions=[{"type": "choice", "instructions": "Valid?", "choices": choices}]
    )
    (answer,) = decision.answers
    values = [p.value for p in answer.probabilities]
    assert values == ["true", True, False, "maybe"]
    assert [type(v) for v in values] == [str, bool, bool, str]
    assert isinstance(answer.choice, str | bool) and answer.choice in values
    # The string and the boolean that read the same are shown as JSON; the others as they are.
    prompt = last_prompt(fake, tokenizer)
    assert 'A: "true"\nB: true\nC: false\nD: maybe' in prompt


def test_json_input_parts_developer_messages_and_question_parts(stack, client, tokenizer):
    _, fake = stack
    decision = client.decisions.create(
        model="gpt-6-luna",
        input=[
            {"role": "developer", "content": "You triage support tickets."},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Ticket:"},
                    {"type": "input_json", "data": {"id": 7, "body": "Refund me"}},
                ],
            },
        ],
        questions=[
            {
                "type": "predicate",
                "instructions": [
                    {"type": "input_text", "text": "Refund asked?"},
                    {"type": "input_json", "data": {"k": 1}},
                ],
            }
        ],
    )
    assert decision.answers[0].type == "predicate"
    prompt = last_prompt(fake, tokenizer)
    assert "<|im_start|>system\nYou triage support tickets.<|im_end|>" in prompt
    assert 'Ticket:\n{"id": 7, "body": "Refund me"}' in prompt
    assert 'Refund asked?\n{"k": 1}' in prompt


def test_tool_calls_and_their_outputs_go_through_the_chat_template(stack, client, tokenizer):
    _, fake = stack
    items = [
        {"role": "user", "content": "Where is my order 42?"},
        {"type": "function_call", "call_id": "c1", "name": "lookup_order", "arguments": '{"order": 42}'},
        {"type": "custom_tool_call", "call_id": "c2", "name": "grep_logs", "input": "order 42"},
        {"type": "function_call_output", "call_id": "c1", "output": "shipped on Monday"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "no errors"}]},
        {"role": "assistant", "content": [{"type": "output_text", "text": "It shipped on Monday."}]},
    ]
    client.decisions.create(
        model="gpt-6-luna", input=items, questions=[{"type": "predicate", "instructions": "Was it shipped?"}]
    )
    prompt = last_prompt(fake, tokenizer)
    assert '<tool_call>\n{"name": "lookup_order", "arguments": {"order": 42}}\n</tool_call>' in prompt
    assert '<tool_call>\n{"name": "grep_logs", "arguments": "order 42"}\n</tool_call>' in prompt
    assert "<tool_response>\nshipped on Monday\n</tool_response>" in prompt
    assert "<tool_response>\nno errors\n</tool_response>" in prompt
    assert prompt.index("lookup_order") < prompt.index("shipped on Monday") < prompt.index("It shipped on Monday.")


# -- one pipeline: the same answers as /v1/systemone -------------------------------------------------

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=40)


def systemone(http, state, questions):
    response = http.post("/v1/systemone", json={"model": "jev-latest", "state": state, "questions": questions})
    assert response.status_code == 200, response.text
    return response.json()["answers"]


def decisions(http, input, questions):
    response = http.post("/v1/decisions", json={"model": "gpt-6-luna", "input": input, "questions": questions})
    assert response.status_code == 200, response.text
    return response.json()["answers"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=TEXT,
    instructions=TEXT,
    form=st.sampled_from(["string", "message", "json"]),
    options=st.lists(TEXT, min_size=2, max_size=5, unique=True),
)
def test_a_question_gets_the_same_probabilities_as_through_systemone(http, text, instructions, form, options):
    if form == "string":
        state, input = text, text
    elif form == "message":
        state = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]
        input = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": text}]
    else:
        state = {"ticket": text, "n": 3}
        input = [{"role": "user", "content": [{"type": "input_json", "data": state}]}]
    jev = systemone(
        http,
        state,
        {
            "p": {"type": "noul", "instructions": instructions},
            "c": {"type": "choice", "instructions": instructions, "criteria": dict.fromkeys(options)},
            "s": {"type": "score", "instructions": instructions, "criteria": options},
        },
    )
    predicate, choice, score = decisions(
        http,
        input,
        [
            {"type": "predicate", "instructions": instructions},
            {"type": "choice", "instructions": instructions, "choices": [{"value": o} for o in options]},
            {"type": "score", "instructions": instructions, "levels": [{"label": o} for o in options]},
        ],
    )
    assert predicate["probability"] == pytest.approx(jev["p"]["noul"], abs=1e-9)
    assert [p["probability"] for p in choice["probabilities"]] == pytest.approx(
        list(jev["c"]["probabilities"].values()), abs=1e-9
    )
    assert choice["choice"] == jev["c"]["choice"]
    assert [p["probability"] for p in score["probabilities"]] == pytest.approx(
        list(jev["s"]["probabilities"].values()), abs=1e-9
    )
    assert score["score"] == pytest.approx(jev["s"]["score"], abs=1e-9)


def test_tool_calls_get_the_same_answer_as_the_chat_state_with_tool_calls(http):
    state = [
        {"role": "user", "content": "Where is order 42?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": "shipped"},
    ]
    items = [
        {"role": "user", "content": "Where is order 42?"},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "shipped"},
    ]
    jev = systemone(http, state, {"q": {"type": "noul", "instructions": "Shipped?"}})
    (predicate,) = decisions(http, items, [{"type": "predicate", "instructions": "Shipped?"}])
    assert predicate["probability"] == pytest.approx(jev["q"]["noul"], abs=1e-9)


# -- errors ---------------------------------------------------------------------------------------


def bad_request(client, **body) -> openai.BadRequestError:
    request = {"model": "gpt-6-luna", "input": TICKET, "questions": [{"type": "predicate", "instructions": "?"}]}
    with pytest.raises(openai.BadRequestError) as caught:
        client.decisions.create(**{**request, **body})
    error = caught.value
    assert error.status_code == 400 and error.type == "invalid_request_error" and error.message
    return error


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"questions": [{"type": "choice", "instructions": "?", "choices": [{"value": "a"}]}]}, "questions[0].choices"),
        (
            {"questions": [{"type": "choice", "instructions": "?", "choices": [{"value": "a"}, {"value": "a"}]}]},
            "questions[0].choices[1].value",
        ),
        (
            {"questions": [{"type": "choice", "instructions": "?", "choices": [{"value": 1}, {"value": "b"}]}]},
            "questions[0].choices[0].value",
        ),
        ({"questions": [{"type": "score", "instructions": "?", "levels": [{"label": "only"}]}]}, "questions[0].levels"),
        (
            {"questions": [{"type": "predicate", "instructions": "?"}, {"type": "vibe", "instructions": "?"}]},
            "questions[1]",
        ),
        ({"questions": [{"type": "predicate"}]}, "questions[0].instructions"),
        ({"questions": [{"type": "predicate", "instructions": ""}]}, "questions[0]"),
        ({"questions": []}, "questions"),
        ({"input": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "input[0].content[0]"),
        ({"input": [{"type": "function_call_output", "call_id": "nope", "output": "x"}]}, "input[0].call_id"),
        (
            {
                "input": [
                    {"role": "user", "content": [{"type": "input_image", "image_url": "https://example.com/a.png"}]}
                ]
            },
            "input[0].content[0].image_url",
        ),
        ({"input": []}, "input"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_json", "data": {"a": "x" * 300_000}}]}]},
            "input[0].content[0].data",
        ),
        ({"safety_identifier": "x" * 129}, "safety_identifier"),
    ],
)
def test_a_bad_request_is_a_400_naming_the_field_in_openais_envelope(client, body, param):
    assert bad_request(client, **body).param == param


def test_an_image_on_a_text_only_model_is_a_400_naming_the_input(client):
    data_url = "data:image/png;base64," + base64.b64encode(png(8, 8, (200, 10, 10))).decode()
    content = [{"type": "input_text", "text": "See:"}, {"type": "input_image", "image_url": data_url}]
    error = bad_request(client, input=[{"role": "user", "content": content}])
    assert error.param == "input[0].content[1]" and "reads text only" in error.message


def test_a_state_over_the_token_budget_is_a_400_naming_the_input(client):
    error = bad_request(client, input="word " * 40_000)
    assert error.param == "input" and error.code == "too_long"


def test_an_unknown_model_is_a_not_found_error_naming_model(client):
    with pytest.raises(openai.NotFoundError) as caught:
        client.decisions.create(model="gpt-4o", input="x", questions=[{"type": "predicate", "instructions": "?"}])
    assert caught.value.param == "model" and caught.value.code == "model_not_found"


def test_bodies_that_do_not_decode_get_the_envelope_too(http):
    response = http.post("/v1/decisions", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"
    assert response.headers["x-request-id"] == response.headers["x-typesafe-request-id"]
    response = http.post("/v1/decisions", content=b"\x00" * 2000, headers={"content-encoding": "br"})
    assert response.status_code == 415 and set(response.json()["error"]) == {"message", "type", "param", "code"}


def test_a_zstd_body_is_answered(http):
    body = {"model": "gpt-6-luna", "input": TICKET * 20, "questions": QUESTIONS}
    response = http.post(
        "/v1/decisions",
        content=zstd_compress(json.dumps(body).encode()),
        headers={"content-type": "application/json", "content-encoding": "zstd"},
    )
    assert response.status_code == 200, response.text
    Decision.model_validate(response.json())


def test_models_lists_the_openai_name_and_the_sdk_reads_it(client):
    assert "gpt-6-luna" in {model.id for model in client.models.list()}


def test_metrics_count_each_route_apart(stack, http):
    http.post("/v1/decisions", json={"model": "gpt-6-luna", "input": "x", "questions": []})
    exposition = http.get("/metrics").text
    assert 'openjev_requests_total{route="/v1/decisions",status="200"}' in exposition
    assert 'openjev_requests_total{route="/v1/decisions",status="400"}' in exposition


def test_overload_is_a_429_with_retry_after_that_the_sdk_retries(serve_openjev, fake_sglang, qwen_tokenizer_dir):
    server = serve_openjev(
        "--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), "--max-concurrent-requests", "1"
    )
    body = {"model": "gpt-6-luna", "input": "x", "questions": [{"type": "predicate", "instructions": "?"}]}
    fake_sglang.generate_delay = 1.0
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        busy = pool.submit(httpx.post, f"{server.url}/v1/decisions", json=body, timeout=30)
        assert eventually(lambda: fake_sglang.in_flight == 1)
        sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0)
        with sdk, pytest.raises(openai.RateLimitError) as caught:
            sdk.decisions.create(**body)
        assert busy.result().status_code == 200
    refused = caught.value.response
    assert refused.headers["retry-after"] == "1" and caught.value.code == "overloaded"
    # With retries (the SDK's default), it waits Retry-After and is answered.
    fake_sglang.generate_delay = 0.5
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        busy = pool.submit(httpx.post, f"{server.url}/v1/decisions", json=body, timeout=30)
        assert eventually(lambda: fake_sglang.in_flight == 1)
        with openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=3) as sdk:
            assert sdk.decisions.create(**body).answers[0].type == "predicate"
        assert busy.result().status_code == 200


def test_a_wrong_key_is_an_authentication_error(serve_openjev, fake_sglang, qwen_tokenizer_dir):
    server = serve_openjev(
        "--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env={"OPENJEV_API_KEY": "secret"}
    )
    body = {"model": "gpt-6-luna", "input": "x", "questions": [{"type": "predicate", "instructions": "?"}]}
    wrong = openai.OpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0)
    with wrong, pytest.raises(openai.AuthenticationError):
        wrong.decisions.create(**body)
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="secret", max_retries=0) as sdk:
        assert len(sdk.decisions.create(**body).answers) == 1
    assert httpx.post(f"{server.url}/api/alpha/decisions", json={}).status_code == 401


def test_prompt_cache_key_keeps_a_conversation_on_one_rank(serve_openjev, qwen_tokenizer_dir):
    """Four data-parallel ranks: eight different inputs land on several ranks by their openings, and on
    one rank when they share a `prompt_cache_key`."""
    with FakeSGLang(dp_size=4) as fake:
        server = serve_openjev("--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir))
        with openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0) as sdk:

            def ranks(**extra):
                seen = set()
                for index in range(8):
                    before = len(fake.generate_calls)
                    sdk.decisions.create(
                        model="gpt-6-luna",
                        input=f"Ticket {index}: {'lorem ipsum ' * index} the printer is broken",
                        questions=[{"type": "predicate", "instructions": "Is it urgent?"}],
                        **extra,
                    )
                    seen |= {call["body"]["routed_dp_rank"] for call in fake.generate_calls[before:]}
                return seen

            assert len(ranks()) > 1
            assert len(ranks(prompt_cache_key="customer-7")) == 1
        assert fake.violations == []


def test_the_thinking_tier_by_its_model_name_reports_reasoning_tokens(serve_openjev, fake_sglang, qwen_tokenizer_dir):
    think_all = {"OPENJEV_THINK_MARGIN": "1000", "OPENJEV_THINK_MAX_SHARE": "1", "OPENJEV_THINK_BUDGET_TOKENS": "16"}
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env=think_all)
    fake_sglang.generation_length = 5  # every thought ends after 5 ids
    questions = [
        {"type": "predicate", "instructions": "Is this urgent?"},
        {"type": "choice", "instructions": "Which?", "choices": [{"value": "a"}, {"value": "b"}, {"value": True}]},
    ]
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0) as sdk:
        plain = sdk.decisions.create(model="gpt-6-luna", input="The server room is flooding.", questions=questions)
        raw = sdk.decisions.with_raw_response.create(
            model="openjev-think", input="The server room is flooding.", questions=questions
        )
    thought = raw.parse()
    assert plain.usage.output_tokens_details.reasoning_tokens == 0
    assert thought.model == "openjev-think" and raw.headers["x-openjev-escalated"] == "2"
    assert thought.usage.output_tokens_details.reasoning_tokens == 10 == int(raw.headers["x-openjev-reasoning-tokens"])
    assert thought.usage.output_tokens == plain.usage.output_tokens + 10 + 2
    assert thought.answers[1].choice in ("a", "b", True)
