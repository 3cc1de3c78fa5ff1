r"""Byte-level BPE on tiktoken's encoder, used only where it gives the model tokenizer's own ids.

Contract: for a tokenizer this module accepts, `FastBPE.encode_batch(texts)` gives, for each text,
the ids of `tokenizers.Tokenizer.encode_batch(texts, add_special_tokens=False)`, or None where the
text spells an added token: matching those (special or not, with their strip and normalisation
flags) stays the job of `tokenizers`; or None for a text of `MAX_CHARS` or more, which tiktoken may
not survive (below). tiktoken encodes about ten times faster on one core (MMLU-Pro
text: 27 ms against 269 ms for 57k tokens), which is most of what openjev spends on a new long state.

Why the ids are the same. A `tokenizer.json` is accepted only when it is a byte-level BPE of the kind
tiktoken runs (Qwen's, converted from tiktoken ranks):
- normalizer none or NFC, applied with the tokenizer's own normalizer (Python's `unicodedata` follows a
  newer Unicode and reorders marks tokenizers leaves alone, U+0898 U+0899 for one), skipped for ASCII;
- pre-tokenizer: one regex `Split` (isolated, not inverted) then `ByteLevel` without its own regex, so
  pre-tokens are the regex's matches, which tiktoken computes with the same pattern;
- model: BPE with no dropout, unknown token, subword prefix/suffix or byte fallback; every single
  byte is a token; merge k yields a token whose id grows with k. tokenizers applies the lowest-ranked
  merge rule first; tiktoken merges the adjacent pair whose concatenation has the lowest id. With ids
  in merge order these orders agree, and for vocabularies converted from tiktoken ranks each token's
  merge rule is the split tiktoken itself makes, so both take the same steps.
The last point is a property of the files, not of the format, so it is checked on the tokenizer
actually loaded: on a few tricky texts (`SELF_CHECK_TEXTS`) and on the text of every vocabulary entry
that is whole UTF-8 (any merge rule that is not the split tiktoken makes shows up there); any
difference and the fast encoder is not used. The full check takes seconds (about 5 s for Qwen3's
150k entries on 2 cores), so its verdict is kept in `<cache dir>/tokenizer-checks/<sha256 of
tokenizer.json>.json` with the tiktoken and tokenizers versions it was made with, and later loads of
the same file with the same versions read it. The test suite also checks every Unicode code point and
random text on the real Qwen tokenizer.

Why long texts go to `tokenizers`. tiktoken's regex engine backtracks within a limit of about a
million steps per match, and the pattern's `\s+(?!\S)` takes one step per character of a whitespace
run: on Qwen's pattern a run of 1,000,010 spaces (or NBSPs, or ideographic spaces) panics
(`pyo3_runtime.PanicException`, "StackOverflow") where 999,990 encode; a body of 1 MB of spaces did.
The encoder cuts text into chunks of about 8k characters wherever cutting is exact
(`openjev.prompting.encoding`), which a whitespace run never is, so only such runs (and other texts
with no place to cut) reach here this long; `tokenizers`' engine encodes them (1 MB of spaces in 2.8 s).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import itertools
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import tiktoken
from tokenizers import Tokenizer
from tokenizers.normalizers import Normalizer

log = logging.getLogger(__name__)

#: Texts this long go to `tokenizers` (module doc): a quarter of the run on which tiktoken panics.
MAX_CHARS = 250_000
#: Below this many characters in a batch, threads cost more than they save.
PARALLEL_CHARS = 16_384
#: Texts that exercise what encoders disagree on; checked whenever a tokenizer loads.
SELF_CHECK_TEXTS = (
    "plain words, numbers 12345 and punctuation!?  'S 'LL don't",
    "  leading spaces\n\n\ttabs\n  \nnew lines\r\nwindows\n日本語のテキスト\n😀 emoji 👍🏽\nend  ",
    "code:\n    def f(x):\n        return x ** 2\n\n\nprint(f(3))\n",
    "'s 're 'll contractions\nDon't\n'quoted'\n",
    "composed e\u0301 and \u212b, Ω; numbers ١٢٣ ⅷ; zero\u200bwidth; \u00a0nbsp\u3000ideographic",
)


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the printable character that stands for each byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {byte: chr(byte) for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in chars:
            chars[byte] = chr(256 + extra)
            extra += 1
    return {char: byte for byte, char in chars.items()}


def _split_pattern(config: dict[str, Any]) -> str | None:
    """The pre-tokenizer's regex where it is one isolated `Split` followed by a regex-free `ByteLevel`."""
    pre = config.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers") if pre.get("type") == "Sequence" else None
    if not steps or len(steps) != 2:
        return None
    split, byte_level = steps
    pattern = split.get("pattern") or {}
    if (
        split.get("type") != "Split"
        or split.get("behavior") != "Isolated"
        or split.get("invert")
        or "Regex" not in pattern
        or byte_level.get("type") != "ByteLevel"
        or byte_level.get("use_regex", True)
        or byte_level.get("add_prefix_space")
    ):
        return None
    return str(pattern["Regex"])


def _mergeable_ranks(model: dict[str, Any]) -> dict[bytes, int] | None:
    """tiktoken's ranks (token bytes to id) where the BPE model can be run by rank, else None."""
    if model.get("type") != "BPE" or model.get("dropout") or model.get("unk_token") or model.get("byte_fallback"):
        return None
    if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        return None
    decoder = _byte_decoder()
    vocab: dict[str, int] = model.get("vocab") or {}
    if not decoder.keys() <= vocab.keys() or not set("".join(vocab)) <= decoder.keys():
        return None
    merged_ids = [vocab.get("".join(_pair(rule)), -1) for rule in model.get("merges") or []]
    if -1 in merged_ids or any(later <= earlier for earlier, later in itertools.pairwise(merged_ids)):
        return None
    to_latin1 = str.maketrans({char: chr(byte) for char, byte in decoder.items()})
    ranks = {token.translate(to_latin1).encode("latin-1"): token_id for token, token_id in vocab.items()}
    return ranks if len(ranks) == len(vocab) else None


def _pair(rule: str | list[str]) -> tuple[str, str]:
    """A merge rule in either spelling tokenizers writes: `["a", "b"]` or `"a b"`."""
    a, b = rule if isinstance(rule, list) else rule.split(" ", 1)
    return a, b


class FastBPE:
    """tiktoken's encoder over the model's vocabulary; build with `FastBPE.load`."""

    def __init__(self, encoding: Any, normalizer: Normalizer | None, added_tokens: Sequence[str]) -> None:
        self._encoding = encoding
        self._normalizer = normalizer
        self._added = (
            re.compile("|".join(map(re.escape, sorted(added_tokens, key=len, reverse=True)))) if added_tokens else None
        )
        self._pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="openjev-bpe")

    @classmethod
    def load(cls, path: Path, reference: Tokenizer, cache_dir: Path) -> FastBPE | None:
        """The fast encoder for `tokenizer.json` at `path`, or None where it cannot give `reference`'s
        ids; the verdict of the full check is read from, or written to, `cache_dir`."""
        fast = cls._build(path, reference)
        if fast is None:
            return None
        for text in SELF_CHECK_TEXTS:
            if fast.encode_batch([text]) != [reference.encode(text, add_special_tokens=False).ids]:
                log.warning(
                    "tiktoken's ids differ from the tokenizer's on %r; encoding with tokenizers only", text[:40]
                )
                return None
        if not checked_vocabulary(fast, reference, path, cache_dir):
            return None
        log.info("encoding text with tiktoken: it gave tokenizer.json's ids on every check")
        return fast

    @classmethod
    def _build(cls, path: Path, reference: Tokenizer) -> FastBPE | None:
        config = json.loads(path.read_text(encoding="utf-8"))
        normalizer = config.get("normalizer")
        pattern = _split_pattern(config)
        ranks = _mergeable_ranks(config.get("model") or {})
        if pattern is None or ranks is None or normalizer not in (None, {"type": "NFC"}):
            return None
        try:
            encoding = tiktoken.Encoding("openjev", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        except ValueError:  # a pattern tiktoken's regex engine does not take
            return None
        added = [token.content for token in reference.get_added_tokens_decoder().values()]
        return cls(encoding, reference.normalizer if normalizer else None, added)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int] | None]:
        """Ids of each text, or None for a text that spells an added token (before or after
        normalising: tokenizers may match either) and so is not this encoder's to encode. Large
        batches run on every core (tiktoken releases the GIL while it encodes)."""
        if len(texts) > 1 and sum(map(len, texts)) >= PARALLEL_CHARS:
            return list(self._pool.map(self._encode, texts))
        return [self._encode(text) for text in texts]

    def _encode(self, text: str) -> list[int] | None:
        if len(text) >= MAX_CHARS or self._spells_added_token(text):
            return None
        if self._normalizer is not None and not text.isascii():
            text = self._normalizer.normalize_str(text)
            if self._spells_added_token(text):
                return None
        ids: list[int] = self._encoding.encode_ordinary(text)
        return ids

    def _spells_added_token(self, text: str) -> bool:
        return self._added is not None and self._added.search(text) is not None


def vocabulary_texts(reference: Tokenizer) -> list[str]:
    """The text of every vocabulary entry (added tokens aside) whose bytes are whole UTF-8."""
    decoder = _byte_decoder()
    texts = []
    for token in reference.get_vocab(with_added_tokens=False):
        try:
            texts.append(bytes(decoder[char] for char in token).decode("utf-8"))
        except (KeyError, UnicodeDecodeError):
            continue
    return texts


def vocabulary_differences(fast: FastBPE, reference: Tokenizer) -> tuple[int, list[str]]:
    """How many vocabulary texts the fast encoder takes, and those where its ids differ."""
    texts = vocabulary_texts(reference)
    # One at a time: for short texts the thread pool costs more than it saves.
    found = [fast._encode(text) for text in texts]
    taken = [(text, ids) for text, ids in zip(texts, found, strict=True) if ids is not None]
    expected = reference.encode_batch_fast([text for text, _ in taken], add_special_tokens=False)
    return len(taken), [text for (text, ids), want in zip(taken, expected, strict=True) if ids != want.ids]


def _versions() -> dict[str, str]:
    return {name: importlib.metadata.version(name) for name in ("tiktoken", "tokenizers")}


def checked_vocabulary(fast: FastBPE, reference: Tokenizer, path: Path, cache_dir: Path) -> bool:
    """Whether the fast encoder gives `reference`'s ids on every vocabulary text: the cached verdict
    for this file and these library versions, else the check, timed, logged and cached."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    verdict_path = cache_dir / "tokenizer-checks" / f"{digest}.json"
    with contextlib.suppress(OSError, ValueError):
        verdict = json.loads(verdict_path.read_text(encoding="utf-8"))
        if verdict.get("versions") == _versions():
            return bool(verdict["same"])
    started = time.perf_counter()
    entries, differing = vocabulary_differences(fast, reference)
    seconds = time.perf_counter() - started
    verdict = {"same": not differing, "entries": entries, "differing": differing[:20], "seconds": round(seconds, 2)}
    if differing:
        log.warning(
            "tiktoken's ids differ from the tokenizer's on %d of %d vocabulary entries (%r first); "
            "encoding with tokenizers only",
            len(differing),
            entries,
            differing[0],
        )
    log.info("checked tiktoken against tokenizers on %d vocabulary entries in %.1f s", entries, seconds)
    try:
        verdict_path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=verdict_path.parent, delete=False, suffix=".tmp") as handle:
            json.dump({**verdict, "sha256": digest, "versions": _versions()}, handle)
        os.replace(handle.name, verdict_path)
    except OSError as error:
        log.warning("could not keep the tokenizer check's verdict in %s: %s", verdict_path.parent, error)
    return not differing
