"""ASGI middleware that must see every response, whichever layer produced it.

Outermost first: `StatusMetricsMiddleware` counts the answering routes' answers by route and status, then
`RequestIdMiddleware` gives every request its id and turns anything unforeseen into a 500 itself.
Starlette's own last-resort handler sits outside every user middleware, so a 500 it produced would
carry no request id and never be counted; here nothing escapes to it.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import uuid

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openjev import metrics
from openjev.api.errors import HttpError, error_response
from openjev.endpoints import DECISIONS_PATH, OPENROUTER_PATH, SYSTEM_ONE_PATH

log = logging.getLogger("openjev")

REQUEST_ID_HEADER = "x-typesafe-request-id"
#: The routes that answer questions: the System One contract, OpenAI's and OpenRouter's.
ANSWERING_PATHS = frozenset({SYSTEM_ONE_PATH, DECISIONS_PATH, OPENROUTER_PATH})
#: Routes behind OPENJEV_API_KEY: everything under /v1/ and /api/, known route or not.
PROTECTED_PREFIXES = ("/v1/", "/api/")
#: What stops work from outside (a signal, an exit, a cancelled task): passed on, never answered as a 500.
STOPPING = (KeyboardInterrupt, SystemExit, GeneratorExit, asyncio.CancelledError)


class RequestIdMiddleware:
    """Gives every request an id, visible to handlers and returned as `x-typesafe-request-id`.

    An exception that reaches this layer is logged with its traceback and the request id, counted in
    `openjev_unexpected_errors_total`, and the client gets a 500 that says nothing about it beyond that
    id. Any `BaseException` but `STOPPING` counts: a native library's panic (pyo3's `PanicException`)
    is not an `Exception`, and would otherwise reach the server as a plain-text 500."""

    def __init__(self, app: ASGIApp, retry_after: int) -> None:
        self.app = app
        self.retry_after = retry_after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [
                    *message.get("headers", []),
                    (REQUEST_ID_HEADER.encode(), request_id.encode()),
                ]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except BaseException as error:
            if isinstance(error, STOPPING):
                raise
            metrics.UNEXPECTED_ERRORS.labels(type(error).__name__).inc()
            log.exception("unexpected error in %s %s (request id %s)", scope["method"], scope["path"], request_id)
            if started:
                raise  # half an answer is out: the server closes the connection
            failure = HttpError(500, "internal_error", f"openjev failed unexpectedly (request id {request_id})")
            await error_response(failure, self.retry_after)(scope, receive, send_with_id)


class StatusMetricsMiddleware:
    """Counts every response of the answering routes by route and status, whichever layer answered it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in ANSWERING_PATHS:
            await self.app(scope, receive, send)
            return
        route = scope["path"]

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                metrics.REQUESTS.labels(route, str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, counting_send)


def authentication_error(headers: Headers, key: str) -> HttpError | None:
    """None when `Authorization: Bearer <key>` is there; else the 401 to answer."""
    header = headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), key.encode()):
        return None
    return HttpError(
        401,
        "authentication_error",
        "missing API key" if not header else "invalid API key",
        {"WWW-Authenticate": "Bearer", "Connection": "close"},
    )


class ApiKeyMiddleware:
    """OPENJEV_API_KEY, checked on the headers alone: a client without the key gets its 401 before one
    byte of its body is read, decompressed or parsed (and the connection is closed, not drained)."""

    def __init__(self, app: ASGIApp, api_key: str | None, retry_after: int) -> None:
        self.app = app
        self.api_key = api_key
        self.retry_after = retry_after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.api_key is not None and scope["type"] == "http" and scope["path"].startswith(PROTECTED_PREFIXES):
            refusal = authentication_error(Headers(scope=scope), self.api_key)
            if refusal is not None:
                await error_response(refusal, self.retry_after)(scope, receive, send)
                return
        await self.app(scope, receive, send)
