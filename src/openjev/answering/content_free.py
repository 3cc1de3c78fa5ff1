"""Content-free readouts for contextual calibration, cached per question text.

Contract: the content-free readout of a question view is the backend's label logprobs for the same
question suffix (the same token ids: question turn, cue, labels) after the conversation prefix of
the state CONTENT_FREE_STATE instead of the request's state. It depends only on the suffix and the
label ids, so it is kept in an LRU keyed by a 16-byte BLAKE2b digest of both (`key_of`), bounded in
bytes (OPENJEV_CONTENT_FREE_CACHE_BYTES): an entry costs its logprobs (8 bytes each) and
ENTRY_OVERHEAD, whatever the length of its question, so the bound holds for any question text. A
repeated question costs no backend call. `plan` (at preparation) fixes which readouts a request
makes and what they send, so the token budget counts them before anything is sent; `requests` are
those readouts' prompts and label ids (the engine sends them beside the branches), and `priors`,
given their answers in that order, returns one entry per branch (None where the question type is
not calibrated), the number of backend calls made and their prompt tokens. A request that reads its
branches in rounds (`readouts.py`: deferred rotations) reads each round's `part` of its plan.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from openjev.answering.debias import CONTENT_FREE_STATE
from openjev.backends.base import LabelLogprobs
from openjev.prompting.prompts import frame_conversation
from openjev.prompting.tokenizer import ChatTokenizer

#: What an entry costs beyond its logprobs: its digest, the tuple and the LRU's book-keeping.
ENTRY_OVERHEAD = 256
FLOAT_BYTES = 8


def key_of(suffix_ids: Sequence[int], label_ids: Sequence[int]) -> bytes:
    """The cache key of a question view: a digest of its suffix's and its labels' ids (lengths first)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(array("q", [len(suffix_ids), len(label_ids)]).tobytes())
    digest.update(array("q", suffix_ids).tobytes())
    digest.update(array("q", label_ids).tobytes())
    return digest.digest()


class BranchLike(Protocol):
    suffix_ids: list[int]
    label_token_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ContentFreePlan:
    """A request's content-free readouts: per branch its key (None: not calibrated), the priors known at
    planning, the keys still to read with their (suffix, label) ids and, per key still to read, (the
    first branch reading it, its prompt tokens)."""

    keys: list[bytes | None]
    known: dict[bytes, tuple[float, ...]]
    missing: list[bytes]
    asked: list[tuple[Sequence[int], tuple[int, ...]]]
    readouts: list[tuple[int, int]]

    @property
    def tokens(self) -> int:
        """The prompt tokens the readouts still to make send."""
        return sum(tokens for _, tokens in self.readouts)

    def part(self, indices: Sequence[int], read: Mapping[bytes, tuple[float, ...]]) -> ContentFreePlan:
        """The plan of the branches at `indices` alone (in that order), `read`: priors this request has read
        already: a request that reads its branches in rounds reads each of its planned readouts at most once,
        in the round of the first branch that needs it."""
        keys = [self.keys[index] for index in indices]
        known = {**self.known, **read}
        planned = {
            key: (asked, tokens)
            for key, asked, (_, tokens) in zip(self.missing, self.asked, self.readouts, strict=True)
        }
        first: dict[bytes, int] = {}
        for position, key in enumerate(keys):
            if key is not None and key not in known:
                first.setdefault(key, position)
        asked = [planned[key][0] for key in first]
        readouts = [(position, planned[key][1]) for key, position in first.items()]
        return ContentFreePlan(keys, known, list(first), asked, readouts)


class ContentFreePriors:
    def __init__(self, chat: ChatTokenizer, capacity_bytes: int) -> None:
        frame = frame_conversation(chat, [{"role": "user", "content": CONTENT_FREE_STATE}])
        self.prefix_ids = chat.encode(frame.shared_prefix)
        self.capacity_bytes = capacity_bytes
        self.bytes = 0
        self.cache: OrderedDict[bytes, tuple[float, ...]] = OrderedDict()

    @staticmethod
    def cost(logprobs: tuple[float, ...]) -> int:
        return ENTRY_OVERHEAD + FLOAT_BYTES * len(logprobs)

    def remember(self, key: bytes, logprobs: tuple[float, ...]) -> None:
        cost = self.cost(logprobs)
        if cost > self.capacity_bytes:
            return
        old = self.cache.pop(key, None)
        self.bytes += cost - (self.cost(old) if old is not None else 0)
        self.cache[key] = logprobs
        while self.bytes > self.capacity_bytes:
            _, evicted = self.cache.popitem(last=False)
            self.bytes -= self.cost(evicted)

    def plan(self, branches: Sequence[BranchLike], wanted: Sequence[bool]) -> ContentFreePlan:
        """What a request's content-free readouts will be: the priors cached now, kept for this request
        (so what the budget counted is what is sent), and the readouts still to make."""
        keys = [
            key_of(branch.suffix_ids, branch.label_token_ids) if want else None
            for branch, want in zip(branches, wanted, strict=True)
        ]
        known = {key: found for key in keys if key is not None and (found := self.cache.get(key)) is not None}
        first: dict[bytes, int] = {}  # each key still to read, by the first branch reading it
        for index, key in enumerate(keys):
            if key is not None and key not in known:
                first.setdefault(key, index)
        asked = [(branches[index].suffix_ids, tuple(branches[index].label_token_ids)) for index in first.values()]
        readouts = [(index, len(self.prefix_ids) + len(branches[index].suffix_ids)) for index in first.values()]
        return ContentFreePlan(keys, known, list(first), asked, readouts)

    def requests(self, plan: ContentFreePlan) -> list[tuple[list[int], tuple[int, ...]]]:
        """The prompt and label ids of each readout still to make, in the plan's order."""
        return [(self.prefix_ids + list(suffix), labels) for suffix, labels in plan.asked]

    def priors(
        self, plan: ContentFreePlan, results: Sequence[LabelLogprobs]
    ) -> tuple[list[tuple[float, ...] | None], int, int]:
        """Each planned branch's content-free logprobs (known, else `results`: the answers to `requests`);
        calls and prompt tokens."""
        found = dict(plan.known)
        for key, result in zip(plan.missing, results, strict=True):
            self.remember(key, result.logprobs)
            # A capacity of 0 keeps nothing: this request still uses what it read.
            found[key] = result.logprobs
        priors = [None if key is None else found[key] for key in plan.keys]
        return priors, len(plan.missing), sum(result.prompt_tokens for result in results)
