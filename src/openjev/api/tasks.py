"""`/v1/tasks`: recurring questions learned from labelled examples (`tasks/fitting.py`).

- `POST /v1/tasks` takes `{"question", "examples"}` (`tasks/schema.py`), read as the answering routes
  read theirs (`fast_path.py`: `parsing.parse_body`'s bounds, on a worker thread past
  `parsing.JSON_INLINE_BYTES`), checks it (422 naming the field: an unknown question type, a label
  that is not the question's, no examples, more than OPENJEV_TASK_MAX_EXAMPLES), refuses a body over
  OPENJEV_TASK_MAX_BYTES (413) and a new task once OPENJEV_TASK_MAX_TASKS are kept (409), and answers
  the task's document without its examples: 201 when it was fitted now, 200 when the same content
  (question, examples, served model) was fitted before under the answer settings in force (under
  others it is fitted again and replaces the first). Each example is asked through
  `evaluating.evaluate_request`, the path of every `/v1/systemone` request (the same admission, budgets
  and errors), with no task applied. The fit runs as a job (`api/task_fits.py`: `?background=true`
  answers 202 with it; progress, cancel, resume, identical fits shared).
- `GET /v1/tasks?limit=&after=` lists them a page at a time, in id order: `{"tasks": [summary, ...],
  "has_more", "first_id", "last_id"}`, a summary being the id, model, created, question type, labels,
  examples, the chosen worked-example count and held-out accuracy; the next page is `after=<last_id>`.
  A page holds `limit` tasks and at most OPENJEV_TASK_PAGE_BYTES of summaries' JSON (`within_bytes`),
  one task at least: a summary is within OPENJEV_TASK_MAX_BYTES, its labels being part of its file, so
  a page is never more than the larger of the two (a 255-label task of long names is ~145 KB).
  `GET /v1/tasks/{id}` gives one (its report with the learning curve: `tasks/learning_curve.py`);
  `DELETE /v1/tasks/{id}` removes it, its file and its readouts (204). An unknown id is a 404
  `not_found`, the id clipped.
- `POST /v1/tasks/{id}/examples` takes `{"examples": [...]}` and fits the task's question over its
  examples and those as a new task, as a job as `POST /v1/tasks` does, reading only what was not read
  (`tasks/growing.py`); an added example's issue is a 422 naming its place in the posted body.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.types import Receive

from openjev.api.dependencies import AUTHORIZED, RuntimeDep, ServiceDep
from openjev.api.errors import AUTH_RESPONSES, ERROR_RESPONSES, HttpError
from openjev.api.strict_json import StrictJSONRoute
from openjev.api.task_fits import answer_fit, full, readout_files, start_fit, too_large
from openjev.api.task_fits import router as fits_router
from openjev.endpoints import TASKS_MAX_PAGE, TASKS_PAGE, TASKS_PATH
from openjev.errors import RequestRejected, shown_id
from openjev.request.schema import ErrorResponse
from openjev.service import Runtime, Service
from openjev.tasks.growing import TaskExamples, grown, posted_issues
from openjev.tasks.schema import TaskRequest, canonical_examples, check_task
from openjev.tasks.store import Task, TaskStore, task_id

router = APIRouter(route_class=StrictJSONRoute)
router.include_router(fits_router)
NOT_FOUND = {404: {"model": ErrorResponse, "description": "No task with this id (`not_found`)."}}
FIT_RESPONSES = {
    201: {"description": "The task, fitted now (its document without the examples)."},
    200: {
        "description": "The same content was fitted before: that task, not fitted again.",
        "content": {"application/json": {"schema": {"type": "object"}}},
    },
    202: {
        "description": "Posted with `?background=true`: the fit's job (id, status, progress, events), "
        "followed at its `Location`.",
        "content": {"application/json": {"schema": {"type": "object"}}},
    },
    409: {"model": ErrorResponse, "description": "OPENJEV_TASK_MAX_TASKS tasks are kept already (`conflict`)."},
    413: {"model": ErrorResponse, "description": "The task is over OPENJEV_TASK_MAX_BYTES (`request_too_large`)."},
    **ERROR_RESPONSES,
}


def summary(task: Task) -> dict[str, Any]:
    report = task.public["report"]
    chosen = report.get("chosen")
    answered = chosen.get("answered") if isinstance(chosen, dict) else None
    return {
        "id": task.id,
        "model": task.model,
        "created": task.public["created"],
        "type": task.type,
        "labels": list(task.labels),
        "examples": report.get("examples"),
        "worked_examples_per_label": task.public["worked_examples_per_label"],
        "accuracy": answered.get("accuracy") if isinstance(answered, dict) else None,
    }


def within_bytes(tasks: list[Task], most: int) -> list[dict[str, Any]]:
    """The summaries of the first of `tasks` whose JSON takes at most `most` bytes in all (one at least)."""
    shown: list[dict[str, Any]] = []
    size = 0
    for task in tasks:
        row = summary(task)
        size += len(json.dumps(row, ensure_ascii=False).encode())
        if shown and size > most:
            break
        shown.append(row)
    return shown


def _known(store: TaskStore, identifier: str) -> Task:
    task = store.get(identifier)
    if task is None:
        raise HttpError(404, "not_found", f"no task {shown_id(identifier)} here")
    return task


async def fit_response(
    body: TaskRequest,
    size: int,
    receive: Receive,
    service: Service,
    runtime: Runtime,
    background: bool = False,
    grown_from: str | None = None,
) -> Response:
    """`POST /v1/tasks` for a valid body of `size` bytes (module doc); `grown_from`: the task whose
    readouts the fit starts from (`POST /v1/tasks/{id}/examples`)."""
    settings, store = service.settings, service.tasks
    if size > settings.task_max_bytes:
        raise too_large(size, settings.task_max_bytes)
    # Walks and hashes every state: a worker thread's (pure Python yields the GIL, so the loop goes on).
    issues = await asyncio.to_thread(check_task, body, settings)
    if issues:
        raise RequestRejected(issues)
    identifier = await asyncio.to_thread(task_id, body.question, canonical_examples(body), runtime.served_model_name)
    existing = store.get(identifier)
    if existing is not None and existing.answer_settings == service.answer_settings:
        return JSONResponse(existing.public, status_code=200)
    # Fits' kept readouts count with the tasks (`FitJobs.make_room`).
    room = store.max_tasks - len(store) - (0 if store.get(identifier) else 1)
    if room < 0 or not service.fit_jobs.make_room(room, identifier):
        raise full(store.max_tasks)
    if grown_from is not None:
        await asyncio.to_thread(readout_files(service).seed, grown_from, identifier)
    job = start_fit(body, identifier, service, runtime)
    return await answer_fit(job, receive, background, settings.retry_after)


@router.post(
    TASKS_PATH,
    status_code=201,
    responses=FIT_RESPONSES,
    dependencies=AUTHORIZED,
    summary="Learn a question from labelled states",
)
async def create_task(
    body: TaskRequest, request: Request, service: ServiceDep, runtime: RuntimeDep, background: bool = False
) -> Response:
    # Bodies that are JSON are answered by `fast_path.py`; this route answers only what that hands on.
    size = int(request.headers.get("content-length") or 0)
    return await fit_response(body, size, request.receive, service, runtime, background)


@router.get(TASKS_PATH, responses=AUTH_RESPONSES, dependencies=AUTHORIZED, summary="List the tasks, a page at a time")
async def list_tasks(
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=TASKS_MAX_PAGE, description="Tasks on this page.")] = TASKS_PAGE,
    after: Annotated[str | None, Query(max_length=256, description="The last id of the page before.")] = None,
) -> dict[str, Any]:
    tasks, more = service.tasks.page(limit, after)
    shown = within_bytes(tasks, service.settings.task_page_bytes)
    return {
        "tasks": shown,
        "has_more": more or len(shown) < len(tasks),
        "first_id": shown[0]["id"] if shown else None,
        "last_id": shown[-1]["id"] if shown else None,
    }


@router.get(
    TASKS_PATH + "/{task_id}", responses=AUTH_RESPONSES | NOT_FOUND, dependencies=AUTHORIZED, summary="One task"
)
async def get_task(task_id: str, service: ServiceDep) -> dict[str, Any]:
    return _known(service.tasks, task_id).public


@router.delete(
    TASKS_PATH + "/{task_id}",
    status_code=204,
    responses=AUTH_RESPONSES | NOT_FOUND,
    dependencies=AUTHORIZED,
    summary="Remove a task",
)
async def delete_task(task_id: str, service: ServiceDep) -> Response:
    _known(service.tasks, task_id)
    service.tasks.delete(task_id)
    readout_files(service).remove(task_id)
    return Response(status_code=204)


@router.post(
    TASKS_PATH + "/{task_id}/examples",
    status_code=201,
    responses=FIT_RESPONSES | NOT_FOUND,
    dependencies=AUTHORIZED,
    summary="Add labelled examples to a task and fit it again",
)
async def add_examples(
    task_id: str,
    body: TaskExamples,
    request: Request,
    service: ServiceDep,
    runtime: RuntimeDep,
    background: bool = False,
) -> Response:
    """The task's question fitted over its examples and `body`'s as a new task (module doc)."""
    task = _known(service.tasks, task_id)
    try:
        examples = await asyncio.to_thread(service.tasks.examples_of, task_id)
    except (OSError, ValueError) as error:
        raise HttpError(404, "not_found", f"task {shown_id(task_id)} can no longer be read: {error}") from None
    whole = grown(task.public["question"], examples, body)
    issues = check_task(whole, service.settings)
    if issues:
        raise RequestRejected(posted_issues(issues, len(examples)))
    size = len(whole.model_dump_json().encode())
    return await fit_response(whole, size, request.receive, service, runtime, background, grown_from=task_id)
