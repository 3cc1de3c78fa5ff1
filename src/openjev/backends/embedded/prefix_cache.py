"""A byte-bounded store of model states after prompts, for prefix KV reuse in the embedded backend.

Keys are the token-id tuples the states cover; `longest_prefix(ids)` finds the longest stored prompt
that starts `ids`. Thread-safe: the model's worker thread writes while `/health` reads the stats.
Stored states are never mutated: a call runs on `shared_copy(entry.kv)`, which shares their tensors.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


@dataclass(slots=True)
class CacheEntry:
    """The model state after some prompt: its KV cache, its final-position log-softmax and the final
    hidden state there (the vector the output head read)."""

    #: transformers.DynamicCache, never mutated once stored (callers run on a `shared_copy`); None for a
    #: prompt answered in a batch, whose entry only answers that exact prompt again.
    kv: Any
    logprobs: torch.Tensor
    nbytes: int
    #: float32, shape (hidden size,); None where the run that stored the entry did not compute one (a
    #: generation's prompt): such an entry answers its exact prompt only when no hidden state is asked.
    hidden: torch.Tensor | None = None
    #: Set once another call reused this entry; reused entries are evicted after unreused ones.
    reused: bool = False


@dataclass(frozen=True, slots=True)
class PrefixCacheStats:
    entries: int
    bytes: int
    capacity_bytes: int
    hits: int
    misses: int
    evictions: int


class PrefixCache:
    """A byte-bounded store of `CacheEntry`s keyed by the token-id tuple they cover.

    Every computed prompt is stored, because the backend cannot tell a warm-up prefix from a question
    branch, and a prompt that extends an older prefix (a conversation that grew) becomes the prefix of
    the next branches. To keep branches from pushing prefixes out, eviction is segmented: entries never
    reused go first (oldest first), then reused ones in least-recently-used order. An entry larger than
    the whole capacity is not stored, so a capacity of 0 disables reuse.
    """

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = max(0, capacity_bytes)
        self._entries: OrderedDict[tuple[int, ...], CacheEntry] = OrderedDict()
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        # The worker thread mutates the cache while health() reads the stats on the event loop thread.
        self._lock = threading.Lock()

    def longest_prefix(self, ids: tuple[int, ...], *, whole: bool = True) -> tuple[int, CacheEntry] | None:
        """The longest entry whose key is a prefix of `ids` (or equals it, unless `whole` is False), as
        (key length, entry). An entry without a KV cache only counts when it equals `ids`."""
        longest = len(ids) if whole else len(ids) - 1
        with self._lock:
            best: tuple[int, ...] = ()
            for key, entry in self._entries.items():
                # Cheap checks first: the slice comparison copies up to len(key) ids.
                if (
                    len(best) < len(key) <= longest
                    and (entry.kv is not None or len(key) == len(ids))
                    and ids[len(key) - 1] == key[-1]
                    and ids[: len(key)] == key
                ):
                    best = key
            if not best:
                self._misses += 1
                return None
            self._hits += 1
            entry = self._entries[best]
            entry.reused = True
            self._entries.move_to_end(best)
            return len(best), entry

    def count_hits(self, count: int) -> None:
        """Readouts that reused an entry found once for all of them (a batch)."""
        with self._lock:
            self._hits += count

    def put(self, key: tuple[int, ...], entry: CacheEntry) -> None:
        with self._lock:
            if entry.nbytes > self.capacity_bytes:
                return
            if (old := self._entries.pop(key, None)) is not None:
                self._bytes -= old.nbytes
            while self._bytes + entry.nbytes > self.capacity_bytes:
                victim = next((k for k, e in self._entries.items() if not e.reused), None)
                if victim is None:
                    victim = next(iter(self._entries))
                self._bytes -= self._entries.pop(victim).nbytes
                self._evictions += 1
            self._entries[key] = entry
            self._bytes += entry.nbytes

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def stats(self) -> PrefixCacheStats:
        with self._lock:
            return PrefixCacheStats(
                entries=len(self._entries),
                bytes=self._bytes,
                capacity_bytes=self.capacity_bytes,
                hits=self._hits,
                misses=self._misses,
                evictions=self._evictions,
            )


def state_nbytes(kv: Any, logprobs: torch.Tensor, hidden: torch.Tensor | None = None) -> int:
    """Bytes held by a DynamicCache's key/value tensors (`kv` None: none) plus the stored distribution and
    hidden state."""
    total = sum(tensor.numel() * tensor.element_size() for tensor in (logprobs, hidden) if tensor is not None)
    for layer in kv.layers if kv is not None else ():
        for tensor in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if tensor is not None:
                total += tensor.numel() * tensor.element_size()
    return total


def shared_copy(kv: Any) -> Any:
    """A DynamicCache that starts as `kv` and grows without changing it, sharing its tensors.

    A DynamicLayer grows by `keys = torch.cat([keys, new])`, a new tensor, never by writing into the
    old one; so copying the layer objects (not their tensors) keeps `kv` intact at no cost in memory
    or time. Any other layer kind (sliding windows write in place) is deep-copied.
    """
    from transformers.cache_utils import DynamicLayer

    if not all(type(layer) is DynamicLayer for layer in kv.layers):
        return copy.deepcopy(kv)
    shared = copy.copy(kv)
    shared.layers = [copy.copy(layer) for layer in kv.layers]
    return shared
