"""A row's answer held against its gold: the predicted label, its distribution and whether it is right.

The labels are the answer's own keys: a choice's option names; a noul's `yes` and `no` with
P(yes) = `noul` and P(no) = 1 - `noul`, predicted yes when P(yes) ≥ 0.5; a score's level indices
`"0".."n-1"`, predicted as the level nearest the expected `score` (clamped to the rubric), with the
absolute error |score - gold| in levels beside it. The confidence that calibration figures bin is the
probability the distribution gives the predicted label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openjev.batch.rows import Row


@dataclass(frozen=True)
class Judged:
    id: str
    kind: str
    gold: str
    predicted: str
    distribution: dict[str, float]
    pair: str | None
    #: |expected score - gold level| for a score question; None for the others.
    level_error: float | None = None

    @property
    def correct(self) -> bool:
        return self.predicted == self.gold

    @property
    def confidence(self) -> float:
        return self.distribution.get(self.predicted, 0.0)


def judge(row: Row, answer: dict[str, Any]) -> Judged:
    """`answer` (one answer of a 200) against `row`'s gold; ValueError if the answer is not of its type."""
    kind = row.question["type"]
    if row.gold is None:
        raise ValueError(f"row {row.id}: no gold answer")
    if answer.get("type") != kind:
        raise ValueError(f"row {row.id}: a {answer.get('type')} answer to a {kind} question")
    if kind == "noul":
        yes = float(answer["noul"])
        distribution = {"yes": yes, "no": 1.0 - yes}
        return Judged(row.id, kind, row.gold, "yes" if yes >= 0.5 else "no", distribution, row.pair)
    distribution = {str(key): float(p) for key, p in answer["probabilities"].items()}
    if kind == "choice":
        return Judged(row.id, kind, row.gold, str(answer["choice"]), distribution, row.pair)
    score = float(answer["score"])
    nearest = min(max(round(score), 0), len(distribution) - 1)
    error = abs(score - int(row.gold))
    return Judged(row.id, kind, row.gold, str(nearest), distribution, row.pair, level_error=error)
