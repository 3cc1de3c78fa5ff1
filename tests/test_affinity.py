"""`affinity.py`: the conversation key, rendezvous order, the bounded-load choice, the router."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from openjev.affinity import (
    EPSILON,
    KEY_TOKENS,
    RankRouter,
    choose_rank,
    common_prefix_length,
    conversation_key,
    pinned,
    rank_order,
    with_images,
)

HEADER = [9, 9, 9, 9]


def test_the_key_is_the_opening_after_the_header() -> None:
    opening = list(range(100, 100 + KEY_TOKENS))
    key = conversation_key(HEADER + opening, len(HEADER))
    # A conversation that grows keeps its key; the header is not part of it.
    assert conversation_key(HEADER + opening + [1, 2, 3], len(HEADER)) == key
    assert conversation_key([7, 7, 7, 7, *opening], len(HEADER)) == key
    # One token of the opening changed: another conversation.
    assert conversation_key(HEADER + opening[:-1] + [5], len(HEADER)) != key
    # A token past the opening does not count.
    assert conversation_key(HEADER + opening + [4], len(HEADER)) == conversation_key(HEADER + opening + [8], 4)


def test_common_prefix_length() -> None:
    assert common_prefix_length([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix_length([], [1]) == 0
    assert common_prefix_length([1, 2], [1, 2]) == 2


def test_rank_order_is_a_stable_permutation() -> None:
    for key in range(50):
        order = rank_order(key, 8)
        assert sorted(order) == list(range(8))
        assert rank_order(key, 8) == order


def test_rendezvous_moves_only_the_keys_of_a_removed_rank() -> None:
    keys = [random.Random(seed).getrandbits(64) for seed in range(2000)]
    moved = [key for key in keys if rank_order(key, 4)[0] != rank_order(key, 3)[0]]
    # Exactly the keys whose first choice was rank 3 move, each to its second choice.
    assert moved == [key for key in keys if rank_order(key, 4)[0] == 3]
    assert all(rank_order(key, 3)[0] == rank_order(key, 4)[1] for key in moved)


def test_keys_spread_evenly_over_ranks() -> None:
    keys = [random.Random(seed).getrandbits(64) for seed in range(4000)]
    counts = Counter(rank_order(key, 4)[0] for key in keys)
    assert all(850 <= counts[rank] <= 1150 for rank in range(4)), counts


def test_an_idle_system_takes_each_keys_first_choice() -> None:
    for key in range(100):
        assert choose_rank(key, [0, 0, 0, 0]) == rank_order(key, 4)[0]


def test_a_rank_over_the_bound_takes_no_new_request() -> None:
    key = next(key for key in range(1000) if rank_order(key, 2)[0] == 0)
    # Mean after admission (5 + 0 + 1) / 2 = 3; bound 1.25 x 3 = 3.75: rank 0 (5) is over it.
    assert choose_rank(key, [5, 0], work=1, epsilon=0.25) == 1
    # (4 + 2 + 1) / 2 = 3.5, bound 4.375: rank 0 (4) is within it and keeps the conversation.
    assert choose_rank(key, [4, 2], work=1, epsilon=0.25) == 0
    # A larger epsilon tolerates more.
    assert choose_rank(key, [5, 0], work=1, epsilon=1.0) == 0


def test_the_choice_is_the_first_rank_within_the_bound_and_one_always_is() -> None:
    generator = random.Random(7)
    for _ in range(2000):
        ranks = generator.choice([2, 3, 4, 8])
        loads = [generator.randrange(0, 20) for _ in range(ranks)]
        work, key = generator.randrange(1, 10), generator.getrandbits(64)
        chosen = choose_rank(key, loads, work)
        bound = (1 + EPSILON) * (sum(loads) + work) / ranks
        assert loads[chosen] <= bound
        order = rank_order(key, ranks)
        assert all(loads[rank] > bound for rank in order[: order.index(chosen)])


def test_router_counts_in_flight_calls_and_cached_share() -> None:
    router = RankRouter(2)
    with pinned(router, 12345, 4) as pin:
        rank = pin.rank
        assert rank == rank_order(12345, 2)[0]
        assert router.ranks[rank].in_flight == 4
        pin.record(100, 75)
        pin.record(50, None)  # a backend that does not say adds nothing
    assert router.ranks[rank].in_flight == 0
    snapshot = router.snapshot()
    assert snapshot["size"] == 2
    assert snapshot["ranks"][rank] == {"rank": rank, "in_flight_calls": 0, "cached_share": 0.75}
    assert snapshot["ranks"][1 - rank]["cached_share"] is None
    with pinned(None, 1, 4) as nothing:
        assert nothing.rank is None
        nothing.record(100, 75)  # nothing routed, nothing recorded
    with pytest.raises(ValueError, match="at least two"):
        RankRouter(1)
    assert RankRouter.of(1) is None and RankRouter.of(3).size == 3


def test_a_failed_evaluation_releases_its_rank() -> None:
    router = RankRouter(3)
    with pytest.raises(RuntimeError), pinned(router, 1, 5):
        raise RuntimeError
    assert [stats.in_flight for stats in router.ranks] == [0, 0, 0]


def test_an_opening_with_images_is_named_by_them() -> None:
    key = conversation_key([1, 2, 3, 4], 1)
    assert with_images(key, []) == key
    assert with_images(key, ["a" * 64]) == with_images(key, ["a" * 64]) != key
    assert with_images(key, ["a" * 64]) != with_images(key, ["b" * 64])
    assert with_images(key, ["a" * 64, "b" * 64]) != with_images(key, ["b" * 64, "a" * 64])
