"""The fake's data-parallel side: one simulated radix cache per rank, and how 0.5.19 picks a rank.

- `--dp-size N` (0.5.19): one scheduler, so one radix cache, per rank behind one HTTP front. A request
  reuses only what its own rank has seen: a call sent to another rank than its prefix's shows as lost
  `cached_tokens`.
- A request with `routed_dp_rank` (or its deprecated alias `data_parallel_rank`) goes to that rank
  (`data_parallel_controller.py` `maybe_external_dp_rank_routing`); any other takes the next rank in
  turn (`--load-balance-method auto` is `round_robin` outside disaggregation: `arg_groups/serving_hook.py`).
- The rank is checked first by the TokenizerManager (`tokenizer_manager.py:790-799`): with one rank a
  rank of 0 is ignored; any rank outside [0, dp_size) is a ValueError, answered 400 as
  `{"error": {"message": "routed_dp_rank=R out of range [0, N)"}}` (`http_server.py` `_create_error_response`).
"""

from __future__ import annotations

import itertools
from typing import Any

from openjev.affinity import common_prefix_length

# Each rank's simulated radix cache keeps this many recent prompts (bounded, like real cache eviction).
_REMEMBERED_PROMPTS = 64


def requested_rank(body: dict[str, Any]) -> Any:
    """The rank a body asks for: `routed_dp_rank`, else its deprecated alias (`io_struct.py:391-401`)."""
    rank = body.get("routed_dp_rank")
    return body.get("data_parallel_rank") if rank is None else rank


def rank_refusal(body: dict[str, Any], dp_size: int) -> str | None:
    """0.5.19's refusal of the body's rank, or None when it is admitted."""
    rank = requested_rank(body)
    if rank is None or (dp_size <= 1 and rank == 0):
        return None
    if not isinstance(rank, int) or isinstance(rank, bool):
        return "routed_dp_rank must be an integer"  # pydantic's Optional[int]
    if rank < 0 or rank >= dp_size:
        return f"routed_dp_rank={rank} out of range [0, {dp_size})"
    return None


class RankCaches:
    """`ranks` simulated radix caches and the round robin of unpinned requests."""

    def __init__(self, ranks: int) -> None:
        self.ranks = ranks
        self._seen: list[list[tuple[int, ...]]] = [[] for _ in range(ranks)]
        self._turn = itertools.cycle(range(ranks))

    def route(self, body: dict[str, Any]) -> int:
        """The rank that serves an admitted body."""
        rank = requested_rank(body)
        return rank if self.ranks > 1 and rank is not None else next(self._turn)

    def match(self, rank: int, prompt: list[int]) -> int:
        """The prompt's longest prefix this rank has seen."""
        return max((common_prefix_length(earlier, prompt) for earlier in self._seen[rank]), default=0)

    def remember(self, rank: int, ids: list[int]) -> None:
        """Ids this rank has computed (a prompt, or a prompt and its generated output)."""
        seen = self._seen[rank]
        seen.append(tuple(ids))
        del seen[:-_REMEMBERED_PROMPTS]

    def clear(self) -> None:
        for seen in self._seen:
            seen.clear()
