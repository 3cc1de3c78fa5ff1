"""The door: a request that no route takes is answered from its head alone, before its body is read.

Contract: a path no route takes is a 404, a method its route does not take a 405 (with `Allow`), in
the error body every other answer has, without one byte of the body read, decoded or parsed; an answer
to a request that announced a body closes the connection rather than drain it. Only a request some
route will answer goes on, to `BodyDecoder` and its body-read slots: 32 slow bodies sent to
`/anything` no longer take every slot from the requests that will be answered. The API key is checked
outside this layer (`ApiKeyMiddleware`), on the headers too.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from openjev.api.errors import HttpError, error_response


def announces_body(headers: Headers) -> bool:
    """Whether a body follows the head: a non-zero Content-Length, or chunked transfer."""
    return headers.get("content-length", "0").strip() not in ("", "0") or "transfer-encoding" in headers


def refusal(scope: Scope, routes: Sequence[BaseRoute]) -> HttpError | None:
    """None when a route takes the request; else its 404 or 405 (the methods the path takes, in `Allow`)."""
    allowed: set[str] = set()
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return None
        if match is Match.PARTIAL:
            allowed |= getattr(route, "methods", None) or set()
    if not allowed:
        return HttpError(404, "not_found", "Not Found")
    return HttpError(405, "method_not_allowed", "Method Not Allowed", {"Allow": ", ".join(sorted(allowed))})


class Door:
    """Answers what no route takes (module doc); `routes`: the application's, matched as its router does."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute], retry_after: int) -> None:
        self.app = app
        self.routes = routes
        self.retry_after = retry_after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (error := refusal(scope, self.routes)) is not None:
            if announces_body(Headers(scope=scope)):
                error.headers["Connection"] = "close"
            await error_response(error, self.retry_after)(scope, receive, send)
            return
        await self.app(scope, receive, send)
