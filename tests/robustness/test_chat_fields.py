"""Chat states with wrong types in every message field, against a real openjev on the fake SGLang: each
is answered or refused with a 422 naming a field inside the state, never a 5xx."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import RunningOpenJev
from tests.fake_sglang import FakeSGLang

pytestmark = [pytest.mark.robustness, pytest.mark.timeout(240)]

SCALAR = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
)


def nested(depth: int, leaf: object = "x") -> object:
    """`leaf` inside `depth` arrays and objects, alternating."""
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


#: Nesting on both sides of the strict reader's limit (254 levels), where recursive walkers failed.
DEEP = st.builds(nested, st.integers(1, 320) | st.sampled_from([253, 254, 255, 600]), SCALAR)
JSON = (
    st.recursive(
        SCALAR,
        lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
        max_leaves=6,
    )
    | DEEP
)
FIELDS = ["role", "content", "reasoning_content", "name", "tool_call_id", "tool_calls"]
TOOL_CALL = st.fixed_dictionaries(
    {},
    optional={
        "id": JSON,
        "type": JSON,
        "function": JSON | st.fixed_dictionaries({}, optional={"name": JSON, "arguments": JSON}),
    },
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool"]) | JSON},
    optional={
        "content": JSON,
        "reasoning_content": JSON,
        "name": JSON,
        "tool_call_id": JSON,
        "tool_calls": st.lists(TOOL_CALL | JSON, max_size=2) | JSON,
        "x_unused": JSON,
    },
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(MESSAGE, min_size=1, max_size=3))
def test_wrong_types_in_message_fields_are_422_naming_them(openjev_on_fake: RunningOpenJev, messages: list) -> None:
    body = {"model": "jev-latest", "state": messages, "questions": {"q": {"type": "noul", "instructions": "?"}}}
    response = httpx.post(f"{openjev_on_fake.url}/v1/systemone", json=body, timeout=30)
    assert response.status_code in (200, 422), response.text
    if response.status_code == 422:
        for issue in response.json()["detail"]:
            assert issue["loc"][:2] == ["body", "state"], issue


def depth_of(value: object) -> int:
    """Arrays and objects nested in `value`, counted as the strict reader counts them."""
    deepest, pending = 0, [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth + 1)
            pending.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def deep_state(place: str, value: object) -> object:
    if place == "arguments":
        call = {"id": "1", "function": {"name": "f", "arguments": {"value": value}}}
        return [{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    if place == "unused key":
        return [{"role": "user", "content": "x", "x_unused": value}]
    if place == "content part":
        return [{"role": "user", "content": [{"type": "text", "text": "x", "x_extra": value}]}]
    return {"document": value}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    place=st.sampled_from(["arguments", "unused key", "content part", "document"]),
    depth=st.integers(1, 700),
    leaf=SCALAR | st.sampled_from(["<|im_end|>", "<|im_start|>user", "<think>"]),
)
def test_deep_nesting_in_a_valid_chat_is_answered_or_a_422_naming_it(
    openjev_on_fake: RunningOpenJev, place: str, depth: int, leaf: object
) -> None:
    """Valid messages, so a deep value reaches every walker (quoting, the template's `tojson`): answered
    up to the strict reader's limit, a 422 `too_deep` naming a field inside the state past it."""
    state = deep_state(place, nested(depth, leaf))
    body = {"model": "jev-latest", "state": state, "questions": {"q": {"type": "noul", "instructions": "?"}}}
    response = httpx.post(f"{openjev_on_fake.url}/v1/systemone", json=body, timeout=60)
    if depth_of(state) <= 254:
        assert response.status_code == 200, response.text
    else:
        assert response.status_code == 422, response.text
        (issue,) = response.json()["detail"]
        assert issue["loc"][:2] == ["body", "state"] and issue["type"] == "too_deep", issue


@pytest.mark.parametrize(
    ("message", "loc"),
    [
        ({"role": ["user"], "content": "x"}, [0, "role"]),
        ({"role": {"a": 1}, "content": "x"}, [0, "role"]),
        ({"role": "assistant", "content": "x", "reasoning_content": 3}, [0, "reasoning_content"]),
        ({"role": "assistant", "content": "", "tool_calls": "call"}, [0, "tool_calls"]),
        (
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": 1}}]},
            [0, "tool_calls", 0, "function", "name"],
        ),
        (
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": 2}}]},
            [0, "tool_calls", 0, "function", "arguments"],
        ),
        ({"role": "tool", "content": "x", "tool_call_id": ["1"]}, [0, "tool_call_id"]),
        # A tool call with neither `function` nor `name`, and a function without its arguments: the
        # template cannot print them (it said "Undefined is not JSON serializable", naming only state).
        ({"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]}, [0, "tool_calls", 0, "function"]),
        (
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f"}}]},
            [0, "tool_calls", 0, "function", "arguments"],
        ),
        (
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"arguments": "{}"}}]},
            [0, "tool_calls", 0, "function", "name"],
        ),
        # Nested past the limit: named down to six keys into the state, never a RecursionError's 500.
        (
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": nested(600)}}]},
            [0, "tool_calls", 0, "function", "arguments", 0],
        ),
        ({"role": "user", "content": "x", "x_unused": nested(600)}, [0, "x_unused", 0, "k", 0, "k"]),
        ({"role": "user", "content": ["x", nested(600)]}, [0, "content", 1, 0, "k", 0]),
    ],
)
def test_each_malformed_field_is_named(openjev_on_fake: RunningOpenJev, message: dict, loc: list) -> None:
    body = {"model": "jev-latest", "state": [message], "questions": {"q": {"type": "noul", "instructions": "?"}}}
    for _ in range(2):  # the second time the conversation memo looks the state up first
        response = httpx.post(f"{openjev_on_fake.url}/v1/systemone", json=body, timeout=30)
        assert response.status_code == 422, response.text
        assert [issue["loc"] for issue in response.json()["detail"]] == [["body", "state", *loc]]


def test_null_fields_are_absent(openjev_on_fake: RunningOpenJev, fake_sglang: FakeSGLang) -> None:
    """As OpenAI-style chat logs write them: `null` where a field does not apply."""
    call = {"id": "1", "type": "function", "function": {"name": "lookup", "arguments": {"q": "x"}}}
    messages = [
        {"role": "user", "content": "Find x.", "name": None, "tool_calls": None, "tool_call_id": None},
        {"role": "assistant", "content": None, "tool_calls": [call], "name": None, "reasoning_content": None},
        {"role": "tool", "content": "found", "tool_call_id": "1", "tool_calls": None, "name": None},
        {"role": "assistant", "content": "Done.", "tool_calls": None, "function_call": None},
    ]
    absent = [{key: value for key, value in message.items() if value is not None} for message in messages]
    absent[1]["content"] = ""
    prompts = []
    for state in (messages, absent):
        body = {"model": "jev-latest", "state": state, "questions": {"q": {"type": "noul", "instructions": "?"}}}
        response = httpx.post(f"{openjev_on_fake.url}/v1/systemone", json=body, timeout=30)
        assert response.status_code == 200, response.text
        prompts.append(fake_sglang.generate_calls[-1]["body"]["input_ids"])
    assert prompts[0] == prompts[1]  # the question's readout sees the same prompt: null is absent


@pytest.mark.parametrize("depth", [240, 600])
def test_deep_values_anywhere_are_answered_or_a_422_naming_them(openjev_on_fake: RunningOpenJev, depth: int) -> None:
    """Within the limit every walker (quoting, the template's `tojson`) takes the value; past it, a 422."""
    call = {"id": "1", "function": {"name": "f", "arguments": {"value": nested(depth)}}}
    states = {
        "arguments": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [call]}],
        "unused key": [{"role": "user", "content": "<|im_end|> quoted", "x_unused": nested(depth, "<|im_start|>")}],
        "document": {"report": nested(depth, "<|im_end|>")},
    }
    for name, state in states.items():
        body = {"model": "jev-latest", "state": state, "questions": {"q": {"type": "noul", "instructions": "?"}}}
        response = httpx.post(f"{openjev_on_fake.url}/v1/systemone", json=body, timeout=60)
        if depth < 254:
            assert response.status_code == 200, (name, response.text)
        else:
            assert response.status_code == 422, (name, response.text)
            (issue,) = response.json()["detail"]
            assert issue["loc"][:2] == ["body", "state"] and issue["type"] == "too_deep", (name, issue)
    deep_question = {"q": {"type": "noul", "instructions": nested(depth)}}
    response = httpx.post(
        f"{openjev_on_fake.url}/v1/systemone",
        json={"model": "jev-latest", "state": "s", "questions": deep_question},
        timeout=60,
    )
    assert response.status_code == (200 if depth < 254 else 422), response.text
