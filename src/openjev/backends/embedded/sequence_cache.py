"""The prompts whose KV stays resident in llama.cpp's memory, one sequence id each: the llama.cpp
runtime's prefix cache.

A call's prompt is matched against every resident prompt; the longest common prefix `p` (at most one
short of the call's own length, so at least one token is evaluated and read) is shared into a fresh
sequence with `seq_cp` (no copy: the cells gain a sequence id) and only the rest is evaluated. A prompt
equal to a resident one is answered from that entry's stored distribution without running anything
(and its hidden state, where its decode read one; an equal entry with one is preferred).

Every resident cell costs every later decode: the memory is one pool, and each new token's attention
runs over all the cells in use, masked or not (8,000 cells of other prompts made a 400-token prefill
1.8x slower here). So `trim` keeps the cells of entries the batch does not build on within a bound,
least recently used first out, and entries also go when a call needs an id and none is free, or when a
decode finds no room. An entry owns the cells it evaluated (`own`); the cells it shares with its
`parent` stay while either holds them, so an entry goes with every entry built on it (its family), and
the sum of `own` is then exactly the cells in use. `pinned` ids (the sources and targets of the batch
being built) never go.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(slots=True, eq=False)
class Resident:
    """A prompt whose KV is in sequence `seq`, with the distribution after its last token."""

    seq: int
    ids: tuple[int, ...]
    logprobs: np.ndarray
    used: int = 0
    #: The entry it was copied from (None: evaluated from the start) and the cells it evaluated itself.
    parent: int | None = None
    own: int = 0
    #: The final hidden state after the last token, where the decode that evaluated it read one.
    hidden: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class Match:
    """The resident entry sharing the longest prefix with a prompt (None: none shares any) and how many
    of the prompt's tokens it gives; `whole` when the entry is the prompt itself."""

    entry: Resident | None
    length: int

    def whole(self, ids: tuple[int, ...]) -> bool:
        return self.entry is not None and self.entry.ids == ids

    def answers(self, ids: tuple[int, ...], *, hidden: bool) -> bool:
        """Whether the entry answers the prompt without a decode (with its hidden state, if `hidden`)."""
        return self.whole(ids) and (not hidden or (self.entry is not None and self.entry.hidden is not None))

    def evaluable(self, ids: tuple[int, ...]) -> Match:
        """The match to evaluate over: a whole one (a resident prompt asked again for its hidden state)
        gives all but the last token, which is evaluated again."""
        return Match(self.entry, len(ids) - 1) if self.whole(ids) else self


class SequenceCache:
    """Resident prompts in sequence ids [0, `sequences`), least recently used first out."""

    def __init__(self, sequences: int) -> None:
        self._free = list(range(sequences - 1, -1, -1))
        self._entries: dict[int, Resident] = {}
        self._clock = itertools.count(1)
        self.hits = self.misses = self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def stats(self) -> dict[str, int]:
        return {
            "entries": len(self),
            "tokens": self.resident_tokens(),
            "hits": self.hits,
            "misses": self.misses,
            "evictions": self.evictions,
        }

    def match(self, ids: tuple[int, ...], *, record: bool = True) -> Match:
        """The longest shared prefix; a partial one leaves the last token of `ids` to evaluate. `record`:
        count it as a hit or a miss, and the entry as used."""
        best, best_length = None, 0
        for entry in self._entries.values():
            length = _common_prefix(entry.ids, ids)
            if entry.ids == ids:
                best, best_length = entry, length
                if entry.hidden is not None:  # else one evaluated again for its hidden state may follow
                    break
                continue
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
        """Evict the least recently used entry whose family has no pinned member, with its family (their
        ids appended to `evicted`); False when every entry is pinned or built on."""
        keep = set(pinned)
        for victim in sorted(self._entries.values(), key=lambda entry: entry.used):
            family = self._family(victim.seq)
            if family & keep:
                continue
            for seq in family:
                self.release(seq)
                evicted.append(seq)
            self.evictions += len(family)
            return True
        return False

    def trim(self, tokens: int, pinned: Iterable[int], evicted: list[int]) -> None:
        """Evict until the cells of entries the pinned ones do not build on (neither pinned nor their
        ancestors) are at most `tokens`, or nothing more can go."""
        pinned = list(pinned)
        built_on = {seq for pin in pinned for seq in self._ancestry(pin)}
        while self.resident_tokens(excluding=built_on) > tokens and self.evict_one(pinned, evicted):
            pass

    def _ancestry(self, seq: int) -> list[int]:
        """`seq` and the entries it was copied from, up to one evaluated from the start."""
        chain = []
        entry = self._entries.get(seq)
        while entry is not None:
            chain.append(entry.seq)
            entry = self._entries.get(entry.parent) if entry.parent is not None else None
        return chain

    def resident_tokens(self, excluding: Collection[int] = ()) -> int:
        return sum(entry.own for entry in self._entries.values() if entry.seq not in excluding)

    def put(
        self,
        seq: int,
        ids: tuple[int, ...],
        logprobs: np.ndarray,
        parent: int | None,
        shared: int,
        hidden: np.ndarray | None = None,
    ) -> None:
        """`seq` holds `ids`: its first `shared` cells copied from `parent`, the rest evaluated into it."""
        self._entries[seq] = Resident(seq, ids, logprobs, next(self._clock), parent, len(ids) - shared, hidden)

    def _family(self, seq: int) -> set[int]:
        """`seq` and every entry built on it, directly or not."""
        family = {seq}
        grown = True
        while grown:
            grown = False
            for entry in self._entries.values():
                if entry.parent in family and entry.seq not in family:
                    family.add(entry.seq)
                    grown = True
        return family

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
