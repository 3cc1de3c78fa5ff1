"""A task's file: its format as a pydantic model (`TaskFile`), read within bounds (`read_task`).

A task is one JSON document, the same whatever the backend: what was posted (`question`,
`examples`), the served model it was fitted for (`model`) and the answer settings it was fitted under
(`answer_settings`, `answering/answer_settings.py`), the question as it is asked (`worked_question`),
its `calibration` (per-label `biases`, finite and within ±MAX_BIAS, and a `temperature` within
[MIN_TEMPERATURE, calibration.MAX_TEMPERATURE]), its `head` where it answers with one (`head.RidgeHead`:
at most `head.MAX_VALUES` numbers, every one finite, its shapes its labels', the layer it reads; it
reads the plain question's readout, so no worked examples beside it) and the fit's `report`. Keys the format does not
name are kept as they are. A document is checked whole before it serves, at fit and at load: its
labels are its questions' (both of one type), one bias per label, the id its file's name.

A task's file is written compact (`encoded`): about the bytes of the document, whatever its values'
nesting. `read_task` reads a regular file of at most OPENJEV_TASK_MAX_BYTES (opened without blocking, its kind
and size looked at before a byte is read: a FIFO, socket, directory or device is refused), parsed by
orjson (whose nesting limit ends any recursion) and walked without recursion to refuse a value nested
deeper than MAX_DEPTH, then validated: ValueError says what is wrong.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StringConstraints, model_validator

from openjev.request.schema import FreeForm
from openjev.tasks.calibration import MAX_TEMPERATURE, LabelCalibration
from openjev.tasks.head import RidgeHead
from openjev.tasks.schema import TaskQuestion, label_names

FORMAT = "openjev-task/1"
ID_PATTERN = r"^task_[0-9a-f]{24}$"
#: A bias past this many nats of logit (b / T) outweighs any readout (its floor is far above): a file with
#: one is broken. The bound is on b / T, the shift the answer sees, since a fitted T up to MAX_TEMPERATURE
#: scales b with it.
MAX_BIAS = 100.0
MIN_TEMPERATURE = 1e-3
#: Nesting of a task file: a request's own limit (`request/validation.py`) and the document's few levels.
MAX_DEPTH = 264

Finite = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Temperature = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=MIN_TEMPERATURE, le=MAX_TEMPERATURE)]


class CalibrationFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    biases: list[Finite] = Field(..., min_length=2, max_length=256)
    temperature: Temperature

    @model_validator(mode="after")
    def _bounded_shift(self) -> CalibrationFile:
        if any(abs(bias / self.temperature) > MAX_BIAS for bias in self.biases):
            raise ValueError(f"a bias over its temperature is past {MAX_BIAS:g} nats")
        return self


class ExampleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: FreeForm
    label: str
    pair: str | None = None


class TaskFile(BaseModel):
    model_config = ConfigDict(extra="allow")

    format: Literal["openjev-task/1"]
    id: Annotated[str, StringConstraints(pattern=ID_PATTERN)]
    model: Annotated[str, StringConstraints(min_length=1, max_length=1024)]
    created: Annotated[Finite, Field(ge=0)]
    answer_settings: dict[str, str | int | float | bool | None]
    labels: list[str]
    question: TaskQuestion
    worked_question: TaskQuestion
    worked_examples_per_label: Annotated[int, Field(strict=True, ge=0, le=8)]
    calibration: CalibrationFile
    report: dict[str, Any]
    examples: list[ExampleFile] = Field(..., min_length=1)
    head: dict[str, Any] | None = None
    _head: RidgeHead | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _consistent(self) -> TaskFile:
        if self.question.type != self.worked_question.type:
            raise ValueError("its worked question is not of its question's type")
        if self.labels != label_names(self.question) or self.labels != label_names(self.worked_question):
            raise ValueError("its labels are not its questions'")
        if len(self.calibration.biases) != len(self.labels):
            raise ValueError(f"{len(self.calibration.biases)} biases for {len(self.labels)} labels")
        if self.head is not None:
            if self.worked_examples_per_label != 0:
                raise ValueError("its head reads the plain question's readout, yet it shows worked examples")
            self._head = RidgeHead.from_json(self.head, len(self.labels))
        return self

    def ridge_head(self) -> RidgeHead | None:
        """The head it answers with, checked (module doc), or None."""
        return self._head

    def label_calibration(self) -> LabelCalibration:
        return LabelCalibration(tuple(self.calibration.biases), self.calibration.temperature)


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether `value` nests lists and objects deeper than `limit`, walked without recursion."""
    pending = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth >= limit:
                return True
            pending.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def checked(document: Any) -> TaskFile:
    """`document` (a JSON value) as a task file; ValueError says what is wrong."""
    if too_deep(document):
        raise ValueError(f"it nests deeper than {MAX_DEPTH} levels")
    return TaskFile.model_validate(document)


def read_task(path: Path, max_bytes: int) -> tuple[dict[str, Any], TaskFile]:
    """The file's JSON and the task it holds, within `max_bytes` (module doc); ValueError or OSError."""
    # Opened without blocking and looked at once open: a FIFO named like a task file hung start-up
    # (an open for reading waits for a writer), and a directory or device is no task either.
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise ValueError("not a regular file")
        if status.st_size > max_bytes:
            raise ValueError(f"{status.st_size} bytes, over OPENJEV_TASK_MAX_BYTES={max_bytes}")
        with open(descriptor, "rb", closefd=False) as file:
            data = file.read(max_bytes + 1)
    finally:
        os.close(descriptor)
    if len(data) > max_bytes:
        raise ValueError(f"over OPENJEV_TASK_MAX_BYTES={max_bytes} bytes")
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise ValueError(f"not JSON: {error}") from None
    task = checked(document)
    if path.name != f"{task.id}.json":
        raise ValueError(f"it holds task {task.id}, not the one its name says")
    return document, task


def encoded(document: dict[str, Any]) -> bytes:
    """A task document as its file holds it: compact JSON, by the C encoder, so a file is about the size
    of what was posted and fitted. Indented, a value nested d deep took about d^2 / 2 bytes of
    indentation where it was sent as 2d: 16 states of 50-deep lists, a 0.5 MB fit, were a 14.8 MB
    document, refused (413) after all their readouts, and pure-Python encoding held the GIL for its
    time."""
    return json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def question_key(question: dict[str, Any]) -> str:
    """A question's canonical hash (its JSON, x_task aside, no spaces, key order as given), which matching indexes."""
    content = json.dumps(question, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(content.encode()).hexdigest()
