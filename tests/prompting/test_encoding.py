"""`PromptEncoder` gives exactly the ids of whole-text encoding, on the real Qwen tokenizer, and caches."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openjev.prompting.encoding import CHUNK_CHARS, CUT_SHARE, FIRST_ROUND_CHARS, RUN_CHARS, PromptEncoder, TokenCache
from openjev.prompting.tokenizer import ChatTokenizer, Segment

PIECES = [
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<think>",
    "\n",
    "\n\n",
    "\r\n",
    "  ",
    "\t",
    " \n ",
    "日本語",
    "中文字符",
    "😀",
    "👍🏽",
    "é",
    "e\u0301",
    "'s",
    "don't",
    "12345",
    "x = [1, 2];",
    "    return f(x)\n",
]
TEXT = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=12)), max_size=40).map("".join)


@pytest.fixture(scope="module")
def chat(qwen_tokenizer_dir: Path) -> ChatTokenizer:
    return ChatTokenizer(qwen_tokenizer_dir)


@pytest.fixture(scope="module")
def encoder(chat: ChatTokenizer) -> PromptEncoder:
    return PromptEncoder(chat, cache_bytes=1 << 20)


def test_both_cuts_hold_on_the_qwen_tokenizer(encoder: PromptEncoder) -> None:
    assert encoder.cuts_at_special_tokens and encoder.cuts_long_text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(segments=st.lists(st.tuples(TEXT, st.booleans()), min_size=1, max_size=6))
def test_equal_to_whole_encoding_for_any_segments(
    chat: ChatTokenizer, encoder: PromptEncoder, segments: list[Segment]
) -> None:
    expected = chat.encode_segments(segments)
    assert encoder.encode_many([segments]) == [expected]
    assert encoder.encode_many([segments]) == [expected]  # from the cache


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(TEXT, min_size=1, max_size=400))
def test_long_text_cut_into_chunks_equals_the_whole(chat: ChatTokenizer, encoder: PromptEncoder, lines) -> None:
    block = "\n".join(lines) + "\nnext"
    text = block * (1 + (3 * CHUNK_CHARS) // len(block))
    assert len(text) > CHUNK_CHARS
    assert encoder.encode_many([[(text, False)], [(text, True)]]) == [
        chat.encode_segments([(text, False)]),
        chat.encode_segments([(text, True)]),
    ]


def test_text_over_several_rounds_equals_the_whole(chat: ChatTokenizer) -> None:
    encoder = PromptEncoder(chat, cache_bytes=1 << 24)
    lines = [f"line {i}: {'日本語 ' * (i % 7)}{'word ' * (i % 13)}<|im_end|> 😀" for i in range(8000)]
    text = "\n".join(lines)
    assert len(text) > 4 * FIRST_ROUND_CHARS  # three rounds at least: 1, 2 and 4 times the first
    prompts = [[(text, False)], [("short", False), (text, True)]]
    expected = [chat.encode_segments(prompt) for prompt in prompts]
    seen: list[list[int]] = []
    # A watch that never stops it: every round's counts are lower bounds, the ids the whole encoding's.
    assert encoder.encode_many(prompts, lambda counts: seen.append(list(counts)) or 1 << 30) == expected
    assert len(seen) >= 3 and all(c <= len(ids) for counts in seen for c, ids in zip(counts, expected, strict=True))
    # Every id made by the tokenizer counted, but the 8,000 special ids the unquoted text spells: those are cut.
    assert encoder.tokenized == sum(map(len, expected)) - 8000


class Over(Exception):
    pass


def stop_past(limits: list[int]):
    def watch(counts):
        for index, (count, limit) in enumerate(zip(counts, limits, strict=True)):
            if count > limit:
                raise Over(index, count)
        return sum(limits) - sum(counts)

    return watch


def test_a_prompt_over_its_limit_stops_the_encoding_early(chat: ChatTokenizer) -> None:
    encoder = PromptEncoder(chat, cache_bytes=1 << 24)
    text = "\n".join(f"record {i}: {'x' * (i % 50)} ✓" for i in range(40000))
    whole = len(chat.encode(text))
    with pytest.raises(Over) as over:
        encoder.encode_many([[("short", False)], [(text, False)]], stop_past([100, 1000]))
    index, tokens = over.value.args
    assert index == 1
    # Stopped after a round sized to what was left: over the limit, far less than the whole text.
    assert 1000 < tokens < whole / 20 and encoder.tokenized < whole / 20
    assert encoder.cache.get((text, False)) is None  # nothing half-encoded is cached
    # With all text encoded in one round, the ids come back and the caller's budget check counts them.
    assert encoder.encode_many([[("a few words over a tiny limit", False)]], stop_past([2])) == [
        chat.encode("a few words over a tiny limit")
    ]


#: Characters of each script that make runs the pre-tokenizer cannot be cut in exactly.
RUN_ALPHABETS = [
    "0123456789",
    "日本語中文字符漢",
    "abcdefghij",
    "abab",
    "-=_*#",
    "😀👍🏽",
    "é\u0301",
    " \t",
    "\u0627\u0644\u0639",
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    alphabet=st.sampled_from(RUN_ALPHABETS),
    length=st.integers(min_value=RUN_CHARS - 3, max_value=4 * RUN_CHARS),
    seed=st.integers(min_value=0, max_value=2**16),
    around=st.tuples(TEXT, TEXT),
    quoted=st.booleans(),
)
def test_runs_with_no_exact_cut_give_the_whole_ids(
    chat: ChatTokenizer, alphabet: str, length: int, seed: int, around: tuple[str, str], quoted: bool
) -> None:
    """A run longer than RUN_CHARS is cut anywhere for counting, its ids still the whole encoding's, and
    every count the watch sees a lower bound: the run's pieces hold under CUT_SHARE times its ids."""
    import random

    rng = random.Random(seed)
    run = "".join(rng.choice(alphabet) for _ in range(length))
    prompt = [(around[0] + run + around[1], quoted)]
    expected = chat.encode_segments(prompt)
    seen: list[int] = []
    encoder = PromptEncoder(chat, cache_bytes=0)
    assert encoder.encode_many([prompt], lambda counts: seen.append(counts[0]) or 1 << 30) == [expected]
    assert all(count <= len(expected) for count in seen)
    whole = PromptEncoder(chat, cache_bytes=0)
    pieces = sum(len(chat.encode(run[at : at + CHUNK_CHARS])) for at in range(0, len(run), CHUNK_CHARS))
    assert pieces < CUT_SHARE * len(whole.encode_many([[(run, False)]])[0])


@pytest.mark.parametrize("run", ["7" * 12_000_000, "語" * 4_000_000, "a" * 12_000_000, " \t" * 3_000_000])
def test_a_run_over_the_budget_stops_within_about_the_budget(chat: ChatTokenizer, run: str) -> None:
    """No place to cut exactly, far over a 32,768-token limit: stopped after about CUT_SHARE times the
    limit is tokenized, whatever the script."""
    encoder = PromptEncoder(chat, cache_bytes=1 << 24)
    with pytest.raises(Over):
        encoder.encode_many([[("state: " + run, False)]], stop_past([32768]))
    assert encoder.tokenized < 4 * CUT_SHARE * 32768


def test_a_grown_conversation_tokenizes_only_the_new_message(chat: ChatTokenizer) -> None:
    encoder = PromptEncoder(chat, cache_bytes=1 << 20)
    turns = [f"<|im_start|>user\nmessage number {i}: {'words ' * 50}<|im_end|>\n" for i in range(40)]
    encoder.encode_many([[("".join(turns), False)]])
    before = encoder.cache.misses
    grown = "".join(turns) + "<|im_start|>assistant\na new reply<|im_end|>\n"
    assert encoder.encode_many([[(grown, False)]]) == [chat.encode(grown)]
    assert encoder.cache.misses - before == 1


def test_cache_is_bounded_in_bytes() -> None:
    from array import array

    cache = TokenCache(capacity_bytes=1000)
    for index in range(50):
        cache.put((f"text {index}", False), array("i", range(20)))
    assert cache.bytes <= 1000
    assert cache.get(("text 49", False)) is not None and cache.get(("text 0", False)) is None
    TokenCache(0).put(("x", False), array("i", [1]))  # a capacity of 0 stores nothing
