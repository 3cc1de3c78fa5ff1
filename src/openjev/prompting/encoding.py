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
2. **Where the pre-tokenizer must split.** Qwen's pre-tokenizer regex (GPT-4 style) scans left to
   right and no pattern of it matches across (a) a newline followed by a non-whitespace character, or
   (b) a non-whitespace character followed by a space: every alternative that consumes the
   non-whitespace character stops before a space, and every alternative that starts with whitespace
   starts after it. BPE merges stay inside a pre-token and NFC never composes across a space or a
   newline, so a long piece cut at such places encodes to the same ids chunk by chunk. New pieces and
   chunks are encoded together with `ChatTokenizer.encode_batch`, which runs them on every core, with
   tiktoken where it gives the same ids (`openjev.prompting.fast_bpe`).
Both properties are checked on the loaded tokenizer at start-up; where one fails, that cut is not made.
Caller text that spells special tokens (quoted segments) is cached apart, with the quoting encoder.

Bounded work: new text is encoded in rounds of growing size (`FIRST_ROUND_CHARS`, doubling). With a
`watch` (`encode_many(prompts, watch)`), each round is preceded by a call with every prompt's count so
far (a lower bound while text is left): the watch raises to stop the encoding, or says how many more
tokens the prompts may take, and the round holds no more text than that many tokens at the
characters per token seen so far (`CHARS_PER_TOKEN` before any; at least one `CHUNK_CHARS`). So text
far over a budget costs about the budget in tokenizing, not its whole encoding. `tokenized` counts the
ids the tokenizer made (also `openjev_tokenized_tokens` in /metrics).

Bound on text with no place to cut (a run of digits, CJK, one long word, a whitespace run): the
tokenizer's cost grows with the text it is given at once (about 300 bytes of memory per digit), so no
call is given more than RUN_CHARS characters before the text is known to fit. Where no exact cut
(2) lies within RUN_CHARS of a chunk's start, the chunk is cut at CHUNK_CHARS wherever it falls, and
its ids count only towards the watch, at 1 / CUT_SHARE each: a cut inside a pre-token changes the
ids next to it, and the pieces of a run never hold CUT_SHARE times the ids of the run whole (tested on
runs of every script). The chunks are found lazily, round by round, so text past the stop is never
scanned. Once every round has passed the watch (the text fits), each run cut so is encoded again,
whole, and only those ids are returned: the ids stay exact, and a run encoded whole holds at most
CUT_SHARE times what the watch allowed. So a prompt over its budget costs at most about CUT_SHARE
times the budget in tokenizing, whatever its characters; a 12M-digit state is refused after about
0.2 MB of it is tokenized.
"""

from __future__ import annotations

import re
import struct
import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence

from openjev.metrics import TOKENIZED_TOKENS
from openjev.prompting.fast_bpe import SELF_CHECK_TEXTS
from openjev.prompting.tokenizer import ChatTokenizer, Segment

#: Pieces longer than this many characters are cut into chunks of about this size.
CHUNK_CHARS = 8192
#: Characters of new text encoded before the first check against the limits; each later round doubles.
#: A full-size prompt (32k tokens of prose, about 130k characters) takes two rounds.
FIRST_ROUND_CHARS = 8 * CHUNK_CHARS
#: Characters per token assumed for the first round's size under a watch (English prose: about 4).
CHARS_PER_TOKEN = 4
#: The most characters searched for an exact cut, and given to the tokenizer at once before the text
#: is known to fit (module doc).
RUN_CHARS = 2 * CHUNK_CHARS
#: Ids of a run cut at CHUNK_CHARS count 1 / CUT_SHARE each towards the watch (module doc).
CUT_SHARE = 2
# Places where Qwen's pre-tokenizer must split (module doc, 2): after a newline that precedes a
# non-whitespace character; before a space that follows one.
_CHUNK_BOUNDARY = re.compile(r"(?<=\n)(?=\S)|(?<=\S)(?= )")

Piece = tuple[str, bool]
#: A chunk of a piece: (piece index, start, end, whether `end` is an exact cut).
Span = tuple[int, int, int, bool]


#: Called with each prompt's token count so far; raises to stop, or returns the tokens still allowed.
Watch = Callable[[Sequence[int]], int]


def compact(ids: Sequence[int]) -> array[int]:
    """`ids` as 4 bytes each (a list holds about 36); through `struct`, which converts a 24k-id list in
    half the time `array("i", ids)` takes."""
    packed = array("i")
    packed.frombytes(struct.pack(f"{len(ids)}i", *ids))
    return packed


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
        #: Ids the tokenizer has made for new text, every preparation thread together.
        self.tokenized = 0
        self._count_lock = threading.Lock()
        self._special_ids = {token: chat.tokenizer.token_to_id(token) for token in chat.special_tokens}
        self._special = chat.special_pattern
        self.cuts_at_special_tokens = self._special is not None
        self.cuts_at_special_tokens = self.cuts_at_special_tokens and self._check(self._cut_at_special_tokens)
        self.cuts_long_text = True  # tried, then kept where it holds
        self.cuts_long_text = self._check(lambda text: self._chunks(text, 16))

    def encode_many(self, prompts: Sequence[Sequence[Segment]], watch: Watch | None = None) -> list[list[int]]:
        """Token ids of each prompt (segments as for `ChatTokenizer.encode_segments`).

        With `watch`: called before every round of new text with each prompt's count so far; what it
        raises stops the encoding (nothing half-encoded is cached), what it returns bounds the round
        (module doc). When all text is encoded the ids are returned, whatever their lengths: the
        caller's budget check then has exact counts."""
        layouts = [list(self._layout(segments)) for segments in prompts]
        found: dict[Piece, Sequence[int]] = {}
        #: Pieces to encode now, each with its place in `_encode_pieces`'s counts.
        fresh: dict[Piece, int] = {}
        for layout in layouts:
            for item in layout:
                if isinstance(item, tuple) and item not in found and item not in fresh:
                    cached = self.cache.get(item)
                    if cached is None:
                        fresh[item] = len(fresh)
                    else:
                        found[item] = cached

        def room(counted: Sequence[int]) -> int:
            assert watch is not None
            return watch([self._count_of(layout, found, fresh, counted) for layout in layouts])

        encoded = self._encode_pieces(list(fresh), None if watch is None else room)
        for piece, ids in zip(fresh, encoded, strict=True):
            found[piece] = ids
            self.cache.put(piece, compact(ids))
        return [self._assemble(layout, found) for layout in layouts]

    @staticmethod
    def _count_of(
        layout: list[Piece | int], found: dict[Piece, Sequence[int]], fresh: dict[Piece, int], counted: Sequence[int]
    ) -> int:
        """A lower bound on `layout`'s tokens: known pieces by their ids, fresh ones by `counted`."""
        return sum(
            1 if isinstance(item, int) else counted[fresh[item]] if item in fresh else len(found[item])
            for item in layout
        )

    @staticmethod
    def _assemble(layout: list[Piece | int], found: dict[Piece, Sequence[int]]) -> list[int]:
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

    def _spans(self, index: int, text: str, size: int = CHUNK_CHARS) -> Iterator[Span]:
        """`text` cut at `_CHUNK_BOUNDARY` places into chunks of at least `size` characters; where none
        lies within RUN_CHARS of a chunk's start, cut at `size` (not exact: module doc)."""
        start = 0
        while len(text) - start > size:
            reach = start + max(size, RUN_CHARS)
            boundary = _CHUNK_BOUNDARY.search(text, start + size, reach) if self.cuts_long_text else None
            if boundary is not None:
                yield index, start, boundary.start(), True
                start = boundary.start()
            elif reach >= len(text) and self.cuts_long_text:
                break
            else:
                yield index, start, start + size, False
                start += size
        yield index, start, len(text), True

    def _chunks(self, text: str, size: int) -> list[str]:
        """`text` cut at the exact places `_spans` finds (the start-up check of those cuts)."""
        return [text[start:end] for _, start, end, _ in self._spans(0, text, size)]

    def _encode_pieces(self, pieces: list[Piece], room: Callable[[Sequence[int]], int] | None) -> list[list[int]]:
        """Each piece's ids, encoded round by round; each round's chunks are encoded with one
        `encode_batch` per encoder. `room`: called before each round with each piece's count so far (a
        lower bound), the tokens the round may hold (module doc). Runs cut where no exact cut is are
        encoded again whole at the end."""
        spans = (span for index, (text, _) in enumerate(pieces) for span in self._spans(index, text))
        ids: list[list[int]] = [[] for _ in pieces]
        counted = [0] * len(pieces)
        #: Per piece, where the run being cut inexactly started; then (piece, position in ids, start, end).
        run_start: list[int | None] = [None] * len(pieces)
        runs: list[tuple[int, int, int, int]] = []
        planned, chars_done, tokens_done = FIRST_ROUND_CHARS, 0, 0
        pending = next(spans, None)
        while pending is not None:
            round_chars = planned
            if room is not None:
                per_token = chars_done / tokens_done if tokens_done else CHARS_PER_TOKEN
                round_chars = min(planned, max(CHUNK_CHARS, int(room(counted) * per_token)))
            batch, chars = [], 0
            while pending is not None and (not batch or chars + pending[2] - pending[1] <= round_chars):
                batch.append(pending)
                chars += pending[2] - pending[1]
                pending = next(spans, None)
            for (index, start, end, exact), made in zip(batch, self._encode_spans(pieces, batch), strict=True):
                tokens_done += len(made)
                began = run_start[index]
                if began is None and exact:
                    ids[index] += made
                    counted[index] += len(made)
                    continue
                counted[index] += len(made) // CUT_SHARE
                run_start[index] = start if began is None else began
                if exact:
                    runs.append((index, len(ids[index]), run_start[index] or 0, end))
                    run_start[index] = None
            chars_done += chars
            planned *= 2
        whole = [(index, start, end, True) for index, _, start, end in runs[::-1]]
        for (index, at, _, _), made in zip(runs[::-1], self._encode_spans(pieces, whole), strict=True):
            ids[index][at:at] = made
        return ids

    def _encode_spans(self, pieces: list[Piece], spans: Sequence[tuple[int, int, int, object]]) -> list[list[int]]:
        """The ids of each span's text, with one `encode_batch` per encoder; counted as tokenized."""
        made: list[list[int]] = [[] for _ in spans]
        for quoted in (False, True):
            places = [place for place, span in enumerate(spans) if pieces[span[0]][1] == quoted]
            texts = [pieces[spans[place][0]][0][spans[place][1] : spans[place][2]] for place in places]
            encoded = self.chat.encode_batch(texts, quoted=quoted) if texts else []
            for place, ids in zip(places, encoded, strict=True):
                made[place] = ids
                self._count(len(ids))
        return made

    def _count(self, tokens: int) -> None:
        with self._count_lock:
            self.tokenized += tokens
        TOKENIZED_TOKENS.inc(tokens)

    def _check(self, cut: object) -> bool:
        """Whether a cut keeps the ids of the whole text on this tokenizer, on a few tricky texts."""
        specials = self.chat.special_tokens[: len(SELF_CHECK_TEXTS)]
        samples = [
            *SELF_CHECK_TEXTS,
            "".join(text + token for text, token in zip(SELF_CHECK_TEXTS, specials, strict=False)),
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
