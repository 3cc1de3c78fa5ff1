"""The fake's scheduler: admitted requests run in steps, as 0.5.19's event loop batches them.

- Each step takes every request waiting when it starts (the default `--schedule-policy fcfs` sorts
  nothing and, within its token budget, admits them all: `managers/schedule_policy.py` `calc_priority`).
  The requests of one `/generate` in the list form arrive together (its TokenizerManager sends them to
  the scheduler as one message), so they always share a step.
- A request's `cached_tokens` is what its rank's radix cache held when the step started: the requests
  of one step never reuse each other's prompts, so concurrent requests over an uncached prefix each
  prefill it (the cost openjev's awaited warm-up exists to avoid). Their prompts enter the cache when
  the step ends.
- #34719 (0.5.19 `layers/logprob_processor.py` `get_token_ids_logprobs_raw`): a step that mixes a request
  with a `token_ids_logprob` list and one without, or input-token logprobs (`logprob_start_len` >= 0)
  with next-token ones, kills the scheduler: recorded as a violation.
- `steps` counts the steps, `step_sizes` holds each step's request count, `prefilled` the prompt tokens
  computed (not reused).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.fake_sglang.ranks import RankCaches


@dataclass
class _Waiting:
    rank: int
    prompt: list[int]
    body: dict[str, Any]
    answer: asyncio.Future[int]


@dataclass
class Scheduler:
    caches: RankCaches
    violate: Callable[[str], None]
    #: How long a step's forward pass takes: a step answers what arrived until it ends, the requests
    #: arriving after that wait for the next one.
    step_seconds: float = 0.0
    steps: int = 0
    step_sizes: list[int] = field(default_factory=list)
    prefilled: int = 0
    _waiting: list[_Waiting] = field(default_factory=list)
    _running: asyncio.Task[None] | None = None

    async def prefill(self, requests: list[tuple[int, list[int], dict[str, Any]]], page_size: int) -> list[int]:
        """Run each (rank, prompt, body) in the next step, all in the same one; each one's cached tokens
        (whole pages, never the last token)."""
        loop = asyncio.get_running_loop()
        answers: list[asyncio.Future[int]] = [loop.create_future() for _ in requests]
        self._waiting += [_Waiting(*request, answer) for request, answer in zip(requests, answers, strict=True)]
        if self._running is None or self._running.done():
            self._running = asyncio.create_task(self._run())
        return [cached - cached % page_size for cached in await asyncio.gather(*answers)]

    async def _run(self) -> None:
        while True:
            # The forward pass: requests arriving meanwhile (or together with the first) share the step.
            await asyncio.sleep(self.step_seconds)
            if not self._waiting:
                return
            batch, self._waiting = self._waiting, []
            self.steps += 1
            self.step_sizes.append(len(batch))
            self._check_mix([waiting.body for waiting in batch])
            found = [min(self.caches.match(w.rank, w.prompt), len(w.prompt) - 1) for w in batch]
            self.prefilled += sum(len(w.prompt) - cached for w, cached in zip(batch, found, strict=True))
            for waiting, cached in zip(batch, found, strict=True):
                self.caches.remember(waiting.rank, waiting.prompt)
                if not waiting.answer.done():
                    waiting.answer.set_result(cached)

    def _check_mix(self, bodies: list[dict[str, Any]]) -> None:
        with_ids = {bool(body.get("token_ids_logprob")) for body in bodies}
        input_logprobs = {body.get("return_logprob") and body.get("logprob_start_len", -1) >= 0 for body in bodies}
        if len(with_ids) > 1 or len(input_logprobs) > 1:
            self.violate("crash: a step mixes requests with and without token_ids_logprob or input logprobs (#34719)")
