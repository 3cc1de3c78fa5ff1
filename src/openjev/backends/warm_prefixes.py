"""Which shared prefixes the backend's prefix cache still holds, as far as openjev's own traffic tells.

An evaluation awaits one warm-up readout of its shared prefix before its branches, so that the branches,
sent together, find the prefix in the backend's prefix cache instead of each prefilling it (SGLang's
default `fcfs` schedule puts concurrent requests into one prefill batch, where none reuses another's
prefix). When the prefix is certainly cached already, that warm-up is a whole extra round trip and
scheduler step for nothing: this record says when it may be skipped.

Contract:
- `WarmPrefixes(pool_tokens, share)`: `pool_tokens` is the tokens one rank's prefix cache holds
  (SGLang's `max_total_num_tokens`; None: unknown, and nothing is ever skipped), `share` the part of
  it openjev counts on (0: nothing is skipped).
- `begin(prefix, images, rank, tokens)` records that an evaluation puts at most `tokens` tokens into
  `rank`'s cache (its radix tree: the prefix once, each branch's suffix and output, its other readouts)
  and says whether its prefix is still cached: it was sent to the same rank before, and the tokens
  sent to that rank since then, plus the prefix itself, fit in `share x pool_tokens`. SGLang's radix
  cache evicts leaves, least recently used first, so nothing newer than the prefix's last use can push
  it out before that much has been sent (an evaluation's own branches hang below its prefix and go
  first); `share` leaves room for other clients of the backend and for calls still in flight.
  `spend(rank, tokens)` counts later calls of an evaluation (the thinking tier's).
- `settle(use, reported)` records the branches' reported `cached_tokens` (None: the backend does not
  report them). A skipped warm-up whose branches found less of the prefix than the last warm-up's
  branches did means the cache lost it (another client, a flush, a restart): the prefix is forgotten,
  so the next evaluation of it warms up again. So an eviction this record cannot see costs one
  evaluation its branches' prefills of the prefix, once.
- An extension (`begin(..., known)`: the prefix's first `known` ids are a remembered conversation's
  whole prefix, and at most EXTENSION_TOKENS more follow, a chat grown by a message or two; a prefix
  showing images is never one, its warm-up goes first unless it is cached itself): when
  those `known` ids are certainly cached as a prefix of their own, the warm-up is skipped too, and
  each branch prefills only the few new tokens after them (a round trip saved for a few tokens
  computed once per branch). Its branches finding less of them than the last warm-up's branches did
  forgets them.
- The prefix's identity: its ids and its images' sha256 digests, on its rank; at most `capacity`
  prefixes are kept, the least recently used forgotten first.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import orjson

from openjev.prompting.prompt_ids import SharedIds
from openjev.request.images import ImageInput

#: Prefixes remembered (a key and three integers each).
CAPACITY = 4096
#: New tokens after a cached conversation's prefix that its branches may each prefill instead of a warm-up.
EXTENSION_TOKENS = 256


@dataclass(frozen=True, slots=True)
class PrefixUse:
    """One evaluation's use of its shared prefix: `cached` says its warm-up may be skipped."""

    key: bytes
    rank: int
    #: The rank's sent-token count once this evaluation is counted.
    sent: int
    prefix_tokens: int
    cached: bool
    #: The key and length of the cached known part an extension's branches reuse (None: not an extension).
    known_key: bytes | None = None
    known_tokens: int = 0


@dataclass(slots=True)
class _Entry:
    #: The rank's sent-token count after the evaluation that last used the prefix.
    sent: int
    #: The least of the prefix the branches found cached after the last warm-up (None: not reported).
    found: int | None


class WarmPrefixes:
    def __init__(self, pool_tokens: int | None, share: float, capacity: int = CAPACITY) -> None:
        self.limit = int(pool_tokens * share) if pool_tokens else 0
        self.capacity = capacity
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self._sent: defaultdict[int, int] = defaultdict(int)

    def begin(
        self, prefix: SharedIds, images: Sequence[ImageInput], rank: int | None, tokens: int, known: int = 0
    ) -> PrefixUse:
        """Record an evaluation's `tokens` sent to `rank` (None: the one rank) and whether its prefix is
        cached, or extends by a few tokens `known` ids that are (see the module docstring)."""
        rank = rank or 0
        key = _key(prefix.json_items(), images, rank)
        sent = self._sent[rank]
        self._sent[rank] = sent + tokens
        use = PrefixUse(key, rank, sent + tokens, len(prefix.ids), self._holds(key, sent, len(prefix.ids)))
        if use.cached or images or known <= 0 or not 0 < len(prefix.ids) - known <= EXTENSION_TOKENS:
            return use
        known_key = _key(orjson.dumps(prefix.ids[:known])[1:-1], (), rank)
        return replace(use, cached=self._holds(known_key, sent, known), known_key=known_key, known_tokens=known)

    def _holds(self, key: bytes, sent: int, tokens: int) -> bool:
        entry = self._entries.get(key)
        return entry is not None and sent - entry.sent + tokens <= self.limit

    def spend(self, rank: int | None, tokens: int) -> None:
        self._sent[rank or 0] += tokens

    def settle(self, use: PrefixUse, reported: Sequence[int | None]) -> None:
        """After the branches: remember the prefix as used now, or forget it when the cache had lost it."""
        if not self.limit:
            return
        counts = [min(count, use.prefix_tokens) for count in reported if count is not None]
        found = min(counts) if counts else None
        extended = use.known_key if use.cached else None
        known = self._entries.get(extended) if extended is not None else None
        lost = known is not None and found is not None and known.found is not None and found < known.found
        if extended is not None and lost:
            del self._entries[extended]  # the cache lost the part it extended
            return
        entry = self._entries.get(use.key)
        if use.cached and entry is not None:
            if found is not None and entry.found is not None and found < entry.found:
                del self._entries[use.key]
                return
            found = entry.found
        self._entries[use.key] = _Entry(use.sent, found)
        self._entries.move_to_end(use.key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)


def _key(json_items: bytes, images: Sequence[ImageInput], rank: int) -> bytes:
    """A prefix's identity on `rank`: a digest of its ids' JSON and its images' sha256 digests."""
    digest = hashlib.blake2b(json_items, digest_size=16)
    for image in images:
        digest.update(image.sha256.encode())
    return rank.to_bytes(4, "little") + digest.digest()
