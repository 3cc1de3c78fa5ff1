"""Question branches over one cached prefix, answered by one batched forward pass.

A request's branches all start with the prefix its warm-up stored. `JobQueue.take` hands the worker
the oldest waiting job together with every other waiting job that extends the same cached prefix,
as many as `batch_bytes` allows (at most `batch_bytes` over the prefix state's bytes).

`forward_rows` then runs them at once, packed into one sequence: the suffixes s_1..s_n are
concatenated (no padding), token t of suffix s_b gets the position P + t (P the prefix length), and
the attention mask lets it see the whole prefix and the tokens of s_b up to itself, nothing of the
other suffixes. Each branch's hidden state at its last token is then the one its own forward pass
would give (up to the summation order of matmuls, i.e. float rounding). The prefix KV is shared,
not copied (`shared_copy`), and the output head runs on the n last positions only. Each row is the
log-softmax there and the final hidden state the head read (a `Row`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from openjev.backends.base import LabelLogprobs, ReadoutCall
from openjev.backends.embedded.prefix_cache import CacheEntry, PrefixCache, shared_copy

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


@dataclass(frozen=True, slots=True)
class Row:
    """After one prompt: the log-softmax over the vocabulary and the final hidden state (after the model's
    last norm: the vector the output head reads), float32."""

    logprobs: Any
    hidden: Any


def rows_of(torch: Any, lm: Any, last_hidden: Any) -> list[Row]:
    """Rows from the final hidden states at each prompt's last position (shape [rows, hidden size])."""
    logits = lm.get_output_embeddings()(last_hidden)
    return [
        Row(logprobs, hidden)
        for logprobs, hidden in zip(torch.log_softmax(logits.float(), dim=-1), last_hidden.float(), strict=True)
    ]


def forward_rows(torch: Any, lm: Any, cache_kwarg: str, batch: Batch) -> list[Row]:
    """The row after each job's prompt, all branches packed in one decoder pass over the prefix."""
    assert batch.prefix is not None
    start = batch.prefix_length
    suffixes = [list(job.call.input_ids[start:]) for job in batch.jobs]
    lengths = torch.tensor([len(suffix) for suffix in suffixes])
    branch = torch.repeat_interleave(torch.arange(len(suffixes)), lengths)
    ends = torch.cumsum(lengths, 0)
    offsets = torch.arange(int(ends[-1])) - (ends - lengths)[branch]
    # mask[i, j]: packed token i may attend to packed token j (same branch, j <= i); the prefix is
    # visible to all. Shape [1, 1, queries, prefix + queries], as transformers takes a prepared mask.
    own = (branch[:, None] == branch[None, :]) & (offsets[None, :] <= offsets[:, None])
    mask = torch.cat([torch.ones(len(branch), start, dtype=torch.bool), own], dim=1)[None, None]
    with torch.inference_mode():
        hidden = lm.get_decoder()(
            input_ids=torch.tensor([[token for suffix in suffixes for token in suffix]], dtype=torch.long),
            position_ids=(offsets + start)[None],
            attention_mask=mask,
            use_cache=True,
            **{cache_kwarg: shared_copy(batch.prefix.kv)},
        ).last_hidden_state
        return rows_of(torch, lm, hidden[0, ends - 1])
