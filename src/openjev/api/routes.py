"""The routes. Each is a plain function; its dependencies (the service, readiness) are explicit.

`POST /v1/systemone` runs one evaluation, cheapest checks first: model name and the request's
counts, its images decoded in image slots of their own (a short queue, then 529), admission (529 when
full), preparation in a slot of its own (529 when full; on a worker thread unless the body is small),
then the backend work, cancelled (and aborted in the backend) if the client leaves. The API
key was checked on the headers, before the body was read (`ApiKeyMiddleware`); the bearer scheme
here only documents it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Request, Security
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.security import HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.types import Receive

from openjev import __version__, metrics
from openjev.affinity import caller_key
from openjev.answering.evaluation import Evaluation
from openjev.api.docs import REFERENCE_PAGE, swagger_ui_page
from openjev.api.errors import AUTH_RESPONSES, ERROR_RESPONSES, HEALTH_RESPONSES, retry_after_headers
from openjev.api.limits import box_limits, image_limits, route_limits, token_limits
from openjev.api.middleware import SYSTEM_ONE_PATH
from openjev.api.parsing import by_size
from openjev.api.strict_json import StrictJSONRoute
from openjev.config import Settings
from openjev.errors import RequestRejected
from openjev.prompting.budget import LONG_CONTEXT_HEADER
from openjev.request.assets import asset_sources
from openjev.request.positional_images import ImagePlaces, with_positional_images
from openjev.request.schema import SystemOneRequest, SystemOneResponse
from openjev.request.validation import check_request
from openjev.service import Runtime, Service

T = TypeVar("T")


async def get_service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]


async def ready_runtime(service: ServiceDep) -> Runtime:
    return service.runtime()


RuntimeDep = Annotated[Runtime, Depends(ready_runtime)]
AUTHORIZED = [
    Security(
        HTTPBearer(
            auto_error=False,
            description="`Authorization: Bearer <key>` when the server sets OPENJEV_API_KEY; ignored otherwise.",
        )
    )
]

router = APIRouter(route_class=StrictJSONRoute)
#: Where a multipart request's image parts travel in the ASGI scope (`fast_path.py` puts them there).
IMAGE_PARTS = "openjev.image_parts"


class ClientDisconnected(Exception):
    pass


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def run_while_connected(receive: Receive, work: Awaitable[T]) -> T:
    """Run `work` unless the client goes away first (`receive` says so once the body is read);
    either way no task outlives this call."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_wait_for_disconnect(receive))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        raise ClientDisconnected
    finally:
        for pending in (task, watcher):
            pending.cancel()
        await asyncio.gather(task, watcher, return_exceptions=True)


def server_timing(prep: float, evaluation: Evaluation) -> str:
    return ", ".join(
        f"{name};dur={seconds * 1000:.2f}"
        for name, seconds in (
            ("prep", prep),
            ("prefill", evaluation.prefill_seconds),
            ("branches", evaluation.branches_seconds),
        )
    )


def answer_headers(evaluation: Evaluation, prep_seconds: float) -> dict[str, str]:
    """openjev's headers on a 200 answer; the metrics of a finished evaluation are counted here."""
    metrics.INPUT_TOKENS.inc(evaluation.input_tokens)
    metrics.USAGE_INPUT_TOKENS.inc(evaluation.usage.input_tokens)
    for answer in evaluation.answers.values():
        metrics.QUESTIONS.labels(answer["type"]).inc()
    headers = {
        "x-openjev-prefix-tokens": str(evaluation.prefix_tokens),
        # openjev's own work (`usage.py`): every call's prompt tokens, and the tokens read or generated.
        "x-openjev-backend-input-tokens": str(evaluation.input_tokens),
        "x-openjev-backend-output-tokens": str(evaluation.output_tokens),
        "Server-Timing": server_timing(prep_seconds, evaluation),
    }
    if evaluation.cached_tokens is not None:
        headers["x-openjev-cached-tokens"] = str(evaluation.cached_tokens)
        metrics.CACHED_TOKENS.inc(evaluation.cached_tokens)
    if (escalation := evaluation.escalation) is not None:
        headers["x-openjev-escalated"] = str(escalation.escalated)
        headers["x-openjev-reasoning-tokens"] = str(escalation.reasoning_tokens)
        headers["x-openjev-escalations-over-budget"] = str(escalation.over_budget)
        metrics.ESCALATIONS.inc(escalation.escalated)
        metrics.THINKING_FAILURES.inc(escalation.failed)
        metrics.REASONING_TOKENS.inc(escalation.reasoning_tokens)
        metrics.THINKING_SECONDS.inc(escalation.seconds)
    return headers


def json_response(payload: Any, headers: dict[str, str]) -> Response:
    return Response(
        json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")),
        media_type="application/json",
        headers=headers,
    )


@dataclass(frozen=True, slots=True)
class Answered:
    """A finished evaluation, the seconds its preparation took, and the model name it answers under."""

    evaluation: Evaluation
    prep_seconds: float
    model: str


def answer_response(answered: Answered) -> Response:
    """The `/v1/systemone` 200 answer."""
    evaluation = answered.evaluation
    payload = {
        "model": answered.model,
        "answers": evaluation.answers,
        "usage": {"input_tokens": evaluation.usage.input_tokens, "output_tokens": evaluation.usage.output_tokens},
    }
    return json_response(payload, answer_headers(evaluation, answered.prep_seconds))


@router.post(
    SYSTEM_ONE_PATH,
    response_model=SystemOneResponse,
    responses=ERROR_RESPONSES,
    dependencies=AUTHORIZED,
    summary="Answer typed questions about a state",
)
async def system_one(body: SystemOneRequest, request: Request, service: ServiceDep, runtime: RuntimeDep) -> Response:
    parts = request.scope.get(IMAGE_PARTS)
    long_context = asks_long_context(request.headers)
    return await answer_request(body, len(await request.body()), request.receive, service, runtime, parts, long_context)


def asks_long_context(headers: Mapping[str, str]) -> bool:
    """TypeSafe's long-context mode: `TypeSafe-Danger-Zone-Long-Context: true` (`prompting/budget.py`)."""
    return headers.get(LONG_CONTEXT_HEADER.lower(), "").strip().lower() == "true"


async def answer_request(
    body: SystemOneRequest,
    body_bytes: int,
    receive: Receive,
    service: Service,
    runtime: Runtime,
    parts: dict[str, bytes] | None = None,
    long_context: bool = False,
) -> Response:
    """`POST /v1/systemone` once its body is a valid request of `body_bytes` bytes (from the route,
    or from `api.fast_path`); `receive` reports a client that leaves; `parts`: a multipart body's
    image parts by name; `long_context`: the request sent the long-context header. Its `images` list
    shows before the state (`request/positional_images.py`)."""
    places = ImagePlaces()
    try:
        jev = with_positional_images(body, places)
        answered = await evaluate_request(jev, body_bytes, receive, service, runtime, parts, long_context=long_context)
    except RequestRejected as error:
        raise places.rejected(error) from None
    return Response(status_code=499) if answered is None else answer_response(answered)


def checked_sources(
    body: SystemOneRequest, parts: dict[str, bytes] | None, settings: Settings, runtime: Runtime
) -> dict[str, bytes]:
    """The request's image sources by key, once its model and every settings check pass."""
    runtime.check_model(body.model)
    if issues := check_request(body, settings, runtime.engine.boxes.accepted):
        raise RequestRejected(issues)
    return asset_sources(body, parts, settings, vision=runtime.engine.images.vision is not None)


async def evaluate_request(
    body: SystemOneRequest,
    body_bytes: int,
    receive: Receive,
    service: Service,
    runtime: Runtime,
    parts: dict[str, bytes] | None = None,
    *,
    long_context: bool = False,
    conversation: str | None = None,
    fit: bool = False,
) -> Answered | None:
    """The one evaluation behind every answering route, for a valid Jev request of `body_bytes` bytes;
    None when the client left first. `long_context`: the request sent the long-context header;
    `conversation`: the caller's name for its conversation, which keys the data-parallel rank in place
    of the prompt's opening; `fit`: a fit's readout, raw (no task applied) and admitted in the fit slot
    it holds, never a caller's (`Service.admit`). Images are decoded in an image slot, never on the
    event loop."""
    settings = service.settings
    # The checks walk every string (surrogates, depth, placeholders): a large request's on a worker thread.
    images = await by_size(body_bytes, functools.partial(checked_sources, body, parts, settings, runtime))
    started = time.perf_counter()
    try:
        # Images first, in slots of their own: decoding them never holds a slot a text request needs.
        decode = functools.partial(runtime.engine.images.prepare, body, images)
        safe = await run_while_connected(receive, service.prepare_images(decode)) if images else {}
        with service.admit(fit=fit):
            lookup, new_bytes = runtime.engine.look_up(body, body_bytes)
            work = functools.partial(
                runtime.engine.prepare,
                body,
                checked=True,
                lookup=lookup,
                images=safe,
                long_context=long_context,
                tasks=not fit,
            )
            # The images are decoded already: what is left is text, prepared inline when small.
            prepared = await service.prepare(work, inline=service.prepares_inline(new_bytes), fit=fit)
            if conversation is not None:
                prepared = replace(prepared, affinity_key=caller_key(conversation))
            prepared_at = time.perf_counter()
            evaluation = await run_while_connected(receive, runtime.engine.evaluate(prepared))
    except ClientDisconnected:
        return None
    metrics.REQUEST_SECONDS.observe(time.perf_counter() - started)
    # The thinking tier answers under its own name, so a client sees which tier answered.
    name = body.model if body.model == service.settings.think_model else runtime.served_model_name
    return Answered(evaluation, prepared_at - started, name)


@router.get(
    "/v1/limits", responses=AUTH_RESPONSES, dependencies=AUTHORIZED, summary="Every admission limit of this server"
)
async def limits(service: ServiceDep) -> dict[str, Any]:
    settings, current = service.settings, service.current
    return {
        "max_questions": settings.max_questions,
        "max_choice_options": settings.max_choice_options,
        "max_score_levels": settings.max_score_levels,
        "max_body_bytes": settings.max_body_bytes,
        "routes": route_limits(settings),
        "images": image_limits(settings, current is not None, service.backend.vision),
        "boxes": box_limits(current.engine.boxes if current else None),
        **token_limits(settings, service.backend.context_length if current else None),
        "max_concurrent_requests": settings.max_concurrent_requests,
        "max_concurrent_preparations": settings.max_concurrent_preparations,
        "max_concurrent_branches": settings.max_concurrent_branches,
        "max_concurrent_body_reads": settings.max_concurrent_body_reads,
        "max_body_bytes_in_flight": settings.max_body_bytes_in_flight,
        "body_read_timeout_seconds": settings.body_read_timeout,
        "request_timeout_seconds": settings.request_timeout,
        "backend_context_length": service.backend.context_length,
        "data_parallel_size": service.backend.data_parallel_size if current else None,
        # The calibration file in force, by name only: its directory is this machine's business.
        "calibration_file": Path(calibration).name
        if (calibration := current and current.engine.calibration_source)
        else None,
        "answer_settings": service.answer_settings,
        # Whether a question equal to a task's uses it unnamed, and which tasks are kept: what besides
        # the answer settings can change an answer (`openjev eval` keys its resumes on it).
        "tasks": {
            "match_questions": settings.task_match_questions,
            "kept": len(service.tasks),
            "ids_sha256": service.tasks.ids_sha256(),
        },
        "thinking": {
            "model": settings.think_model,
            "mode": current.engine.thinker.mode if current else None,
            "margin_nats": settings.think_margin,
            "max_share": settings.think_max_share,
            "window_questions": settings.think_window,
            "budget_tokens": current.engine.thinker.budget if current else settings.think_budget_tokens,
        },
    }


#: What `/health` shows of a backend's own report: facts, never its URL, local paths or error text.
PUBLIC_BACKEND_FACTS = frozenset(
    {"status", "state", "model", "runtime", "context_length", "dtype", "threads", "load_seconds", "readouts",
     "batched_readouts", "in_flight", "prefix_cache", "image_transfer"}
)  # fmt: skip


@router.get("/health", summary="Ready when the backend is", responses=HEALTH_RESPONSES)
async def health(request: Request, service: ServiceDep) -> JSONResponse:
    current = service.current
    # One backend probe at a time, shared: the probe uses the connections that carry aborts (`probe.py`).
    backend_health = await request.app.state.health_probe.get(service.backend.health) if current else None
    ready = current is not None and backend_health is not None and backend_health.ready
    if ready:
        status = "ok"
    elif service.startup_error is not None:
        status = "failed"
    else:
        status = "starting" if current is None else "unavailable"
    body = {
        "status": status,
        "ready": ready,
        "model": current.served_model_name if current else None,
        # Whether image assets (and box questions) are served: the model sees (null until it is ready).
        "images": service.backend.vision is not None if current else None,
        "backend": {
            "kind": service.backend.kind,
            **{
                key: value
                for key, value in (backend_health.detail if backend_health else {}).items()
                if key in PUBLIC_BACKEND_FACTS
            },
        },
        "startup_seconds": current.startup_seconds if current else None,
        "uptime_seconds": time.monotonic() - service.started_at,
        "in_flight": service.active_evaluations,
        # Several SGLang ranks: per rank, in-flight calls and the share of prompt tokens from its cache.
        **({"data_parallel": current.engine.router.snapshot()} if current and current.engine.router else {}),
        "profile": service.settings.profile,
        "version": __version__,
    }
    if service.startup_error is not None:
        body["error"] = "openjev could not start; the reason is in the server log"
    headers = None if ready else retry_after_headers(service.settings.retry_after)
    return JSONResponse(body, status_code=200 if ready else 503, headers=headers)


@router.get("/health/live", summary="The API process is alive")
async def live() -> dict[str, str]:
    return {"status": "alive"}


@router.get("/metrics", include_in_schema=False)
async def prometheus_metrics() -> Response:
    return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)


@router.get("/", include_in_schema=False)
async def reference() -> HTMLResponse:
    return HTMLResponse(REFERENCE_PAGE)


@router.get("/docs", include_in_schema=False)
async def swagger_ui(request: Request) -> HTMLResponse:
    return swagger_ui_page(request.app.title)
