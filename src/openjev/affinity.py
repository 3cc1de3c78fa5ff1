"""Conversation affinity over SGLang's data-parallel ranks: which rank's radix cache serves a request.

SGLang 0.5.19 with `--dp-size N` runs one scheduler, and one radix cache, per rank behind one HTTP
front, and balances requests without looking at their prefixes (`--load-balance-method`: round robin,
request or token counts). A request pinned with `routed_dp_rank` goes straight to that rank and is
never rebalanced (`managers/data_parallel_controller.py` `maybe_external_dp_rank_routing`). openjev
pins every backend call of one request to one rank, and the requests of one conversation to the
same rank, so the warm-up, the branches and the next turn all find their prefix in one cache.

Contract:
- `conversation_key(prefix_ids, header)`: the conversation's identity is the `KEY_TOKENS` tokens that
  follow the chat template's fixed header (`header` tokens, the same for every conversation). A growing
  conversation keeps its opening, so its key stays put (a first state shorter than `KEY_TOKENS`
  changes it once, as it grows past them); two conversations with the same opening share those
  cached tokens too, so landing together costs them nothing.
  An opening that holds images is named by their sha256 too (`with_images`): another image is
  another conversation. A caller that names its conversation (`caller_key`, from OpenAI's
  `prompt_cache_key`) is keyed by that name instead.
- `rank_order(key, n)`: rendezvous (highest-random-weight) hashing: every rank gets the score
  `h(key, rank)`, the order is by descending score. Adding or removing a rank moves only the keys
  whose first choice it was.
- `choose_rank(key, loads, work, epsilon)`: bounded load (Mirrokni, Thorup, Zadimoghaddam 2018): with
  W the in-flight work over all ranks and w this request's, the mean after admission is
  m = (W + w) / n, and a rank whose in-flight work exceeds (1 + ε)·m takes no new request; the first
  rank of the key's order that does not is chosen. The least-loaded rank carries at most W / n <= m,
  so one always qualifies.
- `RankRouter` keeps the in-flight work (backend calls) per rank and, per rank, the prompt and cached
  tokens its calls reported; `pinned` brackets one request (`assign` and `release`) and its `Pin`
  records each call's figures.

ε = `EPSILON` = 0.25: the imbalance goal is max/mean in-flight <= 1.25, and the admission bound is
exactly (1 + ε) x mean, so 0.25 is the loosest bound that still meets it; a looser one keeps more
conversations on their first rank (more cache hits) and lets a hot conversation overload its rank, a
tighter one moves conversations whenever loads fluctuate (each move re-prefills its prefix on the new
rank). Measured (`benchmarks/data_parallel_affinity.py`, 8 ranks, 3 seeds): without the bound the
imbalance reaches 1.27 [1.20, 1.38]; with it 1.10 [1.07, 1.12], for 2.8 points of cached share
(0.832 against 0.860).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from openjev import metrics

#: Tokens after the template's header that name a conversation: its opening.
KEY_TOKENS = 32
#: A rank over (1 + EPSILON) x the mean in-flight work takes no new request (see the module docstring).
EPSILON = 0.25


def conversation_key(prefix_ids: Sequence[int], header: int = 0) -> int:
    """A 64-bit key from the `KEY_TOKENS` tokens after the first `header` tokens of the shared prefix."""
    opening = prefix_ids[header : header + KEY_TOKENS]
    digest = hashlib.blake2b(b",".join(str(token).encode() for token in opening), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def caller_key(name: str) -> int:
    """A 64-bit key for a conversation the caller names itself (OpenAI's `prompt_cache_key`): every
    request with the same name lands on the same rank, whatever its opening."""
    return int.from_bytes(hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def with_images(key: int, digests: Sequence[str]) -> int:
    """`key` for an opening that holds images: their pads are the same ids for any image, so the images'
    sha256 digests (in order) name them; no images: `key` itself."""
    if not digests:
        return key
    digest = hashlib.blake2b(key.to_bytes(8, "little") + ",".join(digests).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def common_prefix_length(first: Sequence[int], second: Sequence[int]) -> int:
    """How many leading tokens the two sequences share (the template's header, for two conversations)."""
    length = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        length += 1
    return length


def _score(key: int, rank: int) -> int:
    data = key.to_bytes(8, "little") + rank.to_bytes(4, "little")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def rank_order(key: int, ranks: int) -> list[int]:
    """Every rank, best first, by rendezvous hashing: descending h(key, rank)."""
    return sorted(range(ranks), key=lambda rank: _score(key, rank), reverse=True)


def choose_rank(key: int, loads: Sequence[int], work: int = 1, epsilon: float = EPSILON) -> int:
    """The first rank of the key's order whose load is within (1 + epsilon) x the mean after admitting
    `work` more: `loads[r] <= (1 + epsilon) * (sum(loads) + work) / len(loads)`."""
    bound = (1 + epsilon) * (sum(loads) + work) / len(loads)
    return next(rank for rank in rank_order(key, len(loads)) if loads[rank] <= bound)


@dataclass
class RankStats:
    """One rank's in-flight backend calls and the prompt tokens its finished calls reported."""

    in_flight: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0

    @property
    def cached_share(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None


@dataclass
class RankRouter:
    """Assigns requests to `size` ranks (bounded-load rendezvous) and keeps each rank's figures."""

    size: int
    epsilon: float = EPSILON
    ranks: list[RankStats] = field(init=False)

    @classmethod
    def of(cls, size: int) -> RankRouter | None:
        """A router over `size` ranks; None for one rank (nothing to route)."""
        return cls(size) if size > 1 else None

    def __post_init__(self) -> None:
        if self.size < 2:
            raise ValueError("a rank router needs at least two ranks")
        self.ranks = [RankStats() for _ in range(self.size)]

    def assign(self, key: int, calls: int) -> int:
        """The rank for a request of `calls` backend calls, counted as in flight until `release`."""
        rank = choose_rank(key, [stats.in_flight for stats in self.ranks], calls, self.epsilon)
        self.ranks[rank].in_flight += calls
        metrics.RANK_IN_FLIGHT.labels(str(rank)).inc(calls)
        return rank

    def release(self, rank: int, calls: int) -> None:
        self.ranks[rank].in_flight -= calls
        metrics.RANK_IN_FLIGHT.labels(str(rank)).dec(calls)

    def record(self, rank: int, prompt_tokens: int, cached_tokens: int | None) -> None:
        """A finished call's figures (a backend that does not report reuse adds none)."""
        if cached_tokens is not None:
            self.ranks[rank].prompt_tokens += prompt_tokens
            self.ranks[rank].cached_tokens += cached_tokens
            metrics.RANK_PROMPT_TOKENS.labels(str(rank)).inc(prompt_tokens)
            metrics.RANK_CACHED_TOKENS.labels(str(rank)).inc(cached_tokens)

    def snapshot(self) -> dict[str, object]:
        """For /health: the rank count and, per rank, in-flight calls and the cached share of prompts."""
        return {
            "size": self.size,
            "ranks": [
                {"rank": rank, "in_flight_calls": stats.in_flight, "cached_share": stats.cached_share}
                for rank, stats in enumerate(self.ranks)
            ],
        }


@dataclass(frozen=True, slots=True)
class Pin:
    """One evaluation's rank: every backend call carries `rank` (None: one rank, nothing routed) and
    records its figures on it."""

    router: RankRouter | None = None
    rank: int | None = None

    def record(self, prompt_tokens: int, cached_tokens: int | None) -> None:
        if self.router is not None and self.rank is not None:
            self.router.record(self.rank, prompt_tokens, cached_tokens)


@contextlib.contextmanager
def pinned(router: RankRouter | None, key: int, calls: int) -> Iterator[Pin]:
    """The rank for one evaluation of `calls` backend calls, in flight until the block ends; no rank
    (nothing routed) without a router."""
    if router is None:
        yield Pin()
        return
    rank = router.assign(key, calls)
    try:
        yield Pin(router, rank)
    finally:
        router.release(rank, calls)
