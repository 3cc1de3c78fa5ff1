"""Content-free readouts for contextual calibration, cached per question text.

Contract: the content-free readout of a question view is the backend's label logprobs for the same
question suffix (the same token ids: question turn, cue, labels) after the conversation prefix of
the state CONTENT_FREE_STATE instead of the request's state. It depends only on the suffix and the
label ids, so it is kept in an LRU of OPENJEV_CONTENT_FREE_CACHE entries keyed by both; a
repeated question costs no backend call. `read` returns one entry per branch (None where the
question type is not calibrated), the number of backend calls made and their prompt tokens.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from openjev.answering.debias import CONTENT_FREE_STATE
from openjev.backends.base import LabelLogprobs
from openjev.prompting.prompts import frame_conversation
from openjev.prompting.tokenizer import ChatTokenizer

Call = Callable[[list[int], tuple[int, ...]], Awaitable[LabelLogprobs]]


class BranchLike(Protocol):
    suffix_ids: list[int]
    label_token_ids: tuple[int, ...]


class ContentFreePriors:
    def __init__(self, chat: ChatTokenizer, capacity: int) -> None:
        frame = frame_conversation(chat, [{"role": "user", "content": CONTENT_FREE_STATE}])
        self.prefix_ids = chat.encode(frame.shared_prefix)
        self.capacity = capacity
        self.cache: OrderedDict[tuple[tuple[int, ...], tuple[int, ...]], tuple[float, ...]] = OrderedDict()

    def remember(self, key: tuple[tuple[int, ...], tuple[int, ...]], logprobs: tuple[float, ...]) -> None:
        self.cache[key] = logprobs
        self.cache.move_to_end(key)
        while len(self.cache) > self.capacity:
            self.cache.popitem(last=False)

    async def read(
        self, branches: Sequence[BranchLike], wanted: Sequence[bool], call: Call
    ) -> tuple[list[tuple[float, ...] | None], int, int]:
        """Each wanted branch's content-free logprobs (cached, else read concurrently); calls and prompt tokens."""
        keys = [(tuple(branch.suffix_ids), branch.label_token_ids) for branch in branches]
        missing = list(
            dict.fromkeys(key for key, want in zip(keys, wanted, strict=True) if want and key not in self.cache)
        )
        results = await asyncio.gather(*(call(self.prefix_ids + list(suffix), labels) for suffix, labels in missing))
        for key, result in zip(missing, results, strict=True):
            self.remember(key, result.logprobs)
        found: dict = {key: self.cache.get(key) for key in keys}
        # A capacity of 0 keeps nothing: this request still uses what it read.
        found.update({key: result.logprobs for key, result in zip(missing, results, strict=True)})
        priors = [found[key] if want else None for key, want in zip(keys, wanted, strict=True)]
        return priors, len(missing), sum(result.prompt_tokens for result in results)
