"""Chat states with wrong types in every message field, against a real openjev on the fake SGLang: each
is answered or refused with a 422 naming a field inside the state, never a 5xx."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import RunningOpenJev

pytestmark = [pytest.mark.robustness, pytest.mark.timeout(240)]

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6,
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


@pytest.mark.parametrize(
    ("message", "loc"),
    [
        ({"role": ["user"], "content": "x"}, [0, "role"]),
        ({"role": {"a": 1}, "content": "x"}, [0, "role"]),
        ({"role": "assistant", "content": "x", "reasoning_content": 3}, [0, "reasoning_content"]),
        ({"role": "assistant", "content": "", "tool_calls": "call"}, [0, "tool_calls"]),
        ({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": 1}}]},
         [0, "tool_calls", 0, "function", "name"]),
        ({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": 2}}]},
         [0, "tool_calls", 0, "function", "arguments"]),
        ({"role": "tool", "content": "x", "tool_call_id": ["1"]}, [0, "tool_call_id"]),
    ],
)  # fmt: skip
def test_each_malformed_field_is_named(openjev_on_fake: RunningOpenJev, message: dict, loc: list) -> None:
    body = {"model": "jev-latest", "state": [message], "questions": {"q": {"type": "noul", "instructions": "?"}}}
    for _ in range(2):  # the second time the conversation memo looks the state up first
        response = httpx.post(f"{openjev_on_fake.url}/v1/systemone", json=body, timeout=30)
        assert response.status_code == 422, response.text
        assert [issue["loc"] for issue in response.json()["detail"]] == [["body", "state", *loc]]
