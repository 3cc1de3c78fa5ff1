"""`POST /v1/decisions` refusing and failing as OpenAI's clients expect: a 400 naming the field in OpenAI's
envelope, 401, 404 naming `model`, bodies that do not decode, overload as a 429 the SDK retries; and the
route's metrics, model list, rank affinity, thinking tier and reference pages."""

from __future__ import annotations

import base64
import concurrent.futures
import json

import httpx
import openai
import pytest
from openai.types.decision import Decision

from tests.api.test_decisions import QUESTIONS, TICKET
from tests.api.test_images import png
from tests.conftest import eventually, zstd_compress
from tests.fake_sglang import FakeSGLang


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


def test_a_state_over_the_token_budget_is_openais_context_overflow_naming_the_input(client):
    error = bad_request(client, input="word " * 40_000)
    assert error.param == "input" and error.code == "context_length_exceeded"
    assert "Input tokens exceed the configured limit of" in error.message and "maximum context length" in error.message


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
    server = serve_openjev(
        "--connect",
        fake_sglang.url,
        "--tokenizer",
        str(qwen_tokenizer_dir),
        env={**think_all, "OPENJEV_OPTION_SHIFTS": "1"},
    )
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
    # Billed: one answer per question, and the 10 thought ids; the calls are openjev's own (headers).
    assert plain.usage.output_tokens == 2 and thought.usage.output_tokens == 2 + 10
    assert thought.usage.input_tokens == plain.usage.input_tokens
    assert thought.answers[1].choice in ("a", "b", True)


def test_the_reference_pages_list_the_new_routes_with_openais_error_shape(http):
    schema = http.get("/openapi.json").json()
    decisions = schema["paths"]["/v1/decisions"]["post"]
    assert {"400", "404", "429"} <= set(decisions["responses"]) and "422" not in decisions["responses"]
    assert decisions["responses"]["400"]["content"]["application/json"]["schema"]["$ref"].endswith("/OpenAIError")
    assert "/api/alpha/decisions" in schema["paths"]
    assert {"DecisionRequest", "DecisionResponse"} <= set(schema["components"]["schemas"])
