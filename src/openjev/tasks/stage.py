"""The tasks stage of answering: a task rewrites its question before prompting and calibrates its answer after readout.

The engine applies it to every request (`Engine.prepare`, `Engine.evaluate`), so every answering
route gets it and none knows of it. `TaskStage.apply` asks each question naming a task in `x_task`
(or, with OPENJEV_TASK_MATCH_QUESTIONS, equal to a task's posted question: `TaskStore.matching`, by
its hash) as the task's `worked_question`, and gives the function that rebuilds its answer from the
task's calibrated distribution. A task serves only what it was fitted for: a question naming one is a
422 naming `x_task` when the task is unknown, when the question is a box or of another type than the
task's (a choice with options `true`/`false` is no noul question), when it was fitted for another
model or under other answer settings (`answering/answer_settings.py`: its calibration describes other
readouts), or when the question's labels differ from the task's. Matching skips such tasks.

A task with a head (`head.RidgeHead`) has its question's readout carry the hidden state at the answer
position (`PreparedRequest.hidden`) and answers with the head's probabilities on it. Where the backend
returns no hidden states (an SGLang started without `--return-hidden-states-mode last`), or none from
the layer the head reads, a question using it, named or matched, is a 422 naming `x_task` and the fix:
it is never answered without its head.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from openjev.answering.answers import PROBABILITY_FLOOR
from openjev.answering.evaluation import Rewrites
from openjev.backends.base import HiddenStates, HiddenStatesUnavailable
from openjev.errors import Issue, RequestRejected, shown_id
from openjev.options import ConfidenceMode
from openjev.request.schema import BoxQuestion, SystemOneRequest
from openjev.tasks.calibration import LabelCalibration, answer_probabilities, calibrated_answer, rebuilt_answer
from openjev.tasks.head import HeadError, RidgeHead
from openjev.tasks.schema import label_names
from openjev.tasks.store import Task, TaskStore


def settings_differences(fitted: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    """The answer settings that differ, each as fitted and as here."""
    keys = sorted(set(fitted) | set(current), key=str)
    return ", ".join(
        f"{key} {fitted.get(key)!r} (here {current.get(key)!r})" for key in keys if fitted.get(key) != current.get(key)
    )


def _calibrated(
    answer: dict[str, Any], hidden: np.ndarray | None, calibration: LabelCalibration, mode: ConfidenceMode
) -> dict[str, Any]:
    return calibrated_answer(answer, calibration, mode)


def _logs(probabilities: list[float]) -> list[float]:
    return [math.log(max(p, PROBABILITY_FLOOR)) for p in probabilities]


def headed_answer(
    answer: dict[str, Any], hidden: np.ndarray | None, head: RidgeHead, mode: ConfidenceMode
) -> dict[str, Any]:
    """The answer rebuilt from the head's probabilities on its readout's hidden state and label log-probabilities."""
    if hidden is None:
        raise HiddenStatesUnavailable("the readout of a question using a task's head carried no hidden state")
    try:
        probabilities = head.probabilities(np.asarray(hidden, np.float64), _logs(answer_probabilities(answer)))
    except HeadError as error:
        raise HiddenStatesUnavailable(f"the task's head cannot read this backend's hidden state: {error}") from None
    return rebuilt_answer(answer, _logs(probabilities), mode)


@dataclass(frozen=True, slots=True)
class TaskStage:
    store: TaskStore
    #: The served model, and the answer settings in force: a task serves only what it was fitted under.
    model: str
    answer_settings: dict[str, Any]
    match: bool
    confidence: ConfidenceMode
    #: Whether the backend's readouts carry hidden states now (`Backend.hidden_states`).
    hidden_states: Callable[[], HiddenStates] = lambda: HiddenStates(False)

    def refusal(self, task: Task, question: Any) -> str | None:
        """Why `question` cannot use `task` (module doc), or None."""
        if question.type != task.type:
            return f"task {task.id} is a {task.type} task; this question is a {question.type} question"
        if task.model != self.model:
            model = f"model {task.model!r}, not {self.model!r}"
            return f"task {task.id} was fitted for {model}; post it again to fit it here"
        if task.answer_settings != self.answer_settings:
            differences = settings_differences(task.answer_settings, self.answer_settings)
            return f"task {task.id} was fitted under other answer settings: {differences}; post it again to fit it here"
        if tuple(label_names(question)) != task.labels:
            return f"the question's labels differ from task {task.id}'s: {', '.join(task.labels)}"
        return self.head_refusal(task)

    def head_refusal(self, task: Task) -> str | None:
        """Why the backend cannot serve the task's head (module doc), or None."""
        if task.head is None:
            return None
        support = self.hidden_states()
        if not support.available:
            return f"task {task.id} answers with a head on the hidden state, not returned here: {support.enable}"
        if support.layer != task.head.layer:
            return (
                f"task {task.id}'s head reads the {task.head.layer} layer; this backend returns the {support.layer} one"
            )
        return None

    def task_of(self, question: Any) -> Task | str | None:
        """The task the question uses, why it cannot use the one it names, or None."""
        if question.x_task is None:
            found = None
            if self.match and not isinstance(question, BoxQuestion):
                found = self.store.matching(question, self.model, self.answer_settings)
            return (self.head_refusal(found) or found) if found is not None else None
        if isinstance(question, BoxQuestion):
            return "a box question cannot use a task"
        task = self.store.get(question.x_task)
        if task is None:
            return f"no task {shown_id(question.x_task)} here; POST /v1/tasks creates one"
        return self.refusal(task, question) or task

    def added_bytes(self, request: SystemOneRequest) -> int:
        """About the bytes of text the tasks add to the request's preparation (their worked questions)."""
        tasks = [self.task_of(question) for question in request.questions.values()]
        return sum(task.worked_bytes for task in tasks if isinstance(task, Task))

    def apply(self, request: SystemOneRequest) -> tuple[SystemOneRequest, Rewrites, frozenset[str]]:
        """The request with every question that uses a task asked as the task asks it, each such
        question's answer rebuilder, and the questions a head reads the hidden state of; RequestRejected
        names each bad `x_task`."""
        questions, rewrites, issues, headed = dict(request.questions), {}, [], set()
        for question_id, question in request.questions.items():
            task = self.task_of(question)
            if isinstance(task, str):
                issues.append(Issue(("questions", question_id, "x_task"), task))
            elif task is not None:
                questions[question_id] = task.worked
                if task.head is not None:
                    headed.add(question_id)
                    rewrites[question_id] = partial(headed_answer, head=task.head, mode=self.confidence)
                else:
                    rewrites[question_id] = partial(_calibrated, calibration=task.calibration, mode=self.confidence)
        if issues:
            raise RequestRejected(issues)
        if not rewrites:
            return request, {}, frozenset()
        return request.model_copy(update={"questions": questions}), rewrites, frozenset(headed)
