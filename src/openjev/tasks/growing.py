"""Tasks that grow: labelled examples added to a task's, fitted again with the readouts it read kept.

`POST /v1/tasks/{id}/examples` takes `{"examples": [...]}` (`TaskExamples`, as `POST /v1/tasks` takes
them) and fits the task's question over its examples and the new ones as a new task (`grown`: its id
is that content's, so the task it grew from stays and serves as before). A new example's issue names
its place in the posted body (`examples.2.label`), not in the grown list (`posted_issues`).

A fit that ends in a task keeps its readouts beside it (`ReadoutFiles`: `<tasks dir>/readouts/<id>.jsonl`,
as `jobs.KeptReadouts` writes them; removed with its task). The grown fit starts from a copy of the
readouts of the task it grew from (`seed`), so each example's plain readout (and hidden state) that
was read is read again only if the answer settings changed since (`jobs.KeptReadouts`); the new
examples are read, and the worked-example readouts whose shown examples changed. One file per task
kept: at most OPENJEV_TASK_MAX_TASKS, each the readouts of at most OPENJEV_TASK_MAX_EXAMPLES examples.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from openjev.errors import Issue
from openjev.tasks.schema import LabelledState, TaskRequest


class TaskExamples(BaseModel):
    model_config = ConfigDict(extra="forbid")

    examples: list[LabelledState] = Field(
        ..., min_length=1, description="Labelled states to add to the task's, as `POST /v1/tasks` takes them."
    )


def grown(question: dict[str, Any], examples: list[dict[str, Any]], added: TaskExamples) -> TaskRequest:
    """The task's question over its examples (as its file keeps them) and the added ones, in that order."""
    kept = [LabelledState.model_validate(example) for example in examples]
    return TaskRequest.model_validate({"question": question, "examples": [*kept, *added.examples]})


def posted_issues(issues: list[Issue], before: int) -> list[Issue]:
    """The issues of a grown task as the posted body names them: `examples.<i>` of an added example
    counted from the first added; an issue of the whole list stays `examples`."""
    found = []
    for issue in issues:
        loc = issue.loc
        if len(loc) > 1 and loc[0] == "examples" and isinstance(loc[1], int) and loc[1] >= before:
            loc = ("examples", loc[1] - before, *loc[2:])
        found.append(Issue(loc, issue.msg, issue.type, issue.ctx))
    return found


class ReadoutFiles:
    """The readouts each kept task's fit read (module doc)."""

    def __init__(self, tasks_dir: Path, fits_dir: Path) -> None:
        self.directory = tasks_dir / "readouts"
        self.fits_dir = fits_dir

    def path(self, task_id: str) -> Path:
        return self.directory / f"{task_id}.jsonl"

    def keep(self, fit_file: Path, task_id: str) -> None:
        """The fit's readout file kept as the task's (moved, never copied)."""
        if fit_file.is_file():
            self.directory.mkdir(parents=True, exist_ok=True)
            os.replace(fit_file, self.path(task_id))

    def seed(self, task_id: str, fit_id: str) -> None:
        """The fit `fit_id` starts from the readouts of `task_id`, unless it has readouts of its own."""
        source, target = self.path(task_id), self.fits_dir / f"{fit_id}.jsonl"
        if source.is_file() and not target.exists():
            self.fits_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)

    def remove(self, task_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path(task_id).unlink()
