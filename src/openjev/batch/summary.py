"""The figures `openjev eval` reports for judged rows, per question (never pooled by type) and over all rows.

For each question: n, accuracy with its 95% Wilson interval, per-label precision, recall, F1 and
support with their macro and weighted averages and the confusion matrix gold → predicted
(scikit-learn, through `quality.metrics.label_report`), pair accuracy (both halves of a contrastive
pair right) where rows carry `pair`, the multiclass Brier score, the expected calibration error over
ten equal-mass bins of the predicted label's probability, and the reliability diagram's ten
equal-width bins, each with its count and its accuracy's Wilson interval. Choice questions add the
position error: for each option position i, (share of rows predicted at i) - (share whose gold is
at i), and the worst absolute gap. Score questions add the mean absolute error in levels,
mean |score - gold|, with a normal 95% interval (mean ± 1.96·s/√n).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from openjev.batch.judging import Judged, question_labels
from openjev.quality.metrics import (
    accuracy_of,
    brier,
    ece,
    label_report,
    mean_interval,
    pair_accuracy,
    wilson_interval,
)

BINS = 10
#: How many characters of a question's instructions name it in the report.
NAME_CHARS = 60


def summarize(judged: Sequence[Judged], questions: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """`questions`: the figures per question, in the order `questions` (key → question as asked) gives
    them; `all`: accuracy over every row."""
    present = [key for key in questions if any(item.question == key for item in judged)]
    figures = [
        question_figures([item for item in judged if item.question == key], key, questions[key]) for key in present
    ]
    for number, entry in enumerate(figures, start=1):
        entry["name"] = question_name(questions[entry["key"]], number)
    return {"questions": figures, "all": accuracy_of([item.correct for item in judged])}


def question_name(question: Mapping[str, Any], number: int) -> str:
    instructions = " ".join(str(question.get("instructions") or "").split())
    if len(instructions) > NAME_CHARS:
        instructions = instructions[: NAME_CHARS - 1] + "…"
    return f"Q{number} ({question['type']}): {instructions}"


def question_figures(items: Sequence[Judged], key: str, question: Mapping[str, Any]) -> dict[str, Any]:
    correct = [item.correct for item in items]
    confidences = [item.confidence for item in items]
    labels = question_labels(question)
    figures: dict[str, Any] = {"key": key, "type": question["type"], "question": dict(question)}
    figures.update(accuracy_of(correct))
    figures["label_names"] = labels
    figures.update(label_report([item.gold for item in items], [item.predicted for item in items], list(labels)))
    figures["pairs"] = pair_accuracy(correct, [item.pair for item in items])
    figures["brier"] = brier([item.distribution for item in items], [item.gold for item in items])
    figures["ece"] = ece(confidences, correct, BINS)
    figures["reliability"] = reliability_bins(confidences, correct)
    if question["type"] == "choice":
        figures["position_error"] = position_error(items, list(labels))
    if question["type"] == "score":
        figures["level_mae"] = mean_interval([item.level_error or 0.0 for item in items])
    return figures


def reliability_bins(confidences: Sequence[float], correct: Sequence[bool]) -> list[dict[str, Any]]:
    """The reliability diagram's bins: BINS equal-width bins of the predicted label's probability
    ([0, 0.1), ..., [0.9, 1]; empty ones left out), each with its row count, mean confidence, accuracy
    and the accuracy's Wilson interval. Equal width, so bins sit apart on the plot however the
    confidences cluster; the ECE keeps its equal-mass bins."""
    index = np.minimum((np.asarray(confidences) * BINS).astype(int), BINS - 1)
    bins = []
    for number in range(BINS):
        members = np.flatnonzero(index == number)
        if len(members):
            right = int(sum(bool(correct[i]) for i in members))
            bins.append(
                {
                    "bin": [number / BINS, (number + 1) / BINS],
                    "n": len(members),
                    "confidence": float(np.mean([confidences[i] for i in members])),
                    "accuracy": right / len(members),
                    "ci95": list(wilson_interval(right, len(members))),
                }
            )
    return bins


def position_error(items: Sequence[Judged], order: list[str]) -> dict[str, Any]:
    """Per option position: predicted share minus gold share, and the worst gap."""
    predicted: Counter[int] = Counter(order.index(item.predicted) for item in items)
    gold: Counter[int] = Counter(order.index(item.gold) for item in items)
    gaps = {str(i + 1): (predicted[i] - gold[i]) / len(items) for i in range(len(order))}
    return {"gaps": gaps, "worst": max(abs(gap) for gap in gaps.values())}
