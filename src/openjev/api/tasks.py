"""`/v1/tasks`: recurring questions learned from labelled examples (`tasks/fitting.py`).

- `POST /v1/tasks` takes `{"question", "examples"}` (`tasks/schema.py`), checks it (422 naming
  the field: an unknown question type, a label that is not the question's, no examples, too many),
  and answers the task's document without its examples: 201 when it was fitted now, 200 when the same
  content (question, examples, served model) was fitted before. The fit runs as a job
  (`api/task_fits.py`: `?background=true` answers 202 with it; progress, cancel, resume, identical
  fits shared), each example asked through `routes.evaluate_request` (the same admission, budgets
  and errors) with no task applied.
- `GET /v1/tasks` lists them (id, model, question type, labels, examples, the chosen worked-example
  count, held-out accuracy); `GET /v1/tasks/{id}` gives one; `DELETE /v1/tasks/{id}` removes it
  (204). An unknown id is a 404 `not_found`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from openjev.api.errors import AUTH_RESPONSES, ERROR_RESPONSES, HttpError
from openjev.api.routes import AUTHORIZED, RuntimeDep, ServiceDep
from openjev.api.strict_json import StrictJSONRoute
from openjev.api.task_fits import answer_fit, public_document, start_fit
from openjev.api.task_fits import router as fits_router
from openjev.errors import RequestRejected
from openjev.request.schema import ErrorResponse
from openjev.tasks.schema import TaskRequest, canonical_examples, check_task
from openjev.tasks.store import Task, TaskStore, task_id

TASKS_PATH = "/v1/tasks"
router = APIRouter(route_class=StrictJSONRoute)
router.include_router(fits_router)
NOT_FOUND = {404: {"model": ErrorResponse, "description": "No task with this id (`not_found`)."}}
FIT_RESPONSES = {
    201: {"description": "The task, fitted now (its document without the examples)."},
    200: {
        "description": "The same content was fitted before: that task, not fitted again.",
        "content": {"application/json": {"schema": {"type": "object"}}},
    },
    **ERROR_RESPONSES,
}


def public(task: Task) -> dict[str, Any]:
    """A task as the API shows it: its document without the examples it was fitted on."""
    return public_document(task.document)


def summary(task: Task) -> dict[str, Any]:
    report = task.document["report"]
    return {
        "id": task.id,
        "model": task.model,
        "created": task.document["created"],
        "type": task.document["question"]["type"],
        "labels": task.labels,
        "examples": report["examples"],
        "worked_examples_per_label": task.document["worked_examples_per_label"],
        "accuracy": report["chosen"]["answered"]["accuracy"],
    }


def _known(store: TaskStore, identifier: str) -> Task:
    task = store.get(identifier)
    if task is None:
        raise HttpError(404, "not_found", f"no task {identifier!r} here")
    return task


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
    issues = check_task(body, service.settings)
    if issues:
        raise RequestRejected(issues)
    identifier = task_id(body.question, canonical_examples(body), runtime.served_model_name)
    existing = service.tasks.get(identifier)
    if existing is not None:
        return JSONResponse(public(existing), status_code=200)
    job = start_fit(body, identifier, request, service, runtime)
    return await answer_fit(job, request, background, service.settings.retry_after)


@router.get(TASKS_PATH, responses=AUTH_RESPONSES, dependencies=AUTHORIZED, summary="List the tasks")
async def list_tasks(service: ServiceDep) -> dict[str, Any]:
    return {"tasks": [summary(task) for task in service.tasks.all()]}


@router.get(
    TASKS_PATH + "/{task_id}", responses=AUTH_RESPONSES | NOT_FOUND, dependencies=AUTHORIZED, summary="One task"
)
async def get_task(task_id: str, service: ServiceDep) -> dict[str, Any]:
    return public(_known(service.tasks, task_id))


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
    return Response(status_code=204)
