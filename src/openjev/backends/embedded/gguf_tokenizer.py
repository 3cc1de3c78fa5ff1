"""A GGUF's own tokenizer and chat template, written as the files openjev's prompt layer reads, with
`tokenizers` alone: no transformers, no torch, and about a second where transformers' GGUF converter
took 25 s on the 1.5B default (most of a first start).

Contract: for a vocabulary stored as byte-level BPE (`tokenizer.ggml.model` "gpt2") with a known
pre-tokenizer (`tokenizer.ggml.pre`, table `SPLIT_PATTERNS`), `write_gguf_tokenizer` writes
`tokenizer.json`, `tokenizer_config.json`, `chat_template.jinja` and a `config.json` of the model
facts into a directory, and the tokenizer built is the one transformers' GGUF converter builds
(tests compare both, token for token):

* the vocabulary is the GGUF's token list, index = id; a token spelled outside the byte-level
  alphabet (an added token such as `<|im_end|>` is, an ordinary one never is) is re-spelled byte by
  byte in it, as the converter does, so that every BPE piece is in one alphabet;
* the merges are the GGUF's, in rank order;
* text is split by the pre-tokenizer's regular expression (isolated matches), then mapped to the
  byte-level alphabet without a prefix space; decoding maps back;
* tokens of type CONTROL (3) become special added tokens and USER_DEFINED (4) plain added tokens
  (`<tool_call>`, `<think>`), both matched whole in text, as llama.cpp matches them. A CONTROL token
  spelled outside the byte-level alphabet after all is a mislabelled one and is left out.

`gguf_reads_without_transformers` says whether a file is of this kind; other vocabularies
(sentencepiece, unigram, an unknown split) still go through transformers (the `torch` extra).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN35_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
#: `tokenizer.ggml.pre` → the regular expression its merges were learned on (llama.cpp's names).
SPLIT_PATTERNS = {
    "qwen2": _QWEN2_SPLIT,
    "deepseek-r1-qwen": _QWEN2_SPLIT,
    "qwen35": _QWEN35_SPLIT,
    "llama3": _LLAMA3_SPLIT,
    "llama-v3": _LLAMA3_SPLIT,
    "llama-bpe": _LLAMA3_SPLIT,
    "smaug-bpe": _LLAMA3_SPLIT,
    "falcon3": _LLAMA3_SPLIT,
}
_CONTROL, _USER_DEFINED = 3, 4


def gguf_reads_without_transformers(metadata: dict[str, Any]) -> bool:
    """Whether this module builds the file's tokenizer: byte-level BPE with merges and a known split."""
    return (
        metadata.get("tokenizer.ggml.model") == "gpt2"
        and metadata.get("tokenizer.ggml.pre") in SPLIT_PATTERNS
        and bool(metadata.get("tokenizer.ggml.merges"))
        and isinstance(metadata.get("tokenizer.chat_template"), str)
    )


def write_gguf_tokenizer(metadata: dict[str, Any], out: Path) -> None:
    """tokenizer.json, tokenizer_config.json, chat_template.jinja and config.json into `out`."""
    tokens: list[str] = metadata["tokenizer.ggml.tokens"]
    byte_level_tokenizer(metadata).save(str(out / "tokenizer.json"))
    (out / "chat_template.jinja").write_text(metadata["tokenizer.chat_template"], encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(metadata), indent=2) + "\n")
    (out / "config.json").write_text(json.dumps(model_config(metadata, len(tokens)), indent=2) + "\n")


def byte_level_tokenizer(metadata: dict[str, Any]) -> Tokenizer:
    """The `tokenizers` object the module docstring describes."""
    tokens: list[str] = metadata["tokenizer.ggml.tokens"]
    token_types: list[int] = metadata.get("tokenizer.ggml.token_type") or []
    vocab = {_byte_level_spelling(token): index for index, token in enumerate(tokens)}
    merges = [tuple(merge.split(" ")) for merge in metadata["tokenizer.ggml.merges"]]
    tokenizer = Tokenizer(
        models.BPE(
            vocab=vocab,
            merges=merges,
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
            byte_fallback=False,
        )
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERNS[metadata["tokenizer.ggml.pre"]]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.TemplateProcessing(single="$A", pair="$A $B:1")
    letters = byte_level_letters()
    control = [
        AddedToken(token, normalized=False, special=True)
        for token, kind in zip(tokens, token_types, strict=False)
        if kind == _CONTROL and set(token) <= letters
    ]
    tokenizer.add_special_tokens(control)
    user_defined = [
        AddedToken(token, normalized=False, special=False)
        for token, kind in zip(tokens, token_types, strict=False)
        if kind == _USER_DEFINED and token in vocab
    ]
    tokenizer.add_tokens(user_defined)
    return tokenizer


def tokenizer_config(metadata: dict[str, Any]) -> dict[str, Any]:
    """The special tokens by role and whether a BOS is added, as tokenizer_config.json states them."""
    tokens: list[str] = metadata["tokenizer.ggml.tokens"]

    def token(role: str) -> str | None:
        index = metadata.get(f"tokenizer.ggml.{role}_token_id")
        return tokens[index] if isinstance(index, int) and 0 <= index < len(tokens) else None

    return {
        "bos_token": token("bos"),
        "eos_token": token("eos"),
        "pad_token": token("padding"),
        "unk_token": token("unknown"),
        "add_bos_token": bool(metadata.get("tokenizer.ggml.add_bos_token", False)),
        "add_eos_token": bool(metadata.get("tokenizer.ggml.add_eos_token", False)),
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def model_config(metadata: dict[str, Any], vocab_size: int) -> dict[str, Any]:
    """The model facts openjev reports and checks (no weights are loaded from it: llama.cpp reads the
    GGUF itself); a text-only model, so no `vision_config`."""
    architecture = metadata["general.architecture"]
    return {
        "model_type": architecture,
        "vocab_size": vocab_size,
        "max_position_embeddings": metadata.get(f"{architecture}.context_length"),
        "bos_token_id": metadata.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": metadata.get("tokenizer.ggml.eos_token_id"),
        "name": metadata.get("general.name"),
    }


@cache
def byte_level_alphabet() -> dict[int, str]:
    """GPT-2's byte → character table: printable Latin-1 bytes stand for themselves, the other 68
    bytes take the characters from U+0100 upward in byte order, so every byte has a visible letter."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {byte: chr(byte) for byte in printable}
    for offset, byte in enumerate(byte for byte in range(256) if byte not in table):
        table[byte] = chr(256 + offset)
    return table


@cache
def byte_level_letters() -> frozenset[str]:
    return frozenset(byte_level_alphabet().values())


def _byte_level_spelling(token: str) -> str:
    if set(token) <= byte_level_letters():
        return token
    alphabet = byte_level_alphabet()
    return "".join(alphabet[byte] for byte in token.encode("utf-8"))
