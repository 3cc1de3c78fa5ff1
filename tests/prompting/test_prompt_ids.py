"""`PromptIds`: a shared prefix and a suffix behave as their joined list, and write the same JSON."""

import json

import orjson
from hypothesis import given
from hypothesis import strategies as st

from openjev.prompting.prompt_ids import PromptIds, SharedIds, json_ids

ids = st.lists(st.integers(min_value=0, max_value=2**31 - 1), max_size=40)


@given(ids, ids, st.integers(min_value=-50, max_value=50), st.integers(min_value=-50, max_value=50))
def test_a_prompt_is_its_joined_list(prefix: list[int], suffix: list[int], start: int, stop: int) -> None:
    prompt, joined = PromptIds(SharedIds(prefix), suffix), prefix + suffix
    assert len(prompt) == len(joined)
    assert list(prompt) == joined and tuple(prompt) == tuple(joined)
    assert prompt[start:stop] == joined[start:stop]
    if joined:
        assert prompt[start % len(joined)] == joined[start % len(joined)]
        assert prompt[-1] == joined[-1]
    assert prompt == joined and joined == prompt
    assert prompt != [*joined, 0]


@given(ids, st.lists(ids, min_size=1, max_size=4))
def test_the_json_is_orjsons_and_the_shared_part_is_written_once(prefix: list[int], suffixes: list[list[int]]) -> None:
    shared = SharedIds(prefix)
    for suffix in suffixes:
        written = orjson.dumps({"input_ids": json_ids(PromptIds(shared, suffix))})
        assert written == orjson.dumps({"input_ids": prefix + suffix})
        assert json.loads(written)["input_ids"] == prefix + suffix
    first = shared.json_items()
    assert shared.json_items() is first


def test_plain_sequences_are_written_as_lists() -> None:
    assert orjson.dumps(json_ids((1, 2, 3))) == b"[1,2,3]"
    assert orjson.dumps(json_ids([])) == b"[]"
    assert orjson.dumps(json_ids(range(3))) == b"[0,1,2]"
