"""The tiktoken encoder gives the Qwen tokenizer's own ids, and is refused where it would not."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from openjev.prompting.fast_bpe import (
    SELF_CHECK_TEXTS,
    FastBPE,
    _byte_decoder,
    vocabulary_differences,
    vocabulary_texts,
)
from openjev.prompting.tokenizer import ChatTokenizer

PIECES = ["<think>", "<|im_end|>", "\n", "\n\n", "\r\n", "  ", "\t", " \n ", "日本語", "😀", "👍🏽", "e\u0301"]
PIECES += ["'s", "'LL", "12345", "١٢٣", "\u00a0", "\u3000", "\u200b", "\u2028", "\u0898\u0899"]
TEXT = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=12)), max_size=40).map("".join)


@pytest.fixture(scope="module")
def reference(qwen_tokenizer_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(str(qwen_tokenizer_dir / "tokenizer.json"))


@pytest.fixture(scope="module")
def fast(qwen_tokenizer_dir: Path, reference: Tokenizer, tmp_path_factory: pytest.TempPathFactory) -> FastBPE:
    loaded = FastBPE.load(qwen_tokenizer_dir / "tokenizer.json", reference, tmp_path_factory.mktemp("cache"))
    assert loaded is not None, "the Qwen tokenizer is the kind tiktoken can run"
    return loaded


def expected(reference: Tokenizer, texts: list[str]) -> list[list[int]]:
    return [encoding.ids for encoding in reference.encode_batch(texts, add_special_tokens=False)]


def assert_same_ids(fast: FastBPE, reference: Tokenizer, texts: list[str]) -> int:
    """The fast ids equal the reference's wherever the fast encoder takes the text; how many it took."""
    taken = [(text, ids) for text, ids in zip(texts, fast.encode_batch(texts), strict=True) if ids is not None]
    assert [ids for _, ids in taken] == expected(reference, [text for text, _ in taken])
    return len(taken)


def test_every_vocabulary_entry_encodes_the_same(reference: Tokenizer, fast: FastBPE) -> None:
    """Each token's own text (where its bytes are whole UTF-8) through both: any merge rule that is
    not the split tiktoken makes shows up here."""
    assert assert_same_ids(fast, reference, vocabulary_texts(reference)) > 140_000


def test_the_load_checks_every_vocabulary_entry_and_keeps_the_verdict_by_sha256(
    qwen_tokenizer_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = qwen_tokenizer_dir / "tokenizer.json"
    with caplog.at_level(logging.INFO, logger="openjev.prompting.fast_bpe"):
        assert ChatTokenizer(qwen_tokenizer_dir, tmp_path).fast
    (kept,) = (tmp_path / "tokenizer-checks").iterdir()
    verdict = json.loads(kept.read_text())
    assert kept.name == f"{hashlib.sha256(path.read_bytes()).hexdigest()}.json" == f"{verdict['sha256']}.json"
    assert verdict["same"] is True and verdict["entries"] > 140_000 and verdict["seconds"] > 0
    assert f"on {verdict['entries']} vocabulary entries in" in caplog.text
    # The kept verdict decides later loads of the same file: one saying "differs" turns the fast path off.
    kept.write_text(json.dumps({**verdict, "same": False}))
    assert not ChatTokenizer(qwen_tokenizer_dir, tmp_path).fast


def _drop_the_last_utf8_merge(config: dict[str, Any]) -> str:
    """Remove the merge rule of the last-merged vocabulary entry that is whole UTF-8, one no check text
    contains: tokenizers can no longer make that token, tiktoken (merging by rank) still does."""
    decoder = _byte_decoder()
    merges = config["model"]["merges"]
    for index in range(len(merges) - 1, 0, -1):
        token = "".join(merges[index] if isinstance(merges[index], list) else merges[index].split(" ", 1))
        try:
            text = bytes(decoder[char] for char in token).decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not any(text in check for check in SELF_CHECK_TEXTS):
            del merges[index]
            return text
    raise AssertionError("no such merge")


def test_a_difference_only_the_vocabulary_check_finds_turns_the_fast_path_off(
    qwen_tokenizer_dir: Path, tmp_path: Path
) -> None:
    dropped: list[str] = []
    path = _edited(
        qwen_tokenizer_dir, tmp_path / "edited", lambda config: dropped.append(_drop_the_last_utf8_merge(config))
    )
    reference = Tokenizer.from_file(str(path))
    fast = FastBPE._build(path, reference)
    assert fast is not None and all(
        fast.encode_batch([text]) == [reference.encode(text, add_special_tokens=False).ids] for text in SELF_CHECK_TEXTS
    )  # the few check texts alone would have let it through
    assert vocabulary_differences(fast, reference)[1] == dropped
    chat = ChatTokenizer(path.parent, tmp_path / "cache")
    assert not chat.fast
    assert chat.encode_batch(dropped) == [reference.encode(dropped[0], add_special_tokens=False).ids]


def test_every_code_point_encodes_the_same(reference: Tokenizer, fast: FastBPE) -> None:
    """Every Unicode scalar value alone, doubled, after a letter, before a space and a digit, and
    after a newline: the regex classes (letters, numbers, whitespace) and NFC must agree."""
    points = [chr(code) for code in range(sys.maxunicode + 1) if not 0xD800 <= code <= 0xDFFF]
    texts = []
    for start in range(0, len(points), 512):
        block = points[start : start + 512]
        texts.append(
            " ".join(block) + "\n" + "".join(c + c for c in block) + "\n" + "".join(f"a{c} 1\n{c}" for c in block)
        )
    assert assert_same_ids(fast, reference, texts) == len(texts)


@pytest.fixture(scope="module")
def chat(qwen_tokenizer_dir: Path) -> ChatTokenizer:
    loaded = ChatTokenizer(qwen_tokenizer_dir)
    assert loaded.fast
    return loaded


@settings(max_examples=400, deadline=None)
@given(texts=st.lists(TEXT, min_size=1, max_size=4))
def test_random_text_through_the_chat_tokenizer(chat: ChatTokenizer, texts: list[str]) -> None:
    for quoted, reference in ((False, chat.tokenizer), (True, chat._quoting)):
        assert chat.encode_batch(texts, quoted=quoted) == expected(reference, texts)


def test_large_batches_run_on_threads_and_keep_order(reference: Tokenizer, fast: FastBPE) -> None:
    texts = [f"Case {index}\n" + " ".join(f"word{index * j}" for j in range(3000)) for index in range(8)]
    assert fast.encode_batch(texts) == expected(reference, texts)


def test_a_whitespace_run_tiktoken_cannot_survive_is_left_to_tokenizers(chat: ChatTokenizer) -> None:
    """A run of a million spaces panics tiktoken's regex engine (a `BaseException`, not an `Exception`)."""
    texts = ["x" + " " * 1_000_010 + "y", "\u3000" * 1_000_010, "short text"]
    assert [ids is None for ids in chat._fast.encode_batch(texts)] == [True, True, False]  # type: ignore[union-attr]
    assert chat.encode_batch(texts) == expected(chat.tokenizer, texts)


def test_text_spelling_an_added_token_is_left_to_tokenizers(qwen_tokenizer_dir: Path, tmp_path: Path) -> None:
    """Also where only the normalised text spells it: U+037E (Greek question mark) is `;` after NFC,
    and an added token marked `normalized` is matched after normalising."""
    token = {"id": 151669, "content": "<semi;colon>", "single_word": False, "lstrip": False, "rstrip": False}
    token |= {"normalized": True, "special": False}
    path = _edited(qwen_tokenizer_dir, tmp_path / "edited", lambda config: config["added_tokens"].append(token))
    chat = ChatTokenizer(path.parent)
    assert chat.fast
    texts = ["a <think> b", "a <semi\u037ecolon> b", "a <semi;colon> b", "plain words"]
    assert [ids is None for ids in chat._fast.encode_batch(texts)] == [True, True, True, False]  # type: ignore[union-attr]
    ids = chat.encode_batch(texts)
    assert ids == expected(chat.tokenizer, texts) and 151669 in ids[1] and 151669 in ids[2]
    # Caller text spelling it, either way, is quoted, and then it is plain text.
    assert [chat.spells_added_token(text) for text in texts] == [True, True, True, False]
    assert all(151669 not in ids for ids in chat.encode_batch(texts, quoted=True))


GPT2_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True}


def _edited(source: Path, target: Path, edit: Any) -> Path:
    shutil.copytree(source, target)
    config = json.loads((target / "tokenizer.json").read_text(encoding="utf-8"))
    edit(config)
    (target / "tokenizer.json").write_text(json.dumps(config), encoding="utf-8")
    return target / "tokenizer.json"


def _swap_two_merges(config: dict[str, Any]) -> None:
    merges = config["model"]["merges"]
    merges[10], merges[11] = merges[11], merges[10]


def _drop_the_merge_of_and(config: dict[str, Any]) -> None:
    # " and" (in the load-time check's text) is then no longer one token for tokenizers, but tiktoken,
    # which merges by vocabulary rank, would still make it one.
    config["model"]["merges"] = [
        rule for rule in config["model"]["merges"] if rule not in (["Ġa", "nd"], "Ġa nd", ["Ġan", "d"], "Ġan d")
    ]


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda config: config.update(normalizer={"type": "NFKC"}), id="NFKC normalizer"),
        pytest.param(lambda config: config.update(pre_tokenizer=GPT2_BYTE_LEVEL), id="GPT-2 byte-level regex"),
        pytest.param(lambda config: config["model"].update(dropout=0.1), id="BPE dropout"),
        pytest.param(lambda config: config["model"]["vocab"].pop("Ā"), id="a byte without a token"),
        pytest.param(_swap_two_merges, id="merges out of id order"),
        pytest.param(_drop_the_merge_of_and, id="a token tiktoken would merge but tokenizers would not"),
    ],
)
def test_refused_where_it_would_differ(qwen_tokenizer_dir: Path, tmp_path: Path, edit: Any) -> None:
    path = _edited(qwen_tokenizer_dir, tmp_path / "edited", edit)
    assert FastBPE.load(path, Tokenizer.from_file(str(path)), tmp_path / "cache") is None
    assert not ChatTokenizer(path.parent, tmp_path / "cache").fast
