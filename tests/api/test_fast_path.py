"""`POST /v1/systemone`'s fast path: it reads exactly what the route reads, and answers as the route does.

The route is reached with a `+json` content type (FastAPI reads it as JSON; the fast path leaves it to
the route), so the same request can be answered both ways and compared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from openjev.api import create_app
from openjev.api.parsing import Parsed, is_json_type, parse_body
from openjev.api.strict_json import StrictJSONRequest, loads_if_same, loads_strict, lone_surrogate_at
from openjev.examples import support_ticket
from openjev.request.decision_schema import DecisionRequest
from openjev.request.schema import SystemOneRequest
from tests.api.test_routes import InstantBackend, _eventually_ready, settings_for

ROUTE_ONLY = "application/vnd.openjev+json"
#: Integers at the edges of what orjson reads exactly ([-2**63, 2**64 - 1]) and of the digit counts.
BOUNDARY_INTEGERS = sorted(
    {
        edge + step
        for edge in (2**63, -(2**63), 2**64, -(2**64), 10**18, -(10**18), 10**19, -(10**19))
        for step in (-1, 0, 1)
    }
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from(BOUNDARY_INTEGERS)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from("abcde") | st.text(), inner, max_size=4)
    ),
    max_leaves=20,
)
number_literals = st.sampled_from([str(value) for value in BOUNDARY_INTEGERS]) | st.from_regex(
    r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,24})?([eE][+-]?[0-9]{1,3})?", fullmatch=True
)


def same_value(data: bytes) -> None:
    """`loads_if_same` gives None or `loads_strict`'s value: same types (1 is not 1.0), keys in the same order."""
    fast = loads_if_same(data)
    if fast is not None:
        assert json.dumps(fast) == json.dumps(loads_strict(data))


@given(json_values, st.booleans())
def test_orjson_is_used_only_where_it_reads_the_same_value(value, ascii_only) -> None:
    same_value(json.dumps(value, ensure_ascii=ascii_only).encode())


@settings(max_examples=300)
@given(st.lists(number_literals, min_size=1, max_size=5))
def test_number_literals_read_the_same_or_are_left_to_the_strict_parser(literals) -> None:
    same_value(f"[{', '.join(literals)}]".encode())


@pytest.mark.parametrize(
    "data",
    [
        b"[12345678901234567890123]",  # orjson: a float; the route: an integer
        b"[" * 300 + b"]" * 300,  # deeper than orjson writes back; near the route's own limit
        b'{"a": "\\ud800"}',  # a lone surrogate the route reads (and validation names)
        b"[NaN]",
        b"\xff",
    ],
)
def test_what_orjson_might_read_differently_or_refuses_is_left_to_the_route(data: bytes) -> None:
    assert loads_if_same(data) is None


@pytest.mark.parametrize("value", BOUNDARY_INTEGERS)
def test_every_boundary_integer_reads_the_same(value: int) -> None:
    for data in (f"[{value}]".encode(), f'{{"n": {value}, "s": "-12"}}'.encode()):
        same_value(data)
        assert loads_strict(data) == json.loads(data)


#: Pieces of JSON string text around `\\u` escapes: runs of backslashes, high and low surrogates, pairs.
ESCAPE_PIECES = [
    "\\\\",
    "\\u0041",
    "\\ud800",
    "\\uDBFF",
    "\\udc00",
    "\\uDFFF",
    "\\ud83d\\ude00",
    "u",
    "d800",
    "x",
    "\\n",
]


@settings(max_examples=500)
@given(st.lists(st.sampled_from(ESCAPE_PIECES), max_size=12))
def test_a_lone_surrogate_is_found_where_the_decoded_text_holds_one(pieces) -> None:
    data = ('{"s": "' + "".join(pieces) + '"}').encode()
    decoded = json.loads(data)["s"]
    lone = any(0xD800 <= ord(character) <= 0xDFFF for character in decoded)
    position = lone_surrogate_at(data)
    assert (position is not None) == lone
    if lone:  # where the first one's escape starts: the text before it decodes without one
        assert data[position : position + 2] == b"\\u"
        before = json.loads(data[:position] + b'"}')["s"]
        assert not any(0xD800 <= ord(character) <= 0xDFFF for character in before)


def test_repeated_keys_keep_the_last_value_at_the_first_place() -> None:
    data = b'{"a": 1, "b": 2, "a": 3}'
    assert list(loads_if_same(data).items()) == list(loads_strict(data).items()) == [("a", 3), ("b", 2)]


def test_only_json_bodies_that_validate_take_the_fast_path() -> None:
    body = json.dumps(support_ticket()).encode()
    assert parse_body(body, "application/json", SystemOneRequest).request is not None
    assert parse_body(body, "Application/JSON; charset=utf-8", SystemOneRequest).request is not None
    for content_type in (None, "text/plain", ROUTE_ONLY, "application/json-seq", "application/jsonx"):
        assert parse_body(body, content_type, SystemOneRequest) == Parsed(), content_type
    assert is_json_type(" application/json ;charset=utf-8")
    # A few issues are the route's to list; so is an empty body.
    assert parse_body(b'{"model": "jev-latest"}', "application/json", SystemOneRequest) == Parsed()
    assert parse_body(b"", "application/json", SystemOneRequest) == Parsed()


@pytest.fixture(scope="module")
def backend() -> InstantBackend:
    return InstantBackend()


@pytest.fixture(scope="module")
def client(qwen_tokenizer_dir: Path, backend: InstantBackend):
    with TestClient(create_app(settings_for(qwen_tokenizer_dir), backend)) as http:
        assert _eventually_ready(http)
        yield http


@pytest.fixture
def route_reads(monkeypatch) -> list[bytes]:
    """The bodies the FastAPI route parsed (`StrictJSONRequest.json`, which only the route calls)."""
    reads: list[bytes] = []
    parse = StrictJSONRequest.json

    async def recording(request: StrictJSONRequest):
        reads.append(await request.body())
        return await parse(request)

    monkeypatch.setattr(StrictJSONRequest, "json", recording)
    return reads


def both_ways(client: TestClient, body: bytes, route_reads: list[bytes], fast: bool = True):
    """The body as `application/json` (by the fast path when `fast`) and as `ROUTE_ONLY` (by the route)."""
    responses = []
    for content_type, by_route in (("application/json", not fast), (ROUTE_ONLY, True)):
        before = len(route_reads)
        responses.append(client.post("/v1/systemone", content=body, headers={"content-type": content_type}))
        assert route_reads[before:] == ([body] if by_route else []), content_type
    return responses


def test_the_fast_path_answers_as_the_route_does(client, route_reads) -> None:
    for request in (support_ticket(), {**support_ticket(), "model": "jev-thinking-not-served"}):
        body = json.dumps(request).encode()
        both_ways(client, body, route_reads)  # content-free readouts of new score texts, once
        fast, route = both_ways(client, body, route_reads)
        assert fast.status_code == route.status_code
        assert fast.json() == route.json()
        for header in ("content-type", "x-openjev-prefix-tokens"):
            assert fast.headers.get(header) == route.headers.get(header)
        assert fast.headers["x-typesafe-request-id"] != route.headers["x-typesafe-request-id"]


def test_both_paths_send_the_same_prompt_ids_for_boundary_numbers(
    client, backend, route_reads, qwen_tokenizer_dir: Path
) -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(qwen_tokenizer_dir / "tokenizer.json"))

    def body(value: int) -> bytes:
        return json.dumps({**support_ticket(), "state": {"n": value, "f": -1.5e-300}}).encode()

    both_ways(client, body(0), route_reads)  # content-free readouts of new score texts, once
    by_fast_path = set()
    for value in BOUNDARY_INTEGERS:
        fast = loads_if_same(body(value)) is not None
        by_fast_path |= {value} if fast else set()
        before = len(backend.calls)
        # Read by orjson or by the strict parser, a valid body is answered by the fast path either way.
        answers = [response.json() for response in both_ways(client, body(value), route_reads)]
        # The content-free readouts aside (read the first way only, the first time a question text is seen),
        # each way: the warm-up, the noul, the choice (in two rotations where the first is unsure), the score.
        calls = [list(call.input_ids) for call in backend.calls[before:]]
        sent = [ids for ids in calls if "N/A" not in tokenizer.decode(ids)]
        half = len(sent) // 2
        assert half in (4, 5) and sent[:half] == sent[half:] and answers[0] == answers[1]
        assert str(value) in tokenizer.decode(sent[0])
    assert {2**63 - 1, 2**63, 10**19 - 1, -(10**18) + 1} <= by_fast_path
    assert by_fast_path.isdisjoint({-(2**63) - 1, 2**64, -(10**19)})


def test_invalid_requests_get_the_routes_own_errors(client, route_reads) -> None:
    ticket = support_ticket()
    for request in ({**ticket, "questions": {}}, {**ticket, "state": None}, [ticket], {"model": 1}):
        fast, route = both_ways(client, json.dumps(request).encode(), route_reads, fast=False)
        assert fast.status_code == route.status_code == 422
        assert fast.json() == route.json()


def test_the_largest_request_a_contract_allows_passes_the_work_bounds() -> None:
    """200 `/v1/decisions` choice questions of 255 described options (OpenAI's most) and 200 System One
    choice questions of 255 options are validated, not refused by a work bound."""
    choices = [{"value": f"option {j}", "description": f"Option number {j}"} for j in range(255)]
    questions = [{"type": "choice", "name": f"q{i}", "instructions": "Which?", "choices": choices} for i in range(200)]
    decisions = json.dumps({"model": "gpt-6-luna", "input": "hello", "questions": questions}).encode()
    parsed = parse_body(decisions, "application/json", DecisionRequest)
    assert parsed.rejection is None and parsed.request is not None and len(parsed.request.questions) == 200
    criteria = {f"opt{j}": f"Option number {j}" for j in range(255)}
    jev = {f"q{i}": {"type": "choice", "instructions": "Which?", "criteria": criteria} for i in range(200)}
    systemone = json.dumps({"model": "jev-latest", "state": "hi", "questions": jev}).encode()
    parsed = parse_body(systemone, "application/json", SystemOneRequest)
    assert parsed.rejection is None and parsed.request is not None and len(parsed.request.questions) == 200


@pytest.mark.parametrize(
    "state",
    [
        " , ".join(["[" * 50 + "]" * 50] * 6_000),  # 50-deep empty lists: no comma after a value's end
        "[" * 40 + "[] ," * 140_000 + "[]" + "]" * 40,  # nested, spaced before the comma
        "{}" + " ,{ }" * 140_000,
    ],
    ids=["deep-empty-lists", "nested-spaced", "spaced-empty-objects"],
)
def test_values_are_bounded_whatever_their_shape(state: str) -> None:
    """Every value is counted before parsing, the state's too: values <= 1 + commas + `[` + `{`, so
    empty, nested and spaced containers are refused unparsed past MAX_JSON_VALUES."""
    body = b'{"model": "jev-latest", "state": [' + state.rstrip(",").encode() + b'], "questions": {}}'
    parsed = parse_body(body, "application/json", SystemOneRequest)
    assert parsed.rejection is not None and parsed.rejection[0]["type"] == "too_long"
    assert parsed.rejection[0]["loc"] == ["body"]
