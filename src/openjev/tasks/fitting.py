"""Fitting a task: its question read over its labelled states, then what it answers with adopted.

1. A fit needs two labels at least and `adoption.MIN_PER_LABEL` examples of each label it brings, or it
   cannot be cross-validated: a RequestRejected naming `examples` says which (`check_examples`).
2. The examples are cut into k stratified folds (OPENJEV_TASK_FOLDS, fewer with fewer examples or
   pairs; a contrastive pair stays in one fold: `adoption.cut`).
3. Each example's state is read with the plain question first (w = 0), through the same path as any
   request's (`answer`), raw: no task applies to a fit's readouts. Where the backend returns hidden
   states (`hidden`), these plain readouts, and only these, carry the hidden state at the answer
   position, for the head (`head.py`). Only when w = 0 leaves something to gain (held-out accuracy
   below 1) are states read again with w = 1, …, W worked examples per label
   (OPENJEV_TASK_WORKED_EXAMPLES = W, at most OPENJEV_MAX_EXAMPLES_PER_OPTION), as questions `w1`,
   `w2`, …: one shared prefix, W readouts. The examples shown are the first w of each label
   (`examples.demonstrations`; a state over OPENJEV_MAX_EXAMPLE_BYTES is never one), the very ones
   the task serves with w, and they are never scored: from then on the decision (step 4) scores only
   the examples of no pair with one shown, cut into folds again, each read with the one worked question
   per w. So no readout the nested cross-validation scores, at either level, shows the label of an
   example it scores, and a calibration is fitted on readouts of the prompt it is served with. W is
   lowered until every label keeps `MIN_PER_LABEL` scored examples (to 0: no worked readouts). Cost:
   n plain readouts, then n - s requests of W questions, s the examples set apart (about W per label).
   Before the first readout, the longest scored state is prepared (tokenized, not read) with the worked
   questions `w1`..`wW` through `check` (`check_worked`): worked questions over the token
   budget refuse the fit there, a RequestRejected naming that example's state, not after every plain
   readout. Readouts go at most `concurrency` at once, each request built when its turn comes (never all at
   once on the event loop); a readout refused as overloaded is asked again after `OVERLOAD_WAIT`
   seconds, doubling, at most `OVERLOAD_RETRIES` times, then the fit fails with that 529. Each is
   kept in `kept` (by its request) as it arrives, so a fit that is stopped and asked again reads only
   what it lacks.
4. What the task answers with is decided by nested cross-validation against the plain readout
   (`adoption.nested`): a worked-example count, a calibration or a head is adopted only when the
   procedure that chooses it, scored on outer folds it never saw, is no less accurate than plain, its
   Brier no worse, and it does not answer one label for everything. A head is a candidate only where
   the readouts carry hidden states and it fits the task file (`head.head_fits`: its numbers, written,
   take at most half of OPENJEV_TASK_MAX_BYTES; `report.head_left_out` says why not).
   `report.by_worked_examples` scores each count before and after calibration, cross-validated once
   (what was chosen among), `report.nested.head` the head, `report.learning_curve` the accuracy at
   each count of examples per label (`learning_curve.py`); `report.nested` is what decided (with
   `examples_scored` and `worked_examples_shown` where worked examples were read). That
   arithmetic, and the check of step 3 whether w = 0 leaves something to gain, run in a process of
   their own (`deciding.py`).

The result is the task's document (`store.FORMAT`), with its `head` where one was adopted. A state that
cannot be asked (over the token budget, say) is a RequestRejected naming `examples.<i>.state`; nothing
is kept.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import numpy as np

from openjev.config import Settings
from openjev.errors import Issue, Overloaded, RequestRejected
from openjev.request.sizes import text_bytes
from openjev.tasks.adoption import MIN_PER_LABEL, Candidate, at_cap, cut, unit_ids
from openjev.tasks.calibration import LabelCalibration, answer_probabilities
from openjev.tasks.deciding import decide, in_process, plain_accuracy
from openjev.tasks.examples import demonstrations, pick, showable, worked_question
from openjev.tasks.head import RidgeHead, head_fits
from openjev.tasks.schema import TaskRequest, canonical_examples, label_index, label_names, question_request
from openjev.tasks.store import FORMAT, question_json, task_id

log = logging.getLogger(__name__)
#: Given a request and the questions whose readout is to carry the hidden state, the answers by question id
#: and those hidden states (the path any request takes, with no task applied).
Answer = Callable[[Any, frozenset[str]], Awaitable[tuple[dict[str, dict[str, Any]], dict[str, Any]]]]
#: Given a request, prepares it as `answer` would, reading nothing: RequestRejected where it cannot be asked.
Check = Callable[[Any], Awaitable[None]]
#: Told (readouts done, readouts to do) as each arrives.
Progress = Callable[[int, int], None]
#: The nested report, the candidate chosen, each count's scores, the calibration fitted, the head if chosen
#: and the learning curve.
Decided = tuple[dict[str, Any], Candidate, dict[int, dict[str, Any]], LabelCalibration, RidgeHead | None, dict]
#: How long an overloaded server is waited for before a readout is asked again (doubling each time),
#: and how many times it is asked again: 0.5 + 1 + ... + 16 = 31.5 s in all, then the fit fails.
OVERLOAD_WAIT = 0.5
OVERLOAD_RETRIES = 6


def check_examples(gold: list[int], labels: list[str]) -> list[Issue]:
    """Why these labels cannot be cross-validated, if they cannot (module doc, step 1)."""
    counts = {labels[index]: gold.count(index) for index in sorted(set(gold))}
    if len(counts) < 2:
        return [Issue(("examples",), f"every example is labelled {next(iter(counts))!r}: a fit needs two labels")]
    few = {label: count for label, count in counts.items() if count < MIN_PER_LABEL}
    if few:
        return [
            Issue(
                ("examples",),
                f"too few examples to cross-validate: {few}; each label a task brings needs {MIN_PER_LABEL}",
            )
        ]
    return []


def _key(request: Any, hidden: bool) -> str:
    """A readout's key among the kept: its request, and whether it carries the hidden state."""
    digest = hashlib.sha256(request.model_dump_json(exclude_none=True).encode()).hexdigest()
    return f"{digest}+hidden" if hidden else digest


def _packed(state: Any) -> str:
    """A hidden state as kept: float32, base64."""
    return base64.b64encode(np.asarray(state, np.float32).tobytes()).decode()


def _unpacked(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), np.float32).astype(np.float64)


class _Reader:
    """Readouts through `answer`, `concurrency` at once, retrying overload within a bound, kept as they arrive."""

    def __init__(self, answer: Answer, concurrency: int, kept: MutableMapping[str, Any], progress: Progress | None):
        self.answer, self.kept, self.progress = answer, kept, progress
        self.concurrency = max(1, concurrency)
        self.done = self.total = 0

    async def _asked(self, index: int, request: Any, hidden: frozenset[str]) -> tuple[dict, dict[str, Any]]:
        """The readout's answers and hidden states, asking again while overloaded (module doc, step 3)."""
        waited = 0.0
        for attempt in range(OVERLOAD_RETRIES + 1):
            try:
                return await self.answer(request, hidden)
            except Overloaded as error:
                if attempt == OVERLOAD_RETRIES:
                    message = (
                        f"the readout of examples[{index}] was refused as overloaded {attempt + 1} times over "
                        f"{waited:.1f} s ({error.message}); the fit stops, its readouts kept: post it again later"
                    )
                    raise Overloaded(message) from error
                await asyncio.sleep(OVERLOAD_WAIT * 2**attempt)
                waited += OVERLOAD_WAIT * 2**attempt
            except RequestRejected as error:
                raise RequestRejected([Issue(("examples", index, "state"), error.message)]) from error
        raise AssertionError("unreachable")

    async def read(
        self, index: int, request: Any, names: list[str], hidden: bool
    ) -> tuple[list[list[float]], np.ndarray | None]:
        """The readout's distribution per question of `names` and, with `hidden`, the first question's
        hidden state; kept, or asked and kept."""
        # O(state) on a worker thread: a fit of large states never holds the loop, nor does a resumed
        # fit's kept readouts all at once.
        key = await asyncio.to_thread(_key, request, hidden)
        if key not in self.kept:
            answers, states = await self._asked(index, request, frozenset(names[:1]) if hidden else frozenset())
            distributions = [answer_probabilities(answers[name]) for name in names]
            self.kept[key] = (
                {"distributions": distributions, "hidden": _packed(states[names[0]])} if hidden else distributions
            )
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total)
        kept = self.kept[key]
        return (kept["distributions"], _unpacked(kept["hidden"])) if hidden else (kept, None)


def _worked_questions(task: TaskRequest, picked: list[list[int]], counts: range) -> dict:
    """Questions `w<count>`: the question with the first `count` of each label's `picked` examples (step 3)."""
    states = [example.state for example in task.examples]
    shown = {w: [[states[j] for j in chosen[:w]] for chosen in picked] for w in counts}
    return {f"w{w}": worked_question(task.question, examples) for w, examples in shown.items()}


async def _readouts(task: TaskRequest, indices: list[int], questions: dict, reader: _Reader, hidden: bool):
    """Per example of `indices`, its distributions for each of `questions` and, with `hidden`, the hidden
    state of its readout of the first (module doc, step 3)."""
    states = [example.state for example in task.examples]
    found: list[tuple[list[list[float]], np.ndarray | None]] = [([], None) for _ in indices]
    positions = iter(range(len(indices)))

    async def reading() -> None:
        for position in positions:  # shared by the readers: each takes the next example when it is free
            index = indices[position]
            request = question_request(task.question, states[index]).model_copy(update={"questions": questions})
            found[position] = await reader.read(index, request, list(questions), hidden)

    reader.total += len(indices)
    if reader.progress is not None:
        reader.progress(reader.done, reader.total)
    await asyncio.gather(*(reading() for _ in range(reader.concurrency)))
    return [distributions for distributions, _ in found], [state for _, state in found]


def _shown(task: TaskRequest, gold: list[int], settings: Settings) -> tuple[int, list[list[int]], list[int]]:
    """(W, the examples shown per label, the examples scored) of the worked readouts (module doc, step 3)."""
    states = [example.state for example in task.examples]
    most = min(settings.task_worked_examples, settings.max_examples_per_option)
    units = unit_ids([example.pair for example in task.examples])
    labels = len(label_names(task.question))
    return demonstrations(gold, units, labels, most, showable(states, settings.max_example_bytes), MIN_PER_LABEL)


async def check_worked(task: TaskRequest, gold: list[int], settings: Settings, check: Check) -> None:
    """The longest scored state asked with the worked questions, prepared through `check` (module doc,
    step 3); RequestRejected naming the state whose request is over the budget."""
    states = [example.state for example in task.examples]
    most, picked, scored = await asyncio.to_thread(_shown, task, gold, settings)
    if most == 0:
        return
    index = await asyncio.to_thread(max, scored, key=lambda each: text_bytes(states[each], settings.max_body_bytes))
    try:
        worked = _worked_questions(task, picked, range(1, most + 1))
        await check(question_request(task.question, states[index]).model_copy(update={"questions": worked}))
    except RequestRejected as error:
        message = (
            f"asked with up to {most} worked examples per label (OPENJEV_TASK_WORKED_EXAMPLES), "
            f"its request is over the token budget: {error.message}"
        )
        raise RequestRejected([Issue(("examples", index, "state"), message)]) from error


async def read_and_choose(
    task: TaskRequest, gold: list[int], folds: list[list[int]], settings: Settings, reader: _Reader, hidden: bool
) -> tuple[list[list[list[float]]], Decided, str | None]:
    """The readouts (module doc, step 3), what they decide (step 4, `deciding.decide`) and why no head
    was a candidate though the readouts carry hidden states, if none was."""
    groups = [example.pair for example in task.examples]
    plain = _worked_questions(task, [[] for _ in label_names(task.question)], range(1))
    readouts, states = await _readouts(task, list(range(len(gold))), plain, reader, hidden)
    most, picked, scored = await asyncio.to_thread(_shown, task, gold, settings)
    shown = None
    if most > 0 and await in_process(plain_accuracy, readouts, gold) < 1:
        worked, _ = await _readouts(task, scored, _worked_questions(task, picked, range(1, most + 1)), reader, False)
        readouts = [readouts[index] + more for index, more in zip(scored, worked, strict=True)]
        gold, groups, states = [gold[i] for i in scored], [groups[i] for i in scored], [states[i] for i in scored]
        shown = sum(map(len, picked))
        folds = cut(gold, unit_ids(groups), settings.task_folds)
    matrix = np.stack(states) if hidden else None
    left_out = head_fits(matrix.shape[1], len(readouts[0][0]), settings.task_max_bytes) if matrix is not None else None
    matrix = None if left_out else matrix
    decided = await in_process(decide, readouts, gold, groups, folds, settings.task_folds, matrix)
    if shown is not None:
        decided[0].update(examples_scored=len(gold), worked_examples_shown=shown)
    return readouts, decided, left_out


def _shown_with(task: TaskRequest, gold: list[int], per_label: int, most_bytes: int):
    """The task's question with the first `per_label` showable examples of each label in its criteria."""
    states = [example.state for example in task.examples]
    picked = pick(gold, range(len(gold)), len(label_names(task.question)), per_label, showable(states, most_bytes))
    return worked_question(task.question, [[states[j] for j in indices] for indices in picked])


def _gold(task: TaskRequest, labels: list[str]) -> list[int]:
    """Each example's label index, once they can be cross-validated (module doc, step 1)."""
    found = [label_index(task.question, example.label) for example in task.examples]
    gold = [index for index in found if index is not None]
    if len(gold) != len(found):
        raise ValueError("fit_task: every label must be the question's (check_task first)")
    issues = check_examples(gold, labels)
    if issues:
        raise RequestRejected(issues)
    return gold


async def fit_task(
    task: TaskRequest,
    settings: Settings,
    model: str,
    answer: Answer,
    *,
    concurrency: int = 1,
    kept: MutableMapping[str, Any] | None = None,
    progress: Progress | None = None,
    check: Check | None = None,
    hidden: bool = False,
) -> dict[str, Any]:
    """The task's document (module doc); `model`: the served model it is fitted for; `check`: the worked
    questions' budget checked before the first readout (module doc, step 3); `hidden`: the backend returns
    hidden states, so the plain readouts carry them and a head is a candidate."""
    labels = label_names(task.question)
    gold = _gold(task, labels)
    groups = [example.pair for example in task.examples]
    folds = cut(gold, unit_ids(groups), settings.task_folds)
    reader = _Reader(answer, concurrency, {} if kept is None else kept, progress)
    if check is not None:
        await check_worked(task, gold, settings, check)
    _, decided, left_out = await read_and_choose(task, gold, folds, settings, reader, hidden)
    _, chosen, _, fitted, head, _ = decided
    if at_cap(fitted):
        log.warning("a task's calibration ran its temperature to the cap: its readouts barely tell the labels apart")
    applied = fitted if chosen.calibrated else LabelCalibration.identity(len(labels))
    # Both walk every state: on a worker thread, as every step of a fit that is O(states) is.
    worked = await asyncio.to_thread(_shown_with, task, gold, chosen.worked, settings.max_example_bytes)
    examples = canonical_examples(task)
    return {
        "format": FORMAT,
        "id": await asyncio.to_thread(task_id, task.question, examples, model),
        "model": model,
        "created": time.time(),
        "labels": labels,
        "question": question_json(task.question),
        "worked_question": question_json(worked),
        "worked_examples_per_label": chosen.worked,
        "calibration": {"biases": list(applied.biases), "temperature": applied.temperature},
        "report": {
            "examples": len(gold),
            "label_counts": {label: gold.count(index) for index, label in enumerate(labels)},
            "folds": len(folds),
            **_decided_report(decided),
            "head_left_out": left_out if hidden else "the backend returns no hidden states",
        },
        "examples": examples,
        **({"head": head.to_json()} if head is not None else {}),
    }


def _decided_report(decided: Decided) -> dict[str, Any]:
    """What the report says of the decision (module doc, step 4)."""
    report, chosen, table, fitted, head, curve = decided
    return {
        "fitted_calibration": {
            "biases": list(fitted.biases),
            "temperature": fitted.temperature,
            "temperature_at_cap": at_cap(fitted),
        },
        "by_worked_examples": {str(w): row for w, row in table.items()},
        "nested": report,
        "chosen": {
            "worked_examples_per_label": chosen.worked,
            "calibration_adopted": chosen.calibrated,
            "head_adopted": head is not None,
            "answered": report["chosen"] if report["adopted"] else report["plain"],
        },
        "learning_curve": curve,
    }
