"""The routes. Each is a plain function; its dependencies (the service, readiness) are explicit.

`POST /v1/systemone` runs one evaluation (`evaluating.py`); the others report on the server: its
limits, its health, its metrics and its reference pages. The API key was checked on the headers,
before the body was read (`ApiKeyMiddleware`); the bearer scheme here only documents it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from openjev import __version__, metrics
from openjev.api.dependencies import AUTHORIZED, RuntimeDep, ServiceDep
from openjev.api.docs import REFERENCE_PAGE, swagger_ui_page
from openjev.api.errors import AUTH_RESPONSES, ERROR_RESPONSES, HEALTH_RESPONSES, retry_after_headers
from openjev.api.evaluating import IMAGE_PARTS, answer_request, asks_long_context
from openjev.api.limits import box_limits, image_limits, route_limits, token_limits
from openjev.api.strict_json import StrictJSONRoute
from openjev.endpoints import SYSTEM_ONE_PATH
from openjev.request.schema import SystemOneRequest, SystemOneResponse

router = APIRouter(route_class=StrictJSONRoute)


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
        # Whether readouts carry the hidden state a task's head reads, and what enables it where not.
        "hidden_states": service.backend.hidden_states.public() if current else None,
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
            "max_tasks": settings.task_max_tasks,
            "max_examples": settings.task_max_examples,
            "max_task_bytes": settings.task_max_bytes,
            "page_bytes": settings.task_page_bytes,
            # Fits as tenants: how many may run (one more is a 529 at post) and the readout slots they share.
            "max_running_fits": settings.task_max_fits,
            "running_fits": service.fit_jobs.running,
            "fit_readouts": settings.task_fit_readouts,
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
    {
        "status",
        "state",
        "model",
        "runtime",
        "context_length",
        "dtype",
        "threads",
        "load_seconds",
        "readouts",
        "batched_readouts",
        "in_flight",
        "prefix_cache",
        "image_transfer",
    }
)


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
        "hidden_states": service.backend.hidden_states.public() if current else None,
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
