"""The HTTP face of openjev: a Jev-exact `POST /v1/systemone` plus models, limits, health and docs.

Error contract (as in TypeSafe's API and SDK):
- validation failures: 422 `{"detail": [{"loc": ["body", ...], "msg", "type"}]}`, token budgets included;
- every other error: `{"detail": {"error_type", "message"}}` with its status: 401 authentication,
  404 unknown model or route, 413/415/400 bodies, 529 overload and 503 not ready (both with
  Retry-After), 502 backend failure, 504 backend timeout;
- every response carries `x-typesafe-request-id`.

The backend starts in the background: `/health/live` answers at once, `/health` and `/v1/systemone`
answer 503 with Retry-After until the backend is ready and the tokenizer and labels are checked.
"""

import asyncio
import contextlib
import datetime as dt
import hmac
import json
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openjev import __version__, metrics
from openjev.backends.base import Backend, BackendError, BackendUnavailable
from openjev.config import COMPAT_MODEL_ALIAS, DEFAULT_SERVED_MODEL_NAME, Settings
from openjev.engine import Engine, Evaluation
from openjev.http_body import BodyDecoder
from openjev.schema import (
    ErrorResponse,
    ModelList,
    SystemOneRequest,
    SystemOneResponse,
    ValidationErrorResponse,
    error_body,
)
from openjev.tokenizer import ChatTokenizer
from openjev.tokenizer_source import resolve_tokenizer_dir

log = logging.getLogger("openjev")

REQUEST_ID_HEADER = "x-typesafe-request-id"


QUESTION_TYPES = frozenset({"noul", "choice", "score", "box"})


def validation_entry(error: Any) -> dict[str, Any]:
    """FastAPI's 422 entry with `loc` pointing at the field as the contract names it.

    Pydantic adds the discriminator tag after a question id (`questions.q.choice.criteria`); the
    contract's locations omit it (`questions.q.criteria`). The offending input is not echoed back:
    it can be megabytes.
    """
    loc = list(error["loc"])
    if len(loc) >= 4 and loc[:2] == ["body", "questions"] and loc[3] in QUESTION_TYPES:
        del loc[3]
    entry = {"loc": loc, "msg": error["msg"], "type": error["type"]}
    if error.get("ctx"):
        entry["ctx"] = {
            key: value if isinstance(value, int | float | str) else str(value) for key, value in error["ctx"].items()
        }
    return entry


def _refuse_constant(token: str) -> Any:
    raise json.JSONDecodeError(f"{token} is not valid JSON", token, 0)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise json.JSONDecodeError(f"{text} overflows a JSON number", text, 0)
    return value


class StrictJSONRequest(Request):
    """Standard JSON only: NaN, Infinity and numbers that overflow are a 422 `json_invalid`.

    Python's parser accepts them, and a non-finite number in, say, a score level would otherwise
    come back in `legend`, which JSON cannot carry.
    """

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = json.loads(await self.body(), parse_constant=_refuse_constant, parse_float=_finite_float)
        return self._json


class StrictJSONRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict


class ApiError(Exception):
    """An error with the `{"detail": {"error_type", "message"}}` body."""

    def __init__(self, status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.headers = headers or {}


def error_response(status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(error_type, message), status_code=status, headers=headers)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "Missing or wrong API key (`authentication_error`)."},
    404: {"model": ErrorResponse, "description": "Unknown model (`model_not_found`)."},
    413: {"model": ErrorResponse, "description": "Body over the size limit, before or after decompression."},
    415: {"model": ErrorResponse, "description": "Unsupported Content-Encoding."},
    422: {"model": ValidationErrorResponse, "description": "Validation failure, token budgets included."},
    502: {"model": ErrorResponse, "description": "The backend failed."},
    503: {"model": ErrorResponse, "description": "The backend is not ready; see Retry-After."},
    504: {"model": ErrorResponse, "description": "The backend did not answer within the request timeout."},
    529: {"model": ErrorResponse, "description": "Too many evaluations in progress; see Retry-After."},
}


class RequestIdMiddleware:
    """Gives every request an id, visible to handlers and returned as `x-typesafe-request-id`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    (REQUEST_ID_HEADER.encode(), request_id.encode()),
                ]
            await send(message)

        await self.app(scope, receive, send_with_id)


class StatusMetricsMiddleware:
    """Counts every `/v1/systemone` response by status, whichever layer answered it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/systemone":
            await self.app(scope, receive, send)
            return

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                metrics.REQUESTS.labels(str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, counting_send)


@dataclass(frozen=True, slots=True)
class Runtime:
    """Everything that exists only once the backend is ready."""

    engine: Engine
    served_model_name: str
    #: What the request's `model` may say: the compatibility alias, the served name, configured aliases.
    accepted_models: frozenset[str]
    startup_seconds: float


class Admission:
    """At most `limit` evaluations at once; the next one is refused, never queued."""

    def __init__(self, limit: int, retry_after: int) -> None:
        self.limit = limit
        self.retry_after = retry_after
        self.active = 0

    @contextlib.contextmanager
    def slot(self) -> Any:
        if self.active >= self.limit:
            raise ApiError(
                529,
                "overloaded",
                f"{self.active} evaluations are in progress (OPENJEV_MAX_CONCURRENT_REQUESTS={self.limit}); "
                "retry shortly",
                {"Retry-After": str(self.retry_after), "retry-after-ms": str(self.retry_after * 1000)},
            )
        self.active += 1
        metrics.IN_FLIGHT.inc()
        try:
            yield
        finally:
            self.active -= 1
            metrics.IN_FLIGHT.dec()


class ClientDisconnected(Exception):
    pass


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def run_while_connected(request: Request, work: Any) -> Any:
    """Run `work` unless the client goes away first; either way no task outlives this call."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_wait_for_disconnect(request.receive))
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


SCALAR_PAGE = """<!doctype html>
<html>
  <head>
    <title>openjev API reference</title>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <script id="api-reference" data-url="/openapi.json"></script>
    <script src="https://cdn.jsdelivr.net/npm/@scalar/api-reference"></script>
  </body>
</html>
"""


def create_app(
    settings: Settings,
    backend: Backend,
    *,
    on_fatal: Callable[[BaseException], None] | None = None,
) -> FastAPI:
    """Build the API around `backend`.

    `on_fatal` is called when the service cannot go on: startup failed for good, or (supervised
    SGLang) the backend died. Without it a startup failure raises in the lifespan task.
    """
    admission = Admission(settings.max_concurrent_requests, settings.retry_after)
    state: dict[str, Any] = {"runtime": None, "startup_error": None, "started": time.monotonic()}

    async def start_runtime() -> None:
        started = time.monotonic()
        try:
            await backend.start()
            tokenizer_dir = await asyncio.to_thread(
                resolve_tokenizer_dir,
                settings.tokenizer,
                backend.tokenizer_dir,
                settings.model,
                settings.revision,
            )
            chat = await asyncio.to_thread(ChatTokenizer, tokenizer_dir)
            engine = await asyncio.to_thread(Engine, settings, chat, backend)
            served = settings.served_model_name or backend.model_name or DEFAULT_SERVED_MODEL_NAME
            accepted = frozenset({COMPAT_MODEL_ALIAS, served, *settings.model_aliases})
            state["runtime"] = Runtime(engine, served, accepted, time.monotonic() - started)
            log.info("openjev is ready: serving %s (startup %.1fs)", served, time.monotonic() - started)
        except Exception as error:
            state["startup_error"] = error
            log.error("openjev could not start: %s", error)
            if on_fatal is not None:
                on_fatal(error)
            else:
                raise

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        starter = asyncio.create_task(start_runtime())
        try:
            yield
        finally:
            starter.cancel()
            with contextlib.suppress(BaseException):
                await starter
            await backend.aclose()

    app = FastAPI(
        title="openjev",
        version=__version__,
        summary="A self-hosted, Jev-compatible System One API.",
        description="Typed answers (noul, choice, score) about a state, read from a language model's first "
        "output token. Compatible with TypeSafe's Jev API and its official SDKs.",
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
    )
    app.router.route_class = StrictJSONRoute

    # -- errors -----------------------------------------------------------------------------------

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, error: ApiError) -> JSONResponse:
        return error_response(error.status, error.error_type, error.message, error.headers)

    @app.exception_handler(BackendError)
    async def _backend_error(_: Request, error: BackendError) -> JSONResponse:
        headers = {"Retry-After": str(settings.retry_after)} if isinstance(error, BackendUnavailable) else None
        log.warning("backend failure (%s): %s", error.error_type, error)
        return error_response(error.status_code, error.error_type, str(error), headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
        error_type = {400: "invalid_body", 404: "not_found", 405: "method_not_allowed"}.get(
            error.status_code, "http_error"
        )
        return error_response(error.status_code, error_type, str(error.detail), getattr(error, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": [validation_entry(entry) for entry in error.errors()]}, status_code=422)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, error: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return error_response(500, "internal_error", f"openjev failed unexpectedly: {type(error).__name__}")

    # -- dependencies -----------------------------------------------------------------------------

    async def require_api_key(request: Request) -> None:
        if settings.api_key is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        expected = settings.api_key.get_secret_value().encode()
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected):
            raise ApiError(
                401,
                "authentication_error",
                "missing API key" if not header else "invalid API key",
                {"WWW-Authenticate": "Bearer"},
            )

    def runtime() -> Runtime:
        current: Runtime | None = state["runtime"]
        if current is None:
            raise ApiError(
                503,
                "backend_unavailable",
                "openjev is starting: the backend is not ready yet",
                {"Retry-After": str(settings.retry_after)},
            )
        return current

    Authorized = Depends(require_api_key)
    Ready = Annotated[Runtime, Depends(runtime)]

    # -- routes -----------------------------------------------------------------------------------

    @app.post(
        "/v1/systemone",
        response_model=SystemOneResponse,
        responses=ERROR_RESPONSES,
        dependencies=[Authorized],
        summary="Answer typed questions about a state",
    )
    async def system_one(body: SystemOneRequest, request: Request, ready: Ready) -> Response:
        if body.model not in ready.accepted_models:
            raise ApiError(
                404,
                "model_not_found",
                f"model {body.model!r} is not served here; use one of {sorted(ready.accepted_models)}",
            )
        started = time.perf_counter()
        try:
            with admission.slot():
                prepared = await asyncio.to_thread(ready.engine.prepare, body)
                prepared_at = time.perf_counter()
                evaluation: Evaluation = await run_while_connected(request, ready.engine.evaluate(prepared))
        except ClientDisconnected:
            return Response(status_code=499)

        metrics.REQUEST_SECONDS.observe(time.perf_counter() - started)
        metrics.INPUT_TOKENS.inc(evaluation.input_tokens)
        for answer in evaluation.answers.values():
            metrics.QUESTIONS.labels(answer["type"]).inc()
        headers = {
            "x-openjev-prefix-tokens": str(evaluation.prefix_tokens),
            "Server-Timing": server_timing(prepared_at - started, evaluation),
        }
        if evaluation.cached_tokens is not None:
            headers["x-openjev-cached-tokens"] = str(evaluation.cached_tokens)
            metrics.CACHED_TOKENS.inc(evaluation.cached_tokens)
        payload = {
            "model": ready.served_model_name,
            "answers": evaluation.answers,
            "usage": {"input_tokens": evaluation.input_tokens, "output_tokens": evaluation.output_tokens},
        }
        return Response(
            json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")),
            media_type="application/json",
            headers=headers,
        )

    @app.get("/v1/models", response_model=ModelList, dependencies=[Authorized], summary="List model names")
    async def list_models() -> dict[str, Any]:
        current: Runtime | None = state["runtime"]
        served = current.served_model_name if current else settings.served_model_name or backend.model_name
        released = settings.model_release_date or dt.date.today().isoformat()
        names = [
            (COMPAT_MODEL_ALIAS, f"Alias of {served or 'the served model'}."),
            *([(served, "The model that answers, by first-token readout.")] if served else []),
            *((alias, f"Alias of {served}.") for alias in settings.model_aliases),
        ]
        created = int(time.time() - (time.monotonic() - state["started"]))
        return {
            "models": [{"name": name, "description": text, "release_date": released} for name, text in names],
            "object": "list",
            "data": [{"id": name, "object": "model", "created": created, "owned_by": "openjev"} for name, _ in names],
        }

    @app.get("/v1/limits", dependencies=[Authorized], summary="Every admission limit of this server")
    async def limits() -> dict[str, Any]:
        current: Runtime | None = state["runtime"]
        return {
            "max_questions": settings.max_questions,
            "max_choice_options": settings.max_choice_options,
            "max_score_levels": settings.max_score_levels,
            "max_body_bytes": settings.max_body_bytes,
            "max_input_tokens": current.engine.max_branch_tokens if current else settings.max_input_tokens,
            "max_total_input_tokens": settings.max_total_input_tokens,
            "max_concurrent_requests": settings.max_concurrent_requests,
            "max_concurrent_branches": settings.max_concurrent_branches,
            "request_timeout_seconds": settings.request_timeout,
            "backend_context_length": backend.context_length,
        }

    @app.get("/health", summary="Ready when the backend is", responses={503: {"description": "Not ready."}})
    async def health() -> JSONResponse:
        current: Runtime | None = state["runtime"]
        backend_health = await backend.health() if current else None
        ready = current is not None and backend_health is not None and backend_health.ready
        if ready:
            status = "ok"
        elif state["startup_error"] is not None:
            status = "failed"
        else:
            status = "starting" if current is None else "unavailable"
        body = {
            "status": status,
            "ready": ready,
            "model": current.served_model_name if current else None,
            "backend": {"kind": backend.kind, **(backend_health.detail if backend_health else {})},
            "startup_seconds": current.startup_seconds if current else None,
            "uptime_seconds": time.monotonic() - state["started"],
            "in_flight": admission.active,
            "profile": settings.profile,
            "version": __version__,
        }
        if state["startup_error"] is not None:
            body["error"] = str(state["startup_error"])
        headers = None if ready else {"Retry-After": str(settings.retry_after)}
        return JSONResponse(body, status_code=200 if ready else 503, headers=headers)

    @app.get("/health/live", summary="The API process is alive")
    async def live() -> dict[str, str]:
        return {"status": "alive"}

    @app.get("/metrics", include_in_schema=False)
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)

    @app.get("/", include_in_schema=False)
    async def reference() -> HTMLResponse:
        return HTMLResponse(SCALAR_PAGE)

    app.state.openjev = state
    app.state.admission = admission
    # Outermost first: ids on every response, status counts, then bounded/decoded bodies.
    app.add_middleware(BodyDecoder, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(StatusMetricsMiddleware)
    app.add_middleware(RequestIdMiddleware)
    return app
