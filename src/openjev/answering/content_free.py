"""Content-free readouts for contextual calibration, cached per question text.

Contract: the content-free readout of a question view is the backend's label logprobs for the same
question suffix (the same token ids: question turn, cue, labels) after the conversation prefix of
the state CONTENT_FREE_STATE instead of the request's state. It depends only on the suffix and the
label ids, so it is kept in an LRU of OPENJEV_CONTENT_FREE_CACHE entries keyed by both; a
repeated question costs no backend call. `plan` (at preparation) fixes which readouts a request
makes and what they send, so the token budget counts them before anything is sent; `requests` are
those readouts' prompts and label ids (the engine sends them beside the branches), and `priors`,
given their answers in that order, returns one entry per branch (None where the question type is
not calibrated), the number of backend calls made and their prompt tokens.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from openjev.answering.debias import CONTENT_FREE_STATE
from openjev.backends.base import LabelLogprobs
from openjev.prompting.prompts import frame_conversation
from openjev.prompting.tokenizer import ChatTokenizer


class BranchLike(Protocol):
    suffix_ids: list[int]
    label_token_ids: tuple[int, ...]


Key = tuple[tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class ContentFreePlan:
    """A request's content-free readouts: per branch its key (None: not calibrated), the priors known at
    planning, the keys still to read and, per key still to read, (the first branch reading it, its
    prompt tokens)."""

    keys: list[Key | None]
    known: dict[Key, tuple[float, ...]]
    missing: list[Key]
    readouts: list[tuple[int, int]]

    @property
    def tokens(self) -> int:
        """The prompt tokens the readouts still to make send."""
        return sum(tokens for _, tokens in self.readouts)


class ContentFreePriors:
    def __init__(self, chat: ChatTokenizer, capacity: int) -> None:
        frame = frame_conversation(chat, [{"role": "user", "content": CONTENT_FREE_STATE}])
        self.prefix_ids = chat.encode(frame.shared_prefix)
        self.capacity = capacity
        self.cache: OrderedDict[Key, tuple[float, ...]] = OrderedDict()

    def remember(self, key: Key, logprobs: tuple[float, ...]) -> None:
        self.cache[key] = logprobs
        self.cache.move_to_end(key)
        while len(self.cache) > self.capacity:
            self.cache.popitem(last=False)

    def plan(self, branches: Sequence[BranchLike], wanted: Sequence[bool]) -> ContentFreePlan:
        """What a request's content-free readouts will be: the priors cached now, kept for this request
        (so what the budget counted is what is sent), and the readouts still to make."""
        keys = [
            (tuple(branch.suffix_ids), branch.label_token_ids) if want else None
            for branch, want in zip(branches, wanted, strict=True)
        ]
        known = {key: found for key in keys if key is not None and (found := self.cache.get(key)) is not None}
        first: dict[Key, int] = {}  # each key still to read, by the first branch reading it
        for index, key in enumerate(keys):
            if key is not None and key not in known:
                first.setdefault(key, index)
        readouts = [(index, len(self.prefix_ids) + len(key[0])) for key, index in first.items()]
        return ContentFreePlan(keys, known, list(first), readouts)

    def requests(self, plan: ContentFreePlan) -> list[tuple[list[int], tuple[int, ...]]]:
        """The prompt and label ids of each readout still to make, in the plan's order."""
        return [(self.prefix_ids + list(suffix), labels) for suffix, labels in plan.missing]

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
