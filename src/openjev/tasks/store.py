"""Tasks as files (`document.py`), indexed in memory, bounded.

`TaskStore` keeps one file per task, `<id>.json`, in OPENJEV_TASKS_DIR (default
OPENJEV_CACHE_DIR/tasks), written atomically (a temporary file renamed over it). At start it reads
the files named `task_*.json`, at most OPENJEV_TASK_MAX_TASKS of them (in name order), each checked
whole (`document.read_task`): an entry that is not a regular file (a FIFO, a socket, a directory), a
file that is too large, not a task, or whose id is not its name is skipped with a warning, and never
stops the others (nor hangs them: a FIFO is never waited on). The directory is read only then: a deleted task's
file that reappears while the server runs is not served.

In memory a task is what serving needs (its worked question, calibration or head, settings) and what the
API shows (its document without the examples, and of its head what it is, not its numbers). Two
indexes: ids in order (`page`, a cursor past an id, which survives that id's deletion) and each posted
question's canonical hash (`matching`), so neither a listing nor a match walks every task.

The task's id is a hash of the canonical content (the question, the examples and the model), so the
same content is the same task; posted again under other answer settings, it is fitted again and
replaces the first.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import logging
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openjev.answering.answer_settings import as_stamped_now
from openjev.tasks.calibration import LabelCalibration
from openjev.tasks.document import FORMAT as FORMAT
from openjev.tasks.document import TaskFile, checked, encoded, question_key, read_task
from openjev.tasks.head import RidgeHead
from openjev.tasks.schema import TaskQuestion

log = logging.getLogger("openjev")
#: What the API shows of a task's head: what it is, not its arrays.
HEAD_SHOWN = ("kind", "layer", "hidden_size", "strength", "temperature")


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
    #: The document as the API shows it: every key but the examples.
    public: dict[str, Any]
    worked: TaskQuestion
    calibration: LabelCalibration
    #: The question's type and labels, and the answer settings it was fitted under.
    type: str
    labels: tuple[str, ...]
    answer_settings: dict[str, Any]
    #: The posted question's canonical hash (`document.question_key`).
    key: str
    #: Bytes of the worked question's JSON: what using the task adds to a request's preparation.
    worked_bytes: int
    #: The head it answers with on its readout's hidden state, or None (`head.RidgeHead`).
    head: RidgeHead | None = None

    @property
    def id(self) -> str:
        return str(self.public["id"])

    @property
    def model(self) -> str:
        return str(self.public["model"])

    @classmethod
    def of(cls, document: dict[str, Any], file: TaskFile) -> Task:
        public = {key: value for key, value in document.items() if key != "examples"}
        if file.head is not None:  # its numbers stay in its file: the API shows what it is
            public["head"] = {key: file.head[key] for key in HEAD_SHOWN}
        worked = len(canonical(document["worked_question"]).encode())
        settings = as_stamped_now(file.answer_settings)
        labels = tuple(file.labels)
        return cls(
            public, file.worked_question, file.label_calibration(), file.question.type, labels, settings,
            question_key(document["question"]), worked, file.ridge_head(),
        )  # fmt: skip

    @classmethod
    def parse(cls, document: Any) -> Task:
        """A task from its JSON document, checked whole (`document.checked`); ValueError says what is wrong."""
        return cls.of(document, checked(document))


class StoreFull(Exception):
    """OPENJEV_TASK_MAX_TASKS tasks are kept already."""


class TaskTooLarge(Exception):
    """The task's file would be over OPENJEV_TASK_MAX_BYTES."""


class TaskStore:
    def __init__(self, directory: Path, max_tasks: int, max_bytes: int) -> None:
        self.directory = directory
        self.max_tasks = max_tasks
        self.max_bytes = max_bytes
        self._tasks: dict[str, Task] = {}
        self._ids: list[str] = []
        #: A task is kept on a worker thread (`api/tasks.py`): the indexes change under this lock.
        self._lock = threading.Lock()
        #: One `put` at a time, from its room check to its index: two fits ending together each saw room
        #: for one more task, and both were kept.
        self._put_lock = threading.Lock()
        #: Posted question's hash -> the tasks asking it, oldest first.
        self._by_question: dict[str, list[Task]] = {}
        names = (
            sorted(path.name for path in os.scandir(directory) if path.name.startswith("task_"))
            if (directory.is_dir())
            else []
        )
        for read, name in enumerate(names):
            if len(self._tasks) == self.max_tasks:
                log.warning("%d task files past OPENJEV_TASK_MAX_TASKS=%d not read", len(names) - read, max_tasks)
                break
            self._load(directory / name)

    def _load(self, path: Path) -> None:
        if path.suffix != ".json":
            return
        try:
            task = Task.of(*read_task(path, self.max_bytes))
        except (OSError, ValueError) as error:
            log.warning("task file %s skipped: %s", path, str(error)[:2000])
            return
        self._index(task)

    def _index(self, task: Task) -> None:
        with self._lock:
            self._index_unlocked(task)

    def _index_unlocked(self, task: Task) -> None:
        if task.id not in self._tasks:
            bisect.insort(self._ids, task.id)
        else:
            self._unindex(task.id)
        self._tasks[task.id] = task
        same = [*self._by_question.get(task.key, []), task]
        self._by_question[task.key] = sorted(same, key=lambda each: each.public["created"])

    def _unindex(self, task_id: str) -> Task | None:
        task = self._tasks.pop(task_id, None)
        if task is not None:
            same = [each for each in self._by_question.get(task.key, []) if each.id != task_id]
            if same:
                self._by_question[task.key] = same
            else:
                self._by_question.pop(task.key, None)
        return task

    def __len__(self) -> int:
        return len(self._tasks)

    def get(self, task_id: str) -> Task | None:
        return self._tasks.get(task_id)

    def room_for(self, task_id: str) -> bool:
        """Whether the task (new, or one kept already) may be kept."""
        return task_id in self._tasks or len(self._tasks) < self.max_tasks

    def ids_sha256(self) -> str:
        """A digest of the ids kept: it changes whenever a task is kept or deleted."""
        return hashlib.sha256("\n".join(self._ids).encode()).hexdigest()

    def page(self, limit: int, after: str | None = None) -> tuple[list[Task], bool]:
        """Up to `limit` tasks in id order, past `after` (which need not exist any more), and whether more follow."""
        start = 0 if after is None else bisect.bisect_right(self._ids, after)
        ids = self._ids[start : start + limit]
        return [self._tasks[identifier] for identifier in ids], start + limit < len(self._ids)

    def put(self, document: dict[str, Any]) -> Task:
        """Keep a checked task document: StoreFull past OPENJEV_TASK_MAX_TASKS, TaskTooLarge past its bytes."""
        task = Task.parse(document)
        data = encoded(document)
        if len(data) > self.max_bytes:
            raise TaskTooLarge(len(data))
        with self._put_lock:
            if not self.room_for(task.id):
                raise StoreFull
            self._write(task, data)
            self._index(task)
        return task

    def _write(self, task: Task, data: bytes) -> None:
        """The task's file, replaced whole (a reader never sees half of it)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".task-", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
            os.replace(temporary, self.directory / f"{task.id}.json")
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def examples_of(self, task_id: str) -> list[dict[str, Any]]:
        """The kept task's examples, read from its file (the API's view leaves them out); ValueError or
        OSError where the file cannot be read."""
        document, _ = read_task(self.directory / f"{task_id}.json", self.max_bytes)
        return list(document["examples"])

    def delete(self, task_id: str) -> bool:
        """Remove the task and its file (ids are their files' names: `document.read_task`)."""
        with self._lock:
            if self._unindex(task_id) is None:
                return False
            self._ids.remove(task_id)
        (self.directory / f"{task_id}.json").unlink(missing_ok=True)
        return True

    def matching(self, question: TaskQuestion, model: str, answer_settings: dict[str, Any]) -> Task | None:
        """The newest task fitted for `model` under `answer_settings` whose posted question equals
        `question` (x_task aside), found by the question's hash."""
        same = self._by_question.get(question_key(question_json(question)), [])
        found = [task for task in same if task.model == model and task.answer_settings == answer_settings]
        return found[-1] if found else None
