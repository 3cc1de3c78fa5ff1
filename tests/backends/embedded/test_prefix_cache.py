"""The embedded backend's prefix cache: segmented eviction and the byte bound, without a model."""

from __future__ import annotations

from openjev.backends.embedded.prefix_cache import CacheEntry, PrefixCache


def test_eviction_keeps_reused_prefixes() -> None:
    cache = PrefixCache(capacity_bytes=300)

    def entry() -> CacheEntry:
        return CacheEntry(kv=object(), logprobs=None, nbytes=100)  # type: ignore[arg-type]

    cache.put((1, 2), entry())  # a prefix
    cache.put((7, 8), entry())  # an unrelated prompt nobody reuses
    assert cache.longest_prefix((1, 2, 3)) is not None  # a branch reuses the prefix
    cache.put((1, 2, 3), entry())
    cache.put((1, 2, 4), entry())  # over capacity: the oldest never-reused entry goes first
    assert cache.longest_prefix((7, 8, 9)) is None
    cache.put((1, 2, 5), entry())
    assert cache.longest_prefix((1, 2, 9)) == (2, cache._entries[(1, 2)])
    stats = cache.stats()
    assert (stats.entries, stats.bytes, stats.evictions) == (3, 300, 2)
    assert cache.longest_prefix((1, 2, 5, 6))[0] == 3  # the longest matching key wins
    cache.put((9,), CacheEntry(kv=object(), logprobs=None, nbytes=301))  # type: ignore[arg-type]
    assert cache.stats().entries == 3  # larger than the capacity: not stored


def test_an_entry_without_kv_answers_only_its_exact_prompt() -> None:
    cache = PrefixCache(capacity_bytes=1000)
    answered = CacheEntry(kv=None, logprobs=None, nbytes=10)  # type: ignore[arg-type]
    cache.put((1, 2, 3), answered)  # a branch answered in a batch: no KV cache of its own
    assert cache.longest_prefix((1, 2, 3)) == (3, answered)
    assert cache.longest_prefix((1, 2, 3, 4)) is None
