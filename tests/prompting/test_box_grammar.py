"""The box answer's grammar on the real Qwen3 tokenizer: the regex, the token mask and the parse agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openjev.prompting.box_grammar import BoxGrammar, cap_for, number_regex
from openjev.prompting.tokenizer import ChatTokenizer


@pytest.fixture(scope="module")
def chat(qwen_tokenizer_dir: Path) -> ChatTokenizer:
    return ChatTokenizer(qwen_tokenizer_dir)


@pytest.fixture(scope="module")
def grammar(chat: ChatTokenizer) -> BoxGrammar:
    return BoxGrammar.of(chat)


@given(st.lists(st.integers(0, 1000), min_size=4, max_size=4))
def test_every_box_is_in_the_regex_the_mask_and_the_parse(chat, grammar, numbers) -> None:
    text = ", ".join(map(str, numbers)) + "]}"
    assert re.fullmatch(grammar.regex, text)
    ids = chat.encode(text)
    assert len(ids) < grammar.max_tokens  # one more: the trailing stop id
    for end in range(len(ids)):
        assert ids[end] in grammar.allowed_after(ids[:end])
    assert grammar.allowed_after(ids) == ()
    positions = grammar.parse(ids)
    assert [int("".join(map(str, grammar.digits(ids, places)))) for places in positions] == numbers


def test_the_mask_refuses_what_the_regex_refuses(chat, grammar) -> None:
    zero, one = grammar.digit_ids[0], grammar.digit_ids[1]
    assert grammar.allowed_after(chat.encode("0")) == (grammar.separator_ids[0],)  # no leading zero
    assert zero in grammar.allowed_after(chat.encode("100")) and one not in grammar.allowed_after(chat.encode("100"))
    assert grammar.allowed_after(chat.encode("1000")) == (grammar.separator_ids[0],)
    last = grammar.allowed_after(chat.encode("1, 2, 3, 4"))
    assert grammar.close_ids[0] in last and set(grammar.digit_ids) <= set(last)
    assert grammar.separator_ids[0] not in grammar.allowed_after(chat.encode("1, 2, 3, 4"))
    assert not re.fullmatch(grammar.regex, "01, 2, 3, 4]}") and not re.fullmatch(grammar.regex, "1001, 2, 3, 4]}")


@pytest.mark.parametrize("text", ["1, 2, 3]}", "1, 2, 3, 4", "1, 2, 3, 4]}5", "1,, 2, 3, 4]}"])
def test_what_is_not_a_whole_box_does_not_parse(chat, grammar, text) -> None:
    with pytest.raises(ValueError):
        grammar.parse(chat.encode(text))


def test_a_trailing_stop_id_parses_and_nothing_else_does(chat, grammar) -> None:
    ids = chat.encode("1, 2, 3, 4]}")
    stop = chat.tokenizer.token_to_id("<|im_end|>")
    assert grammar.parse([*ids, stop], stops=[stop]) == grammar.parse(ids)
    with pytest.raises(ValueError):
        grammar.parse([*ids, stop], stops=[])
    with pytest.raises(ValueError):
        grammar.parse([*ids, stop, stop], stops=[stop])


@pytest.mark.parametrize(
    ("largest", "cap", "inside", "outside"),
    [(1000, 1000, ["0", "1000", "999"], ["1001", "01"]), (14142, 99999, ["0", "99999", "14142"], ["100000", "007"])],
)
def test_the_cap_fits_the_grounding_scale(chat, largest, cap, inside, outside) -> None:
    assert cap_for(largest) == cap
    pixels = BoxGrammar.of(chat, largest)
    assert pixels.cap == cap and pixels.max_tokens == 4 * len(str(cap)) + 3 * 2 + 1 + 1
    for number in inside:
        assert re.fullmatch(number_regex(cap), number)
        ids = chat.encode(number)
        assert all(ids[end] in pixels.allowed_after(ids[:end]) for end in range(len(ids)))
    for number in outside:
        assert not re.fullmatch(number_regex(cap), number)
        ids = chat.encode(number)
        assert any(ids[end] not in pixels.allowed_after(ids[:end]) for end in range(len(ids)))
