"""The llama.cpp runtime's prefix cache (`sequence_cache.py`): matching, ids and eviction, as pure logic."""

from __future__ import annotations

import numpy as np

from openjev.backends.embedded.sequence_cache import SequenceCache


def row(value: float) -> np.ndarray:
    return np.full(4, value, dtype=np.float32)


def filled(cache: SequenceCache, *prompts: tuple[int, ...]) -> list[int]:
    seqs = []
    for ids in prompts:
        seq = cache.allocate([], [])
        assert seq is not None
        cache.put(seq, ids, row(len(ids)), None, 0)
        seqs.append(seq)
    return seqs


def test_the_longest_shared_prefix_wins_and_leaves_a_token_to_read() -> None:
    cache = SequenceCache(8)
    short, long = filled(cache, (1, 2), (1, 2, 3, 4))
    match = cache.match((1, 2, 3, 9))
    assert (match.entry.seq if match.entry else None, match.length) == (long, 3)
    # A prompt inside a resident one: all but its last token are shared, the last is evaluated to read it.
    inside = cache.match((1, 2, 3))
    assert inside.entry is not None and (inside.length, inside.whole((1, 2, 3))) == (2, False)
    # The same prompt: whole, answered from the stored distribution.
    same = cache.match((1, 2))
    assert same.entry is not None and same.entry.seq == short and same.whole((1, 2))
    assert float(same.entry.logprobs[0]) == 2.0
    nothing = cache.match((7, 8))
    assert (nothing.entry, nothing.length) == (None, 0)
    assert (cache.hits, cache.misses) == (3, 1)


def test_a_prompt_differing_deep_inside_shares_up_to_the_difference() -> None:
    cache = SequenceCache(4)
    resident = tuple(range(30_000))
    [seq] = filled(cache, resident)
    probe = (*resident[:12345], -1, *resident[12346:])
    match = cache.match(probe)
    assert (match.entry.seq if match.entry else None, match.length) == (seq, 12_345)


def test_ids_run_out_then_the_least_recently_used_unpinned_entry_goes() -> None:
    cache = SequenceCache(3)
    a, b, c = filled(cache, (1,), (2,), (3,))
    cache.match((1, 5))  # a is used again: b is now the oldest
    evicted: list[int] = []
    assert cache.allocate([], evicted) == b and evicted == [b]
    evicted.clear()
    # Pinned entries stay, whatever their age.
    assert cache.allocate([a, c], evicted) is None and evicted == []
    assert cache.evictions == 1 and len(cache) == 2


def test_release_and_clear_free_the_ids() -> None:
    cache = SequenceCache(2)
    first, second = filled(cache, (1,), (2,))
    cache.release(first)
    assert cache.match((1, 9)).entry is None
    assert cache.allocate([], []) == first
    assert cache.clear() == [second]
    # `first` is still the caller's (allocated, not yet put): only `second` is free.
    assert len(cache) == 0 and cache.allocate([], []) == second and cache.allocate([], []) is None


def test_an_entry_goes_with_the_entries_built_on_it_and_trim_keeps_the_bound() -> None:
    cache = SequenceCache(8)
    [prefix] = filled(cache, tuple(range(100)))
    branches = []
    for question in range(3):
        seq = cache.allocate([], [])
        assert seq is not None
        cache.put(seq, (*range(100), 1000 + question, 7), row(0), prefix, 100)
        branches.append(seq)
    [other] = filled(cache, (5000, 5001))
    assert cache.resident_tokens() == 100 + 3 * 2 + 2
    cache.match((5000, 5001, 9))  # `other` used last: the prefix's family is the oldest
    evicted: list[int] = []
    # The prefix pinned (a batch builds on it): its branches and `other` go, oldest first; it stays.
    cache.trim(0, [prefix], evicted)
    assert evicted == [*branches, other] and cache.resident_tokens() == 100
    # A family goes whole: the prefix with a branch built on it.
    seq = cache.allocate([], [])
    assert seq is not None
    cache.put(seq, (*range(100), 77), row(0), prefix, 100)
    evicted.clear()
    cache.trim(50, [], evicted)
    assert sorted(evicted) == sorted([prefix, seq]) and len(cache) == 0 and cache.evictions == 6
    # A branch pinned keeps its whole family.
    [prefix] = filled(cache, (1, 2, 3))
    seq = cache.allocate([], [])
    assert seq is not None
    cache.put(seq, (1, 2, 3, 4), row(0), prefix, 3)
    assert not cache.evict_one([seq], []) and len(cache) == 2


def test_the_bound_counts_only_what_the_batch_does_not_build_on() -> None:
    cache = SequenceCache(16)
    [root] = filled(cache, tuple(range(1500)))
    grown = cache.allocate([], [])
    assert grown is not None
    cache.put(grown, tuple(range(2000)), row(0), root, 1500)  # a conversation grown by 500 tokens
    siblings = []
    for question in range(4):
        seq = cache.allocate([], [])
        assert seq is not None
        cache.put(seq, (*range(2000), 3000 + question, 1, 2), row(0), grown, 2000)
        siblings.append(seq)
    [stranger] = filled(cache, tuple(range(5000, 5900)))
    evicted: list[int] = []
    # A new branch builds on `grown`: it and its ancestor `root` do not count; the siblings (12 cells) and
    # the stranger (900) fit within 1,024 and stay, and leave once the bound is lower.
    cache.trim(1024, [grown], evicted)
    assert evicted == [] and cache.resident_tokens(excluding=(root, grown)) == 912
    cache.trim(100, [grown], evicted)
    assert evicted[-1] == stranger and set(evicted) <= {stranger, *siblings}
    assert cache.resident_tokens(excluding=(root, grown)) <= 100 and cache.match(tuple(range(2000))).entry
