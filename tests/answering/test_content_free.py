"""The content-free prior cache (`answering/content_free.py`): bounded in bytes whatever the questions'
length, keyed by a digest of the ids, and a hit needs no readout."""

from __future__ import annotations

from dataclasses import dataclass

from openjev.answering.content_free import ENTRY_OVERHEAD, ContentFreePriors, key_of
from openjev.backends.base import LabelLogprobs
from openjev.prompting.tokenizer import ChatTokenizer


@dataclass
class View:
    suffix_ids: list[int]
    label_token_ids: tuple[int, ...]


def test_the_cache_is_bounded_in_bytes_whatever_the_question_s_length(qwen_tokenizer_dir) -> None:
    entry = ENTRY_OVERHEAD + 8 * 2
    priors = ContentFreePriors(ChatTokenizer(qwen_tokenizer_dir), capacity_bytes=10 * entry)
    for round_ in range(50):
        # Questions of 20k ids each: a cache keyed by the ids themselves held about 1 MB per entry.
        views = [View([round_ * 7 + n] * 20_000, (9, 10)) for n in range(3)]
        plan = priors.plan(views, [True, True, False])
        assert len(plan.missing) == 2 and [labels for _, labels in priors.requests(plan)] == [(9, 10)] * 2
        answers = [LabelLogprobs((-0.1 * n, -2.0), 5, None) for n in range(2)]
        found, calls, _ = priors.priors(plan, answers)
        assert calls == 2 and found == [(0.0, -2.0), (-0.1, -2.0), None]
        assert priors.bytes <= priors.capacity_bytes and len(priors.cache) <= 10
    # The most recent views are kept: asked again, no readout is made.
    again = priors.plan(views[:2], [True, True])
    assert again.missing == [] and again.known[key_of(views[0].suffix_ids, (9, 10))] == (0.0, -2.0)
    # The digest tells ids and labels apart (lengths first).
    assert key_of([1, 2], [3]) != key_of([1], [2, 3]) and key_of([1, 2], [3]) == key_of((1, 2), (3,))
