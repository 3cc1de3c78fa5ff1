"""A row's answer held against its gold: the predicted label, its distribution and whether it is right.

The labels are the answer's own keys: a choice's option names; a noul's `yes` and `no` with
P(yes) = `noul` and P(no) = 1 - `noul`, predicted yes when P(yes) ≥ 0.5; a score's level indices
`"0".."n-1"`, predicted as the level nearest the expected `score` (clamped to the rubric), with the
absolute error |score - gold| in levels beside it. The confidence that calibration figures bin is the
probability the distribution gives the predicted label. Rows are grouped by their question
(`question_key`, a digest of the question as asked), so two questions of one type never share a figure.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openjev.batch.rows import Row

#: How many characters of a score level's text name it in tables and plots.
LEVEL_NAME_CHARS = 24
#: The hex digits of a row's digest that name a row its file gives no id (`batch/rows.py`).
DIGEST_ID_CHARS = 12


def question_key(question: Mapping[str, Any]) -> str:
    """The first 12 hex digits of the sha256 of the question as canonical JSON (sorted keys)."""
    text = json.dumps(question, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def row_digest(row: Row) -> str:
    """The sha256 of what makes a row the same row in two runs: its id, state, question and gold."""
    text = json.dumps([row.id, row.state, row.question, row.gold], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def item_digests(rows: Sequence[Row]) -> dict[str, str]:
    """Each row's sha256 of what makes it the same item under another question (another prompt, a task
    named or not): its id, state and gold. A row whose id is the digest of its state and question
    (`batch/rows.py`: the file names none) is named instead by its state, gold and which occurrence of
    that pair it is in file order, so two prompts over an id-less file pair their rows."""
    seen: Counter[str] = Counter()
    digests = {}
    for row in rows:
        named = [row.id, row.state, row.gold]
        if row.id == row.digest[:DIGEST_ID_CHARS] or row.id.startswith(f"{row.digest[:DIGEST_ID_CHARS]}#"):
            key = json.dumps([row.state, row.gold], sort_keys=True, ensure_ascii=False)
            seen[key] += 1
            named = [None, row.state, row.gold, seen[key]]
        digests[row.id] = hashlib.sha256(json.dumps(named, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    return digests


def question_labels(question: Mapping[str, Any]) -> dict[str, str]:
    """Each label the answer can take, in the question's order, with the name a reader knows it by
    (a score level's index with the start of its text)."""
    if question["type"] == "noul":
        return {"yes": "yes", "no": "no"}
    if question["type"] == "choice":
        return {str(name): str(name) for name in question["criteria"]}
    names = {}
    for index, level in enumerate(question["criteria"]):
        text = f"{index} {level if isinstance(level, str) else json.dumps(level)}"
        names[str(index)] = text if len(text) <= LEVEL_NAME_CHARS else text[: LEVEL_NAME_CHARS - 1] + "…"
    return names


def prediction(kind: str, answer: Mapping[str, Any]) -> tuple[str, dict[str, float]]:
    """The label an answer of type `kind` predicts and its distribution over the labels."""
    if answer.get("type") != kind:
        raise ValueError(f"a {answer.get('type')} answer to a {kind} question")
    if kind == "noul":
        yes = float(answer["noul"])
        return ("yes" if yes >= 0.5 else "no"), {"yes": yes, "no": 1.0 - yes}
    distribution = {str(key): float(p) for key, p in answer["probabilities"].items()}
    if kind == "choice":
        return str(answer["choice"]), distribution
    return str(min(max(round(float(answer["score"])), 0), len(distribution) - 1)), distribution


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
    question: str = ""

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
    try:
        predicted, distribution = prediction(kind, answer)
    except ValueError as error:
        raise ValueError(f"row {row.id}: {error}") from None
    error = abs(float(answer["score"]) - int(row.gold)) if kind == "score" else None
    return Judged(row.id, kind, row.gold, predicted, distribution, row.pair, error, question_key(row.question))
