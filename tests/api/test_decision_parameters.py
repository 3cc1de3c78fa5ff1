"""`POST /v1/decisions` takes what OpenAI's contract takes and refuses the rest by name, with the real `openai`
3.63.0 client against openjev on the fake SGLang: every field the SDK sends is accepted; an unknown field is
OpenAI's 400 `unknown_parameter`, a generation parameter it cannot honour `unsupported_parameter`; OpenAI's
counts (200 questions, 2 to 10 levels, 2 to 255 options, 128 images) in the words clients look for; the
answer's `model` is the name asked for."""

from __future__ import annotations

import base64

import openai
import pytest

from tests.api.test_decision_errors import bad_request
from tests.api.test_decisions import TICKET, last_prompt, tokenizer  # noqa: F401 (a fixture)
from tests.api.test_images import png

PREDICATE = {"type": "predicate", "instructions": "Is the customer angry?"}


def levels(count: int) -> dict:
    return {"type": "score", "instructions": "How urgent?", "levels": [{"label": f"L{i}"} for i in range(count)]}


def choices(count: int) -> dict:
    return {"type": "choice", "instructions": "Which?", "choices": [{"value": f"v{i}"} for i in range(count)]}


def test_every_field_the_sdk_sends_is_accepted(client):
    image = "data:image/png;base64," + base64.b64encode(png(8, 8, (9, 9, 9))).decode()
    breakpoint_ = {"mode": "explicit"}
    text = {"type": "input_text", "text": TICKET, "prompt_cache_breakpoint": breakpoint_}
    said = [{"type": "output_text", "text": "On it."}, {"type": "refusal", "refusal": "No."}]
    call = {"call_id": "c1", "name": "f", "id": "i1", "namespace": "n", "status": "completed"}
    items = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Triage."}]},
        {"type": "message", "role": "system", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [text]},
        {"type": "message", "role": "assistant", "phase": "final_answer", "content": said},
        {"type": "function_call", "arguments": "{}", **call},
        {"type": "function_call_output", "call_id": "c1", "output": "done", "id": "o1", "status": "completed"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "g", "input": "x", "namespace": None, "status": None},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "ok"}]},
    ]
    decision = client.decisions.create(
        model="gpt-6-luna",
        input=items,
        questions=[
            {**PREDICATE, "name": "angry"},
            {**choices(2), "name": "t", "choices": [{"value": "a", "description": "A"}, {"value": True}]},
            {**levels(2), "levels": [{"label": "low", "description": "L"}, {"label": "high"}]},
        ],
        prompt_cache_key="customer-7",
        prompt_cache_options={"mode": "explicit", "ttl": "30m"},
        safety_identifier="user-1",
    )
    assert [answer.type for answer in decision.answers] == ["predicate", "choice", "score"]
    # An image part with its `detail`, on a text-only model, is refused for being an image, not for a field.
    content = [{"type": "input_image", "image_url": image, "detail": "low", "prompt_cache_breakpoint": breakpoint_}]
    error = bad_request(client, input=[{"role": "user", "content": content}])
    assert error.code == "unsupported" and error.param == "input[0].content[0]"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"extra_body": {"images": ["iVBORw0KGgo="]}}, "images"),
        ({"extra_body": {"metadata": {"a": "b"}}}, "metadata"),
        ({"questions": [{**PREDICATE, "criteria": {"true": "yes", "false": "no"}}]}, "questions[0].criteria"),
        (
            {"questions": [{**choices(2), "choices": [{"value": "a"}, {"value": "b", "label": "B"}]}]},
            "questions[0].choices[1].label",
        ),
        ({"input": [{"role": "user", "content": "hi", "name": "bob"}]}, "input[0].name"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_text", "text": "hi", "annotations": []}]}]},
            "input[0].content[0].annotations",
        ),
    ],
)
def test_an_unknown_field_is_openais_unknown_parameter_naming_it(client, body, param):
    error = bad_request(client, **body)
    assert (error.code, error.param) == ("unknown_parameter", param)
    assert error.body["message"] == f"Unknown parameter: '{param}'."


@pytest.mark.parametrize(
    "extra",
    [
        {"temperature": 0.2},
        {"temperature": 0},
        {"top_p": 0.5},
        {"stream": True},
        {"tools": [{"type": "function", "name": "f"}]},
        {"tool_choice": "auto"},
        {"max_output_tokens": 5},
        {"reasoning": {"effort": "high"}},
    ],
)
def test_a_generation_parameter_is_refused_as_unsupported_by_name(client, extra):
    (name,) = extra
    error = bad_request(client, extra_body=extra)
    assert (error.code, error.param) == ("unsupported_parameter", name)
    assert error.body["message"].startswith(f"Unsupported parameter: '{name}' is not supported")


def test_stream_false_asks_for_what_every_answer_is(client):
    decision = client.decisions.create(
        model="gpt-6-luna", input=TICKET, questions=[PREDICATE], extra_body={"stream": False, "temperature": None}
    )
    assert decision.answers[0].type == "predicate"


def test_the_answer_names_the_model_asked_for(client):
    for name in ("gpt-6-luna", "jev-latest", "Qwen/Qwen3.6-35B-A3B"):
        assert client.decisions.create(model=name, input=TICKET, questions=[PREDICATE]).model == name


# -- OpenAI's counts ------------------------------------------------------------------------------


def test_openais_counts_are_answered_at_their_limits(client):
    decision = client.decisions.create(model="gpt-6-luna", input=TICKET, questions=[PREDICATE] * 200)
    assert len(decision.answers) == 200
    decision = client.decisions.create(model="gpt-6-luna", input=TICKET, questions=[levels(10), choices(255)])
    assert len(decision.answers[0].probabilities) == 10 and len(decision.answers[1].probabilities) == 255


@pytest.mark.parametrize(
    ("questions", "param", "words"),
    [
        ([PREDICATE] * 201, "questions", "1 to 200 questions per request, got 201"),
        ([levels(11)], "questions[0].levels", "2 to 10 levels per score, got 11"),
        ([PREDICATE, levels(1)], "questions[1].levels", "2 to 10 levels per score, got 1"),
        ([choices(256)], "questions[0].choices", "2 to 255 options per choice, got 256"),
        ([choices(1)], "questions[0].choices", "2 to 255 options per choice, got 1"),
    ],
)
def test_a_count_past_openais_limit_is_a_400_in_the_words_clients_look_for(client, questions, param, words):
    error = bad_request(client, questions=questions)
    assert error.param == param and words in error.message
    assert error.code == ("too_short" if words.endswith("got 1") else "too_long")


def test_a_value_and_a_string_that_read_the_same_stay_apart_with_their_descriptions(stack, client, tokenizer):  # noqa: F811
    _, fake = stack
    same = "The customer agrees"
    question = {
        "type": "choice",
        "instructions": "Agreed?",
        "choices": [{"value": "true", "description": same}, {"value": True, "description": same}, {"value": "no"}],
    }
    before = len(fake.generate_calls)
    client.decisions.create(model="gpt-6-luna", input=TICKET, questions=[question])
    # The options as sent are one of the choice's two rotations.
    prompts = [
        tokenizer.decode(call["body"]["input_ids"], skip_special_tokens=False) for call in fake.generate_calls[before:]
    ]
    assert any(f'A: "true": {same}\nB: true: {same}\nC: no' in prompt for prompt in prompts)


def test_limits_say_each_routes_counts(http):
    routes = http.get("/v1/limits").json()["routes"]
    assert set(routes) == {"/v1/systemone", "/v1/decisions", "/api/alpha/decisions", "/api/v1/systemone"}
    assert routes["/v1/decisions"] == {
        "max_questions": 200,
        "min_choice_options": 2,
        "max_choice_options": 255,
        "min_score_levels": 2,
        "max_score_levels": 10,
        "max_images": 128,
    }
    typesafe = {**routes["/v1/decisions"], "min_choice_options": 1, "min_score_levels": 1, "max_score_levels": 64}
    assert routes["/v1/systemone"] == routes["/api/alpha/decisions"] == routes["/api/v1/systemone"] == typesafe


def test_openais_128_images_are_answered_and_the_129th_is_named(vision_stack):
    server, _ = vision_stack
    tiny = {
        "type": "input_image",
        "image_url": "data:image/png;base64," + base64.b64encode(png(4, 4, (1, 2, 3))).decode(),
    }
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0) as sdk:
        decision = sdk.decisions.create(
            model="gpt-6-luna", input=[{"role": "user", "content": [tiny] * 128}], questions=[PREDICATE]
        )
        assert decision.answers[0].type == "predicate"
        error = bad_request(sdk, input=[{"role": "user", "content": [tiny] * 129}])
    assert error.param == "input[0].content[128]" and "at most 128 images per request, got 129" in error.message


def test_option_keys_show_each_choices_value_never_its_position(
    serve_openjev,
    fake_sglang,
    qwen_tokenizer_dir,
    tokenizer,  # noqa: F811
) -> None:
    """With OPENJEV_OPTION_KEYS a choice's key stands before its description: on /v1/decisions that key
    is the value's own text, and the answer still names each value (the empty string shown as `""`)."""
    server = serve_openjev(
        "--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), "--option-shifts", "1",
        env={"OPENJEV_OPTION_KEYS": "true"},
    )  # fmt: skip
    question = {
        "type": "choice",
        "instructions": "What does the customer want?",
        "choices": [{"value": "refund", "description": "Money back"}, {"value": "other"}, {"value": ""}],
    }
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0) as client:
        before = len(fake_sglang.generate_calls)
        decision = client.decisions.create(model="gpt-6-luna", input=TICKET, questions=[question])
    prompts = [
        tokenizer.decode(call["body"]["input_ids"], skip_special_tokens=False)
        for call in fake_sglang.generate_calls[before:]
    ]
    assert any('A: refund - Money back\nB: other\nC: ""\n' in prompt for prompt in prompts), prompts[-1]
    answer = decision.model_dump()["answers"][0]
    assert [entry["value"] for entry in answer["probabilities"]] == ["refund", "other", ""]
    assert answer["choice"] in ("refund", "other", "")
