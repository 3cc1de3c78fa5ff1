"""`POST /v1/decisions` with the real `openai` 3.63.0 client, against openjev on the fake SGLang: every
question type, typed choice values, names, usage, tool calls, images, OpenAI's error envelope and its
exception classes, overload as a 429 the SDK retries, and the answers equal to `/v1/systemone`'s."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.decision import Decision
from tokenizers import Tokenizer

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
def tokenizer(qwen_tokenizer_dir):
    return Tokenizer.from_file(str(qwen_tokenizer_dir / "tokenizer.json"))


def last_prompt(fake: FakeSGLang, tokenizer: Tokenizer) -> str:
    return tokenizer.decode(fake.generate_calls[-1]["body"]["input_ids"], skip_special_tokens=False)


# -- answers --------------------------------------------------------------------------------------


def test_the_sdk_gets_every_question_type_typed_and_in_order(client):
    decision = client.decisions.create(model="gpt-6-luna", input=TICKET, questions=QUESTIONS)
    assert isinstance(decision, Decision) and decision.model == "gpt-6-luna"
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
    assert usage.input_tokens > 0 and usage.output_tokens == 3  # one answer per question
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert 0 <= usage.input_tokens_details.cached_tokens <= usage.input_tokens
    assert usage.output_tokens_details.reasoning_tokens == 0


def test_the_same_request_again_reports_the_backends_cached_tokens(client):
    questions = [{"type": "predicate", "instructions": "Is the customer angry?"}]
    client.decisions.create(model="gpt-6-luna", input=TICKET + " Again.", questions=questions)
    again = client.decisions.create(model="gpt-6-luna", input=TICKET + " Again.", questions=questions)
    # The input counted once, and all of it but the token each readout computes afresh was cached before.
    usage = again.usage
    assert usage.input_tokens - 1 <= usage.input_tokens_details.cached_tokens <= usage.input_tokens


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
    # The string and the boolean that read the same are shown as JSON; the others as they are, in the
    # first rotation as sent.
    prompts = [tokenizer.decode(call["body"]["input_ids"], skip_special_tokens=False) for call in fake.generate_calls]
    assert any('A: "true"\nB: true\nC: false\nD: maybe' in prompt for prompt in prompts)


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
