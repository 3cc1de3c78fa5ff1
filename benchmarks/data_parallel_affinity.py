"""Benchmark: does pinning conversations to data-parallel ranks keep the radix cache's hits, and at
what cost in balance? openjev's pinning (`affinity.RankRouter`) against SGLang's default round robin.

A discrete-event run over N ranks, each a one-at-a-time server with its own radix cache: the fake
SGLang's (`tests/fake_sglang/ranks.py`, longest prefix among the rank's recent prompts). A call costs
`--call-cost` plus `--token-cost` per *uncached* prompt token on its rank, so a miss is slow where it
happens. Traffic: Poisson arrivals (load `--load` of the N ranks' capacity when nothing is cached) of
growing conversations (2-5 turns, one exchange more per turn, an exponential think time between
turns) and one-off requests; every request is a warm-up of its shared prefix, then `--questions`
branches at once, as openjev sends them.

- `pin`: openjev's bounded-load rendezvous (epsilon 0.25): every call of a request on one rank, the
  rank chosen from the conversation's opening; `pin-unbounded`: the same without the load bound.
- `round-robin`: SGLang 0.5.19's `--load-balance-method auto` without `routed_dp_rank`: each call to
  the next rank in turn.

Figures: the share of prompt tokens served from cache (goal: pinning within 5 points of N = 1), the
load imbalance max/mean of the ranks' time-averaged in-flight calls (goal <= 1.25), and the mean
request latency in cost units.

    uv run python benchmarks/data_parallel_affinity.py [--requests 600] [--seeds 3]
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import math
import random
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openjev.affinity import RankRouter, conversation_key
from tests.fake_sglang.ranks import RankCaches

HEADER = list(range(20))  # the chat template's tokens before every state
OPENING, TURN, SUFFIX = 120, 60, 15  # tokens: a conversation's first state, each exchange, a question


@dataclass
class Request:
    conversation: int
    prefix: list[int]
    turns_left: int
    arrived: float = 0.0
    rank: int | None = None
    pending: int = 0


@dataclass
class Run:
    ranks: int
    policy: str
    options: argparse.Namespace
    rng: random.Random
    caches: RankCaches = field(init=False)
    router: RankRouter | None = field(init=False)
    queue_free_at: list[float] = field(init=False)
    in_flight: list[int] = field(init=False)
    area: list[float] = field(init=False)
    events: list[tuple[float, int, Callable[[], None]]] = field(default_factory=list)
    now: float = 0.0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    latencies: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.caches = RankCaches(self.ranks)
        epsilon = math.inf if self.policy == "pin-unbounded" else 0.25
        self.router = RankRouter(self.ranks, epsilon) if self.policy.startswith("pin") and self.ranks > 1 else None
        self.queue_free_at = [0.0] * self.ranks
        self.in_flight = [0] * self.ranks
        self.area = [0.0] * self.ranks
        self._order = itertools.count()
        self._turn = itertools.cycle(range(self.ranks))
        self._last = 0.0

    def at(self, time: float, action: Callable[[], None]) -> None:
        heapq.heappush(self.events, (time, next(self._order), action))

    def advance(self, time: float) -> None:
        for rank in range(self.ranks):
            self.area[rank] += self.in_flight[rank] * (time - self._last)
        self.now = self._last = time

    def call(self, request: Request, prompt: list[int], done: Callable[[], None]) -> None:
        """Queue one call on its rank (FIFO); its prefix is looked up in that rank's cache when queued."""
        rank = request.rank if request.rank is not None else next(self._turn)
        self.in_flight[rank] += 1
        start = max(self.now, self.queue_free_at[rank])
        cached = self.caches.cached_tokens(rank, prompt, 1)
        self.prompt_tokens += len(prompt)
        self.cached_tokens += cached
        finish = start + self.options.call_cost + self.options.token_cost * (len(prompt) - cached)
        self.queue_free_at[rank] = finish

        def finished() -> None:
            self.in_flight[rank] -= 1
            done()

        self.at(finish, finished)

    def submit(self, request: Request) -> None:
        request.arrived = self.now
        calls = 1 + self.options.questions
        if self.router is not None:
            request.rank = self.router.assign(conversation_key(request.prefix, len(HEADER)), calls)
        self.call(request, request.prefix, lambda: self.branches(request))

    def branches(self, request: Request) -> None:
        request.pending = self.options.questions
        for question in range(self.options.questions):
            suffix = [10_000_000 + question * SUFFIX + i for i in range(SUFFIX)]
            self.call(request, request.prefix + suffix, lambda: self.branch_done(request))

    def branch_done(self, request: Request) -> None:
        request.pending -= 1
        if request.pending:
            return
        if self.router is not None and request.rank is not None:
            self.router.release(request.rank, 1 + self.options.questions)
        self.latencies.append(self.now - request.arrived)
        if request.turns_left > 1:
            turn = [request.conversation * 1_000_000 + len(request.prefix) + i for i in range(TURN)]
            follow = Request(request.conversation, request.prefix + turn, request.turns_left - 1)
            self.at(self.now + self.rng.expovariate(1 / self.options.think), lambda: self.submit(follow))


def arrivals(options: argparse.Namespace, ranks: int, rng: random.Random) -> list[tuple[float, Request]]:
    """Poisson starts of conversations and one-offs at `load` of the ranks' all-miss capacity."""
    turns_mean = options.conversation_share * 3.5 + (1 - options.conversation_share)
    calls_cost = (1 + options.questions) * (options.call_cost + options.token_cost * (OPENING + TURN + SUFFIX))
    rate = options.load * ranks / (turns_mean * calls_cost)
    time, starts = 0.0, []
    for conversation in range(options.requests):
        time += rng.expovariate(rate)
        turns = rng.randint(2, 5) if rng.random() < options.conversation_share else 1
        opening = [conversation * 1_000_000 + 500_000 + i for i in range(OPENING)]
        starts.append((time, Request(conversation, HEADER + opening, turns)))
    return starts


def simulate(options: argparse.Namespace, ranks: int, policy: str, seed: int) -> dict[str, float]:
    run = Run(ranks, policy, options, random.Random(seed))
    for time, request in arrivals(options, ranks, random.Random(seed)):
        run.at(time, lambda request=request: run.submit(request))
    while run.events:
        time, _, action = heapq.heappop(run.events)
        run.advance(time)
        action()
    mean = sum(run.area) / ranks
    return {
        "cached_share": run.cached_tokens / run.prompt_tokens,
        "imbalance": max(run.area) / mean if mean else 1.0,
        "latency": statistics.fmean(run.latencies),
    }


def interval(values: list[float]) -> str:
    """Mean and the range over seeds."""
    return f"{statistics.fmean(values):.3f} [{min(values):.3f}, {max(values):.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=600, help="conversations and one-offs started per run")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--load", type=float, default=0.7, help="offered load, share of all-miss capacity")
    parser.add_argument("--conversation-share", type=float, default=0.7, help="starts that are conversations")
    parser.add_argument("--think", type=float, default=2000.0, help="mean time between turns (cost units)")
    parser.add_argument("--call-cost", type=float, default=20.0)
    parser.add_argument("--token-cost", type=float, default=1.0, help="cost per uncached prompt token")
    options = parser.parse_args()
    seeds = range(options.seeds)
    print(f"{options.requests} starts per run, {options.seeds} seeds, {options.questions} questions, "
          f"load {options.load}; figures: mean [min, max] over seeds")  # fmt: skip
    print(f"{'N':>2} {'policy':<14} {'cached share':<22} {'imbalance max/mean':<22} {'mean latency':<22}")
    baseline = [simulate(options, 1, "round-robin", seed) for seed in seeds]
    show(1, "(one rank)", baseline)
    for ranks in (2, 4, 8):
        for policy in ("pin", "pin-unbounded", "round-robin"):
            show(ranks, policy, [simulate(options, ranks, policy, seed) for seed in seeds])


def show(ranks: int, policy: str, results: list[dict[str, float]]) -> None:
    figures = [interval([result[name] for result in results]) for name in ("cached_share", "imbalance", "latency")]
    print(f"{ranks:>2} {policy:<14} " + " ".join(f"{figure:<22}" for figure in figures), flush=True)


if __name__ == "__main__":
    main()
