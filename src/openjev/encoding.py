"""Prompt text to token ids, each distinct text tokenized once.

Contract: `PromptEncoder.encode_many(prompts)` returns exactly `[chat.encode_segments(p) for p in prompts]`
(tested on the real Qwen tokenizer with random text, special-token spellings, CJK, emoji and
whitespace runs), but a text seen before costs a dictionary lookup.

Why cutting is exact:
1. **At special tokens.** A tokenizer cuts its input at added tokens before it normalises and
   pre-tokenizes, so for a special token S without lstrip/rstrip,
   `encode(A + S + B) == encode(A) + [id(S)] + encode(B)`. The chat template puts a special token
   around every message, so template text falls apart into one piece per message; each piece is
   looked up in a byte-bounded LRU (`OPENJEV_TOKENIZE_CACHE_BYTES`). A repeated state is all hits; a
   conversation grown by one message tokenizes only that message.
2. **After a newline.** Qwen's pre-tokenizer regex (GPT-4 style) never matches across a newline that
   is followed by a non-whitespace character, and BPE merges stay inside a pre-token, so a long piece
   cut right after such newlines encodes to the same ids chunk by chunk. New pieces and chunks are
   encoded together with `encode_batch`, which runs them on every core.
Both properties are checked on the loaded tokenizer at start-up; where one fails, that cut is not made.
Caller text that spells special tokens (quoted segments) is cached apart, with the quoting encoder.
"""

from __future__ import annotations

import re
import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterator, Sequence

from openjev.tokenizer import ChatTokenizer, Segment

#: Pieces longer than this many characters are cut into chunks of about this size.
CHUNK_CHARS = 8192
# A place where Qwen's pre-tokenizer must split: after a newline, before a non-whitespace character.
_CHUNK_BOUNDARY = re.compile(r"\n(?=\S)")
_SELF_CHECK_TEXTS = (
    "plain words, numbers 12345 and punctuation!?",
    "  leading spaces\n\n\ttabs\n  \nnew lines\r\nwindows\n日本語のテキスト\n😀 emoji 👍🏽\nend  ",
    "code:\n    def f(x):\n        return x ** 2\n\n\nprint(f(3))\n",
    "'s 're 'll contractions\nDon't\n'quoted'\n",
)

Piece = tuple[str, bool]


class TokenCache:
    """A byte-bounded LRU of text pieces to token ids; safe to share between preparation threads."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = max(0, capacity_bytes)
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[Piece, array[int]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def cost(piece: Piece, ids: array[int]) -> int:
        return sys.getsizeof(piece[0]) + ids.itemsize * len(ids) + 128

    def get(self, piece: Piece) -> array[int] | None:
        with self._lock:
            ids = self._entries.get(piece)
            if ids is None:
                self.misses += 1
                return None
            self.hits += 1
            self._entries.move_to_end(piece)
            return ids

    def put(self, piece: Piece, ids: array[int]) -> None:
        cost = self.cost(piece, ids)
        with self._lock:
            if cost > self.capacity_bytes or piece in self._entries:
                return
            while self.bytes + cost > self.capacity_bytes:
                old_piece, old_ids = self._entries.popitem(last=False)
                self.bytes -= self.cost(old_piece, old_ids)
            self._entries[piece] = ids
            self.bytes += cost


class PromptEncoder:
    def __init__(self, chat: ChatTokenizer, cache_bytes: int) -> None:
        self.chat = chat
        self.cache = TokenCache(cache_bytes)
        self._special_ids = {token: chat.tokenizer.token_to_id(token) for token in chat.special_tokens}
        self._special = re.compile("|".join(map(re.escape, chat.special_tokens))) if chat.special_tokens else None
        self.cuts_at_special_tokens = self._special is not None
        self.cuts_at_special_tokens = self.cuts_at_special_tokens and self._check(self._cut_at_special_tokens)
        self.cuts_long_text = self._check(lambda text: self._chunks(text, 16))

    def encode_many(self, prompts: Sequence[Sequence[Segment]]) -> list[list[int]]:
        """Token ids of each prompt (segments as for `ChatTokenizer.encode_segments`)."""
        layouts = [list(self._layout(segments)) for segments in prompts]
        found: dict[Piece, array[int]] = {}
        missing: list[Piece] = []
        for layout in layouts:
            for item in layout:
                if isinstance(item, tuple) and item not in found:
                    cached = self.cache.get(item)
                    if cached is None:
                        missing.append(item)
                        found[item] = array("i")
                    else:
                        found[item] = cached
        for piece, ids in zip(missing, self._encode_pieces(missing), strict=True):
            found[piece] = ids
            self.cache.put(piece, ids)
        return [self._assemble(layout, found) for layout in layouts]

    @staticmethod
    def _assemble(layout: list[Piece | int], found: dict[Piece, array[int]]) -> list[int]:
        ids: list[int] = []
        for item in layout:
            if isinstance(item, int):
                ids.append(item)
            else:
                ids += found[item]
        return ids

    def _layout(self, segments: Sequence[Segment]) -> Iterator[Piece | int]:
        """The prompt as cacheable pieces and special-token ids. Adjacent template text is joined first:
        only special tokens and quoted segments are places where the whole-prompt encoding cuts too."""
        pending: list[str] = []
        for text, quoted in (*segments, ("", True)):
            if not quoted:
                pending.append(text)
                continue
            if pending:
                yield from self._cut_at_special_tokens("".join(pending))
                pending = []
            if text:
                yield (text, True)

    def _cut_at_special_tokens(self, text: str) -> Iterator[Piece | int]:
        if not self.cuts_at_special_tokens or self._special is None:
            if text:
                yield (text, False)
            return
        position = 0
        for match in self._special.finditer(text):
            if match.start() > position:
                yield (text[position : match.start()], False)
            yield self._special_ids[match.group()]
            position = match.end()
        if position < len(text):
            yield (text[position:], False)

    def _chunks(self, text: str, size: int = CHUNK_CHARS) -> list[str]:
        """`text` cut after newlines that precede non-whitespace, into chunks of at least `size` chars."""
        chunks, start = [], 0
        for boundary in _CHUNK_BOUNDARY.finditer(text, size):
            if boundary.end() - start >= size:
                chunks.append(text[start : boundary.end()])
                start = boundary.end()
        chunks.append(text[start:])
        return chunks

    def _encode_pieces(self, pieces: list[Piece]) -> list[array[int]]:
        """Every piece's ids, all chunks of all pieces in one `encode_batch` per encoder."""
        results = [array("i") for _ in pieces]
        for quoted in (False, True):
            owners, texts = [], []
            for index, (text, is_quoted) in enumerate(pieces):
                if is_quoted == quoted:
                    chunks = self._chunks(text) if self.cuts_long_text and len(text) > CHUNK_CHARS else [text]
                    owners += [index] * len(chunks)
                    texts += chunks
            for owner, ids in zip(owners, self.chat.encode_batch(texts, quoted=quoted), strict=True):
                results[owner].extend(ids)
        return results

    def _check(self, cut: object) -> bool:
        """Whether a cut keeps the ids of the whole text on this tokenizer, on a few tricky texts."""
        specials = self.chat.special_tokens[: len(_SELF_CHECK_TEXTS)]
        samples = [
            *_SELF_CHECK_TEXTS,
            "".join(text + token for text, token in zip(_SELF_CHECK_TEXTS, specials, strict=False)),
        ]
        for text in samples:
            whole = self.chat.encode(text)
            parts: list[int] = []
            for item in cut(text):  # type: ignore[operator]
                if isinstance(item, int):
                    parts.append(item)
                else:
                    parts += self.chat.encode(item if isinstance(item, str) else item[0])
            if parts != whole:
                return False
        return True
