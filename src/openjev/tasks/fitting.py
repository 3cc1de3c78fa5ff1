"""Fitting a task: its question read over its labelled states, worked examples chosen, calibration fitted.

1. The examples are cut into k folds (OPENJEV_TASK_FOLDS, fewer with fewer examples; a contrastive
   pair stays in one fold: `calibration.folds`).
2. Each example's state is asked, in one request through the same path as any request's (`answer`),
   the question with w = 0, 1, …, W worked examples per label (OPENJEV_TASK_WORKED_EXAMPLES = W, at
   most OPENJEV_MAX_EXAMPLES_PER_OPTION) taken from the *other* folds (`examples.pick`; a state
   over OPENJEV_MAX_EXAMPLE_BYTES is never one), as questions `w0`, `w1`, …: one shared prefix,
   W + 1 readouts. So every readout is held out: its state is never among its own examples.
3. For each w: the readouts scored as they are (`before`), and calibrated out of fold (`after`,
   `calibration.out_of_fold`): accuracy with its Wilson interval, pair accuracy, Brier, ECE.
   The calibration is adopted for that w when its held-out Brier score is no worse than before.
4. The chosen w is the one with the best held-out accuracy (as it will be answered: calibrated if
   adopted); a larger w must beat every smaller one outright, so showing examples never lowers the
   accuracy measured. The task asks its question with the first w examples of each label (in the
   order posted) and, if adopted, the calibration fitted on every example's readout at that w.

The result is the task's document (`store.FORMAT`). A state that cannot be asked (over the
token budget, say) is a RequestRejected naming `examples.<i>.state`; nothing is kept.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from openjev.config import Settings
from openjev.errors import Issue, RequestRejected
from openjev.tasks.calibration import (
    LabelCalibration,
    answer_probabilities,
    fit,
    folds,
    out_of_fold,
    quality,
)
from openjev.tasks.examples import pick, showable, worked_question
from openjev.tasks.schema import (
    TaskRequest,
    canonical_examples,
    label_index,
    label_names,
    question_request,
)
from openjev.tasks.store import FORMAT, question_json, task_id

#: Given a request, its answers by question id (the path any request takes).
Answer = Callable[[Any], Awaitable[dict[str, dict[str, Any]]]]
#: Example states asked at once while fitting.
CONCURRENT_READOUTS = 4


async def _readouts(
    task: TaskRequest, gold: list[int], cut: list[list[int]], counts: int, shown: list[bool], answer: Answer
) -> list:
    """Per example, its distributions at w = 0..counts-1 worked examples per label (module doc, step 2);
    `shown`: which states may be worked examples."""
    fold_of = {index: number for number, fold in enumerate(cut) for index in fold}
    labels = len(label_names(task.question))
    states = [example.state for example in task.examples]
    gate = asyncio.Semaphore(CONCURRENT_READOUTS)

    async def one(index: int) -> list[list[float]]:
        allowed = [other for other in range(len(states)) if fold_of[other] != fold_of[index]]
        questions = {
            f"w{w}": worked_question(
                task.question, [[states[j] for j in chosen] for chosen in pick(gold, allowed, labels, w, shown)]
            )
            for w in range(counts)
        }
        request = question_request(task.question, states[index]).model_copy(update={"questions": questions})
        async with gate:
            try:
                answers = await answer(request)
            except RequestRejected as error:
                raise RequestRejected([Issue(("examples", index, "state"), error.message)]) from error
        return [answer_probabilities(answers[f"w{w}"]) for w in range(counts)]

    return list(await asyncio.gather(*(one(index) for index in range(len(states)))))


def _choose(table: dict[int, dict[str, Any]]) -> int:
    """The w with the best held-out accuracy as answered; a larger w must beat every smaller one."""
    chosen = 0
    for w, row in table.items():
        if row["answered"]["accuracy"] > table[chosen]["answered"]["accuracy"]:
            chosen = w
    return chosen


def _score(
    per_example: list[list[list[float]]], gold: list[int], groups: list[str | None], cut: list[list[int]]
) -> dict[int, dict[str, Any]]:
    table: dict[int, dict[str, Any]] = {}
    for w in range(len(per_example[0])):
        raw = [readouts[w] for readouts in per_example]
        before = quality(raw, gold, groups)
        after = quality(out_of_fold(raw, gold, cut), gold, groups)
        adopted = len(cut) > 1 and after["brier"] <= before["brier"]
        table[w] = {"before": before, "after": after, "calibration_adopted": adopted}
        table[w]["answered"] = after if adopted else before
    return table


async def fit_task(task: TaskRequest, settings: Settings, model: str, answer: Answer) -> dict[str, Any]:
    """The task's document (module doc); `model`: the served model it is fitted for."""
    found = [label_index(task.question, example.label) for example in task.examples]
    gold = [index for index in found if index is not None]
    if len(gold) != len(found):
        raise ValueError("fit_task: every label must be the question's (check_task first)")
    groups = [example.pair for example in task.examples]
    cut = folds(len(gold), settings.task_folds, groups)
    shown = showable([example.state for example in task.examples], settings.max_example_bytes)
    counts = min(settings.task_worked_examples, settings.max_examples_per_option) + 1
    per_example = await _readouts(task, gold, cut, counts, shown, answer)
    table = _score(per_example, gold, groups, cut)
    chosen = _choose(table)
    labels = label_names(task.question)
    fitted = fit([readouts[chosen] for readouts in per_example], gold)
    applied = fitted if table[chosen]["calibration_adopted"] else LabelCalibration.identity(len(labels))
    states = [example.state for example in task.examples]
    picked = pick(gold, range(len(gold)), len(labels), chosen, shown)
    worked = worked_question(task.question, [[states[j] for j in indices] for indices in picked])
    examples = canonical_examples(task)
    return {
        "format": FORMAT,
        "id": task_id(task.question, examples, model),
        "model": model,
        "created": time.time(),
        "labels": labels,
        "question": question_json(task.question),
        "worked_question": question_json(worked),
        "worked_examples_per_label": chosen,
        "calibration": {"biases": list(applied.biases), "temperature": applied.temperature},
        "report": {
            "examples": len(gold),
            "label_counts": {label: gold.count(index) for index, label in enumerate(labels)},
            "folds": len(cut),
            "fitted_calibration": {"biases": list(fitted.biases), "temperature": fitted.temperature},
            "by_worked_examples": {str(w): row for w, row in table.items()},
            "chosen": table[chosen],
        },
        "examples": examples,
    }
