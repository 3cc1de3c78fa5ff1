"""The settings of tasks (`POST /v1/tasks`), a part of `config.Settings`, which inherits them; read,
documented and mirrored by CLI flags exactly as every other `OPENJEV_*` setting.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings


class TaskSettings(BaseSettings):
    tasks_dir: Path | None = Field(
        None, description="Where tasks are kept, one JSON file each; default: OPENJEV_CACHE_DIR/tasks."
    )
    task_max_examples: int = Field(1000, ge=1, description="The most labelled examples one task may bring.")
    task_max_tasks: int = Field(1000, ge=1, description="The most tasks kept; a new one past it is a 409.")
    task_max_bytes: int = Field(
        1024 * 1024, ge=1024, description="The most bytes of one task: its body (413 past it) and its stored file."
    )
    task_page_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="The most bytes of JSON a page of GET /v1/tasks lists (at least one task whatever its size).",
    )
    task_folds: int = Field(
        5, ge=2, description="Folds of a task's cross-validation (fewer when it has fewer examples or pairs)."
    )
    task_worked_examples: int = Field(
        2, ge=0, le=8, description="The most worked examples per label a task tries showing in the criteria."
    )
    task_max_fits: int = Field(
        4,
        ge=1,
        description="Fits running at once; one more posted is a 529 with Retry-After (an identical one shares its "
        "job).",
    )
    task_fit_readouts: int = Field(
        1,
        ge=1,
        description="Readouts every fit together asks at once, in slots of their own: a fit never takes a caller's "
        "preparation or evaluation slot.",
    )
    task_match_questions: bool = Field(
        False, description="A question equal to a task's question uses that task without naming it in x_task."
    )
