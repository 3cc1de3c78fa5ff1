"""Tasks as files, and their use by requests.

A task is one JSON document (`FORMAT`), the same whatever the backend (SGLang or embedded): what was
posted (`question`, `examples`), the served model it was fitted for (`model`), the question as it is
asked (`worked_question`: the question with its chosen worked examples in the criteria,
`examples.py`), its `calibration` (per-label `biases` and `temperature`,
`calibration.py`) and the fit's `report`. Its id is a hash of the canonical content (the
question, the examples and the model), so the same content is the same task.

`TaskStore` keeps one file per task, `<id>.json`, in OPENJEV_TASKS_DIR (default
OPENJEV_CACHE_DIR/tasks), written atomically (a temporary file renamed over it) and read back at
start, so a restart keeps them. A file that does not parse as a task is skipped with a warning.

`use_tasks` rewrites a request's questions: a question naming a task in `x_task` (or, with
OPENJEV_TASK_MATCH_QUESTIONS, equal to a task's question) is asked as the task's `worked_question`,
and its answer is calibrated (`calibrated`). A task fitted for another model is refused (a 422
naming `x_task`: its calibration describes another model's readouts); matching skips it. An unknown
task, a box question, or a question whose labels differ from the task's is a 422 naming `x_task`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from openjev.config import ConfidenceMode
from openjev.errors import Issue, RequestRejected
from openjev.request.schema import BoxQuestion, SystemOneRequest
from openjev.tasks.calibration import LabelCalibration, calibrated_answer
from openjev.tasks.schema import TaskQuestion, label_names

log = logging.getLogger("openjev")
FORMAT = "openjev-task/1"
_QUESTION = TypeAdapter(TaskQuestion)


def canonical(value: Any) -> str:
    """JSON with no spaces and non-ASCII kept; key order as given (a choice's option order is its label order)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def question_json(question: TaskQuestion) -> dict[str, Any]:
    return question.model_dump(mode="json", exclude={"x_task"})


def task_id(question: TaskQuestion, examples: list[dict[str, Any]], model: str) -> str:
    content = canonical({"question": question_json(question), "examples": examples, "model": model})
    return "task_" + hashlib.sha256(content.encode()).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class Task:
    document: dict[str, Any]
    worked: TaskQuestion
    calibration: LabelCalibration

    @property
    def id(self) -> str:
        return str(self.document["id"])

    @property
    def model(self) -> str:
        return str(self.document["model"])

    @property
    def labels(self) -> list[str]:
        return list(self.document["labels"])

    def match_key(self) -> str:
        return canonical(self.document["question"])

    @classmethod
    def parse(cls, document: Any) -> Task:
        """A task from its JSON document; ValueError says what is wrong."""
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ValueError(f'expected a JSON object with "format": "{FORMAT}"')
        try:
            worked = _QUESTION.validate_python(document["worked_question"])
            _QUESTION.validate_python(document["question"])
            biases = [float(b) for b in document["calibration"]["biases"]]
            temperature = float(document["calibration"]["temperature"])
            labels = document["labels"]
            str(document["id"]), str(document["model"])
        except (KeyError, TypeError, ValidationError) as error:
            raise ValueError(f"not a task document: {error}") from None
        if len(biases) != len(labels) or labels != label_names(worked) or not temperature > 0:
            raise ValueError("its calibration does not fit its question's labels")
        return cls(document, worked, LabelCalibration(tuple(biases), temperature))


class TaskStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._tasks: dict[str, Task] = {}
        for path in sorted(directory.glob("task_*.json")) if directory.is_dir() else []:
            try:
                task = Task.parse(json.loads(path.read_text()))
            except (OSError, ValueError) as error:
                log.warning("task file %s skipped: %s", path, error)
                continue
            self._tasks[task.id] = task

    def get(self, task_id: str) -> Task | None:
        return self._tasks.get(task_id)

    def all(self) -> list[Task]:
        return sorted(self._tasks.values(), key=lambda task: task.document["created"])

    def put(self, task: Task) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".task-", suffix=".tmp")
        try:
            with os.fdopen(handle, "w") as file:
                json.dump(task.document, file, ensure_ascii=False, indent=1)
            os.replace(temporary, self.directory / f"{task.id}.json")
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        self._tasks[task.id] = task

    def delete(self, task_id: str) -> bool:
        if self._tasks.pop(task_id, None) is None:
            return False
        (self.directory / f"{task_id}.json").unlink(missing_ok=True)
        return True

    def matching(self, question: TaskQuestion, model: str) -> Task | None:
        """The newest task for `model` whose posted question equals `question` (x_task aside)."""
        key = canonical(question_json(question))
        found = [task for task in self.all() if task.model == model and task.match_key() == key]
        return found[-1] if found else None


def _named_task(store: TaskStore, question: Any, model: str) -> Task | str:
    """The task a question names in x_task, or why it cannot use it."""
    task = store.get(question.x_task)
    if task is None:
        return f"no task {question.x_task!r} here; POST /v1/tasks creates one"
    if isinstance(question, BoxQuestion):
        return "a box question cannot use a task"
    if task.model != model:
        return f"task {task.id} was fitted for model {task.model!r}, not {model!r}; post it again to fit it here"
    if label_names(question) != task.labels:
        return f"the question's labels differ from task {task.id}'s: {', '.join(task.labels)}"
    return task


def use_tasks(
    request: SystemOneRequest, store: TaskStore, model: str, match: bool
) -> tuple[SystemOneRequest, dict[str, LabelCalibration]]:
    """The request with every question that uses a task asked as the task asks it, and those tasks'
    calibrations by question id (module doc); RequestRejected names each bad `x_task`."""
    questions, calibrations, issues = dict(request.questions), {}, []
    for question_id, question in request.questions.items():
        task: Task | str | None = None
        if question.x_task is not None:
            task = _named_task(store, question, model)
        elif match and not isinstance(question, BoxQuestion):
            task = store.matching(question, model)
        if isinstance(task, str):
            issues.append(Issue(("questions", question_id, "x_task"), task))
        elif task is not None:
            questions[question_id] = task.worked
            calibrations[question_id] = task.calibration
    if issues:
        raise RequestRejected(issues)
    if not calibrations:
        return request, {}
    return request.model_copy(update={"questions": questions}), calibrations


def calibrated(
    answers: dict[str, dict[str, Any]], calibrations: dict[str, LabelCalibration], mode: ConfidenceMode
) -> dict[str, dict[str, Any]]:
    """The answers with each task question's answer rebuilt from its calibrated distribution."""
    return {
        question_id: calibrated_answer(answer, calibrations[question_id], mode)
        if question_id in calibrations
        else answer
        for question_id, answer in answers.items()
    }
