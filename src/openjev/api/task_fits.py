"""Fits as jobs (`tasks/jobs.py`): `POST /v1/tasks` runs its fit as one, and `/v1/tasks/fits/{id}` shows it.

- `POST /v1/tasks?background=true` answers 202 at once with the job (`Location`: its URL); without
  it the call waits for the job as before (201 with the task, or the fit's own error). Identical
  fits posted while one runs share its job; a task fitted before answers 200 either way.
- `GET /v1/tasks/fits/{id}`: status (`running`, `done`, `failed`, `cancelled`), progress (readouts
  done and planned), events, and when finished the task (`done`) or the error response it ended in
  (`failed`: `error.status` and `error.body`, a 422 naming the field, say).
- `DELETE /v1/tasks/fits/{id}`: cancel; its readouts are kept, so posting the fit again resumes it.
- A waiting client that leaves cancels the job unless another client waits on it or it was posted
  in the background.

A fit's readouts go through `evaluating.evaluate_request` with no task applied (its plain readouts
with the hidden state where the backend returns it: `tasks/fitting.py`), in the fit slots every
fit shares (OPENJEV_TASK_FIT_READOUTS, `Service.fit_readouts`), never in a caller's preparation or
evaluation slot: fits never make a caller's request a 529. Past OPENJEV_TASK_MAX_FITS running fits,
one more posted is a 529 with Retry-After (`FitJobs.start`).
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import TypeAdapter, ValidationError
from starlette.datastructures import QueryParams
from starlette.types import Receive

from openjev.api.dependencies import AUTHORIZED, ServiceDep
from openjev.api.errors import AUTH_RESPONSES, ENTRY_BYTES, HttpError, error_response
from openjev.api.evaluating import ClientDisconnected, evaluate_request, run_while_connected
from openjev.endpoints import FITS_PATH
from openjev.errors import Issue, OpenJevError, RequestRejected, clipped, shown_id
from openjev.request.schema import ErrorResponse, SystemOneRequest
from openjev.service import Runtime, Service
from openjev.tasks.fitting import fit_task
from openjev.tasks.growing import ReadoutFiles
from openjev.tasks.jobs import FitJob
from openjev.tasks.schema import TaskRequest
from openjev.tasks.store import StoreFull, Task, TaskTooLarge

#: Characters of an unknown task or fit id its 404 repeats.
router = APIRouter()


def background_flag(query_string: bytes) -> bool | None:
    """`?background=` as FastAPI reads a bool (true/false, 1/0, yes/no, on/off; absent: false); None for
    anything else, which the route's own 422 names (`loc` `["query", "background"]`)."""
    value = QueryParams(query_string).get("background")
    if value is None:
        return False
    try:
        return TypeAdapter(bool).validate_python(value)
    except ValidationError:
        return None


def too_large(size: int, limit: int) -> HttpError:
    return HttpError(413, "request_too_large", f"the task is {size} bytes, over OPENJEV_TASK_MAX_BYTES={limit}")


def full(limit: int) -> HttpError:
    message = f"{limit} tasks and fits' readouts are kept at most (OPENJEV_TASK_MAX_TASKS); delete a task first"
    return HttpError(409, "conflict", message)


async def kept(service: Service, document: dict[str, Any]) -> Task:
    """The fitted document kept (its file written on a worker thread); the 409/413/422 that refuse it."""
    store = service.tasks
    try:
        return await asyncio.to_thread(store.put, {**document, "answer_settings": service.answer_settings})
    except StoreFull:
        raise full(store.max_tasks) from None
    except TaskTooLarge as error:
        raise too_large(error.args[0], store.max_bytes) from None
    except ValueError as error:
        message = f"the fit gave a task that cannot serve: {clipped(str(error), ENTRY_BYTES)}"
        raise RequestRejected([Issue(("examples",), message)]) from None


async def _never_disconnects() -> dict[str, Any]:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


def readout_files(service: Service) -> ReadoutFiles:
    """Where each kept task's readouts are (`tasks/growing.py`)."""
    return ReadoutFiles(service.tasks.directory, service.fit_jobs.directory)


def start_fit(body: TaskRequest, identifier: str, service: Service, runtime: Runtime) -> FitJob:
    """The job fitting `body` as `identifier`, started now or shared with the one running."""
    settings = service.settings

    async def answer(asked: SystemOneRequest, hidden: frozenset[str]) -> tuple[dict[str, dict[str, Any]], dict]:
        async with service.fit_readouts:
            size = len(await asyncio.to_thread(asked.model_dump_json))  # O(state): never on the loop
            answered = await evaluate_request(
                asked, size, _never_disconnects, service, runtime, fit=True, hidden=hidden
            )
        assert answered is not None  # nothing disconnects a job's own readouts
        return answered.evaluation.answers, answered.evaluation.hidden_states

    async def check(asked: SystemOneRequest) -> None:
        async with service.fit_readouts:
            await asyncio.to_thread(functools.partial(runtime.engine.prepare, asked, tasks=False))

    concurrency = settings.task_fit_readouts

    async def run(readouts, progress) -> dict[str, Any]:
        document = await fit_task(
            body,
            settings,
            runtime.served_model_name,
            answer,
            concurrency=concurrency,
            kept=readouts,
            progress=progress,
            check=check,
            hidden=service.backend.hidden_states.available,
        )
        task = await kept(service, document)
        readout_files(service).keep(readouts.path, task.id)  # a task that grows reads only what is new
        return task.public

    return service.fit_jobs.start(identifier, run)


def public_document(document: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key != "examples"}


def view(job: FitJob, retry_after: int) -> dict[str, Any]:
    shown = job.view()
    if job.status == "done" and job.document is not None:
        shown["task"] = public_document(job.document)
    if job.status == "failed" and isinstance(job.error, OpenJevError):
        response = error_response(job.error, retry_after)
        shown["error"] = {"status": response.status_code, "body": json.loads(bytes(response.body))}
    elif job.status == "failed":
        shown["error"] = {"status": 500, "body": {"error": {"type": "internal_error", "message": "the fit failed"}}}
    return shown


async def answer_fit(job: FitJob, receive: Receive, background: bool, retry_after: int) -> Response:
    """202 with the job (`background`), or the job's outcome once it ends (module doc)."""
    location = {"Location": f"{FITS_PATH}/{job.id}"}
    if background:
        job.detached = True
        return JSONResponse(view(job, retry_after), status_code=202, headers=location)
    job.waiters += 1
    try:
        assert job.task is not None
        await run_while_connected(receive, asyncio.shield(job.task))
    except ClientDisconnected:
        if job.waiters == 1 and not job.detached:
            job.task.cancel()
        return Response(status_code=499)
    finally:
        job.waiters -= 1
    if job.status == "done" and job.document is not None:
        return JSONResponse(public_document(job.document), status_code=201)
    if isinstance(job.error, OpenJevError):
        raise job.error
    raise HttpError(500, "internal_error", f"the fit ended {job.status}")


def _known(request: Request, service: Service, identifier: str) -> FitJob:
    job = service.fit_jobs.get(identifier)
    if job is None:
        raise HttpError(404, "not_found", f"no fit {shown_id(identifier)} here")
    return job


#: What a fit's routes answer besides the job: the key's refusals, and a job this server does not hold.
FIT_JOB_RESPONSES = AUTH_RESPONSES | {
    404: {"model": ErrorResponse, "description": "No fit job with this id here (`not_found`)."}
}


@router.get(FITS_PATH + "/{job_id}", responses=FIT_JOB_RESPONSES, dependencies=AUTHORIZED, summary="A fit's progress")
async def get_fit(job_id: str, request: Request, service: ServiceDep) -> dict[str, Any]:
    return view(_known(request, service, job_id), service.settings.retry_after)


@router.delete(FITS_PATH + "/{job_id}", responses=FIT_JOB_RESPONSES, dependencies=AUTHORIZED, summary="Cancel a fit")
async def cancel_fit(job_id: str, request: Request, service: ServiceDep) -> dict[str, Any]:
    job = _known(request, service, job_id)
    service.fit_jobs.cancel(job_id)
    if job.task is not None:
        await asyncio.gather(job.task, return_exceptions=True)
    return view(job, service.settings.retry_after)
