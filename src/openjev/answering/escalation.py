"""Who escalates to the thinking tier (`thinking.py`, step 1); pure, no backend.

A question's margin is the gap, in nats, between the log-probabilities of its two most likely answers
after normalisation (`margin`; a noul's two answers are yes and no). Those below OPENJEV_THINK_MARGIN
are candidates, least confident first. With share s = OPENJEV_THINK_MAX_SHARE, a request of n
questions may escalate at most ceil(s n), and at most ceil(s m) - e where the window holds the last
m <= OPENJEV_THINK_WINDOW questions of this tier counting this request's (m = n for a request larger
than the window), e of them escalated before; of a request larger than the window, its last m
questions (those the window keeps) hold at most ceil(s m) escalations. Unused budget does not pile
up: a request never takes more than its own share, whatever the window left unused. s = 1 with a
huge margin escalates every question (evaluations).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Sequence
from typing import Any

from openjev.answering.answers import PROBABILITY_FLOOR

#: Guards ceil() against float noise (0.7 * 10 = 7.000000000000001).
_SHARE_EPSILON = 1e-9


def margin(answer: dict[str, Any]) -> float:
    """Top-two log-probability gap (nats) of a typed answer's distribution; 0 for a tie."""
    if answer["type"] == "noul":
        probabilities = [answer["noul"], 1.0 - answer["noul"]]
    else:
        probabilities = list(answer["probabilities"].values())
    first, second = sorted(probabilities, reverse=True)[:2]
    return math.log(max(first, PROBABILITY_FLOOR)) - math.log(max(second, PROBABILITY_FLOOR))


def share_cap(share: float, count: int) -> int:
    return math.ceil(share * count - _SHARE_EPSILON)


def escalation_calls(question_ids: Sequence[str], max_share: float) -> int:
    """The most backend calls the tier may make for a request whose first pass reads one branch per
    entry of `question_ids`: two for each view of as many questions as may escalate, those with the
    most views."""
    views = Counter(question_ids)
    return 2 * sum(sorted(views.values(), reverse=True)[: share_cap(max_share, len(views))])


class EscalationPolicy:
    """Which questions of a thinking-tier request think (module doc, step 1). Not thread-safe: the
    engine calls it on the event loop."""

    def __init__(self, threshold: float, max_share: float, window: int) -> None:
        self.threshold, self.max_share = threshold, max_share
        self._window: deque[bool] = deque(maxlen=window)

    @property
    def escalated_share(self) -> float:
        return sum(self._window) / len(self._window) if self._window else 0.0

    def select(self, margins: Sequence[tuple[str, float]]) -> list[str]:
        """The question ids to escalate, least confident first; records the request in the window."""
        count, window = len(margins), self._window.maxlen or 0
        retained = list(self._window)[max(0, len(self._window) - max(0, window - count)) :]
        allowed = min(
            share_cap(self.max_share, count),
            # A request larger than the window is a window of its own.
            share_cap(self.max_share, max(count, min(window, len(retained) + count))) - sum(retained),
        )
        # Of a request larger than the window, the window keeps its last `window` questions: they hold
        # at most the window's own share, so no later request sees more than the share escalated.
        tail_start, tail_cap = count - window, share_cap(self.max_share, window)
        chosen: set[int] = set()
        for value, index in sorted((value, index) for index, (_, value) in enumerate(margins)):
            if value >= self.threshold or len(chosen) >= allowed:
                break
            in_tail = sum(1 for kept in chosen if kept >= tail_start)
            if count <= window or index < tail_start or in_tail < tail_cap:
                chosen.add(index)
        self._window.extend(index in chosen for index in range(count))
        return [margins[index][0] for _, index in sorted((margins[i][1], i) for i in chosen)]
