"""The prompts whose KV stays resident in llama.cpp's memory, one sequence id each: the llama.cpp
runtime's prefix cache.

A call's prompt is matched against every resident prompt; the longest common prefix `p` (at most one
short of the call's own length, so at least one token is evaluated and read) is shared into a fresh
sequence with `seq_cp` (no copy: the cells gain a sequence id) and only the rest is evaluated. A prompt
equal to a resident one is answered from that entry's stored distribution without running anything.

Sequence ids are few (the context's `n_seq_max`) and cells are bounded by the context, so entries are
evicted least recently used first: when a call needs an id and none is free, or when a decode finds no
room. `pinned` ids (the sources and targets of the batch being built) are never evicted.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(slots=True, eq=False)
class Resident:
    """A prompt whose KV is in sequence `seq`, with the distribution after its last token."""

    seq: int
    ids: tuple[int, ...]
    logprobs: np.ndarray
    used: int = 0


@dataclass(frozen=True, slots=True)
class Match:
    """The resident entry sharing the longest prefix with a prompt (None: none shares any) and how many
    of the prompt's tokens it gives; `whole` when the entry is the prompt itself."""

    entry: Resident | None
    length: int

    def whole(self, ids: tuple[int, ...]) -> bool:
        return self.entry is not None and self.entry.ids == ids


class SequenceCache:
    """Resident prompts in sequence ids [0, `sequences`), least recently used first out."""

    def __init__(self, sequences: int) -> None:
        self._free = list(range(sequences - 1, -1, -1))
        self._entries: dict[int, Resident] = {}
        self._clock = itertools.count(1)
        self.hits = self.misses = self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def match(self, ids: tuple[int, ...], *, record: bool = True) -> Match:
        """The longest shared prefix; a partial one leaves the last token of `ids` to evaluate. `record`:
        count it as a hit or a miss, and the entry as used."""
        best, best_length = None, 0
        for entry in self._entries.values():
            length = _common_prefix(entry.ids, ids)
            if entry.ids == ids:
                best, best_length = entry, length
                break
            length = min(length, len(ids) - 1)
            if length > best_length:
                best, best_length = entry, length
        if record and best is not None:
            best.used = next(self._clock)
            self.hits += 1
        elif record:
            self.misses += 1
        return Match(best, best_length)

    def allocate(self, pinned: Iterable[int], evicted: list[int]) -> int | None:
        """A free sequence id, evicting the least recently used unpinned entry when none is free (its id
        appended to `evicted`, whose KV the caller drops); None when every entry is pinned."""
        if not self._free and not self.evict_one(pinned, evicted):
            return None
        return self._free.pop()

    def evict_one(self, pinned: Iterable[int], evicted: list[int]) -> bool:
        keep = set(pinned)
        candidates = [entry for entry in self._entries.values() if entry.seq not in keep]
        if not candidates:
            return False
        victim = min(candidates, key=lambda entry: entry.used)
        self.release(victim.seq)
        evicted.append(victim.seq)
        self.evictions += 1
        return True

    def put(self, seq: int, ids: tuple[int, ...], logprobs: np.ndarray) -> None:
        self._entries[seq] = Resident(seq, ids, logprobs, next(self._clock))

    def release(self, seq: int) -> None:
        """Forget `seq` (whether or not an entry holds it) and free its id."""
        self._entries.pop(seq, None)
        if seq not in self._free:
            self._free.append(seq)

    def clear(self) -> list[int]:
        """Forget every entry; the ids whose KV the caller drops."""
        seqs = list(self._entries)
        for seq in seqs:
            self.release(seq)
        return seqs


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """Length of the longest common prefix of two id sequences (numpy: prompts run to 30k ids)."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    if a[:n] == b[:n]:
        return n
    diff = np.flatnonzero(np.asarray(a[:n], dtype=np.int64) != np.asarray(b[:n], dtype=np.int64))
    return int(diff[0])
