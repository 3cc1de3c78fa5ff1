"""Question branches over one cached prefix, answered by one batched forward pass.

A request's branches all start with the prefix its warm-up stored. `JobQueue.take` hands the worker
the oldest waiting job together with every other waiting job that extends the same cached prefix,
as many as `batch_bytes` allows (each row holds its own copy of the prefix's KV cache).

`forward_rows` then runs them at once: the suffixes are right-padded to the longest, the prefix KV is
repeated once per row, and the decoder runs over [rows, longest suffix] at positions after the
prefix. Attention is causal, so no real token sees the padding that follows it: each row's hidden
state at its last real token is the one its own forward pass would give (up to the summation order
of batched matmuls, i.e. bf16 rounding). The output head runs on those positions only.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from openjev.backends.base import LabelLogprobs, ReadoutCall
from openjev.backends.embedded.prefix_cache import CacheEntry, PrefixCache

#: How long the worker waits for sibling branches when it finds a single job with a cached prefix:
#: the engine submits a request's branches within microseconds of each other.
LINGER_SECONDS = 0.002


@dataclass(slots=True, eq=False)
class Job:
    call: ReadoutCall
    future: Future[LabelLogprobs | None] = field(default_factory=Future)
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class Batch:
    """Jobs the worker runs together and the cached entry their prompts extend (or equal, for a
    single job answered from the cache), found once for all of them; None when nothing is cached."""

    jobs: list[Job]
    prefix_length: int = 0
    prefix: CacheEntry | None = None


class JobQueue:
    def __init__(self, prefix_cache: PrefixCache, batch_bytes: int) -> None:
        self.prefix_cache = prefix_cache
        self.batch_bytes = batch_bytes
        self._jobs: deque[Job] = deque()
        self._lock = threading.Lock()

    def put(self, job: Job) -> None:
        with self._lock:
            self._jobs.append(job)

    def withdraw(self, job: Job) -> bool:
        """Remove a job that has not started; False when the worker already took it."""
        with self._lock:
            if job in self._jobs:
                self._jobs.remove(job)
                return True
            return False

    def take(self) -> Batch | None:
        with self._lock:
            lone = len(self._jobs) == 1
        if lone:
            time.sleep(LINGER_SECONDS)
        with self._lock:
            first = self._next_startable()
            if first is None:
                return None
            ids = tuple(first.call.input_ids)
            hit = self.prefix_cache.longest_prefix(ids)
            if hit is None or hit[0] == len(ids):
                return Batch([first], hit[0] if hit else 0, hit[1] if hit else None)
            length, entry = hit
            rows = max(1, self.batch_bytes // max(1, entry.nbytes))
            batch = [first]
            for job in list(self._jobs):
                if len(batch) >= rows:
                    break
                other = job.call.input_ids
                if len(other) > length and tuple(other[:length]) == ids[:length]:
                    self._jobs.remove(job)
                    if job.future.set_running_or_notify_cancel():
                        batch.append(job)
            self.prefix_cache.count_hits(len(batch) - 1)
            return Batch(batch, length, entry)

    def _next_startable(self) -> Job | None:
        while self._jobs:
            job = self._jobs.popleft()
            if job.future.set_running_or_notify_cancel():
                return job
        return None


def forward_rows(torch: Any, lm: Any, cache_kwarg: str, batch: Batch) -> list[Any]:
    """The log-softmax after each job's prompt, all rows in one decoder pass over the shared prefix."""
    assert batch.prefix is not None
    suffixes = [list(job.call.input_ids[batch.prefix_length :]) for job in batch.jobs]
    rows, longest = len(suffixes), max(map(len, suffixes))
    kv = copy.deepcopy(batch.prefix.kv)
    kv.batch_repeat_interleave(rows)
    input_ids = torch.zeros((rows, longest), dtype=torch.long)
    for row, suffix in enumerate(suffixes):
        input_ids[row, : len(suffix)] = torch.tensor(suffix, dtype=torch.long)
    positions = torch.arange(batch.prefix_length, batch.prefix_length + longest).unsqueeze(0).expand(rows, -1)
    with torch.inference_mode():
        hidden = lm.get_decoder()(
            input_ids=input_ids, position_ids=positions, use_cache=True, **{cache_kwarg: kv}
        ).last_hidden_state
        last = hidden[torch.arange(rows), torch.tensor([len(suffix) - 1 for suffix in suffixes])]
        logits = lm.get_output_embeddings()(last)
        return list(torch.log_softmax(logits.float(), dim=-1))
