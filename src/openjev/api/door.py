"""The door: a request that no route takes is answered from its head alone, before its body is read.

Contract: a path no route takes is a 404, a method its route does not take a 405 (with `Allow`), in
the error body every other answer has, without one byte of the body read, decoded or parsed; an answer
to a request that announced a body closes the connection rather than drain it. Only a request some
route will answer goes on, to `BodyDecoder` and its body-read slots: 32 slow bodies sent to
`/anything` no longer take every slot from the requests that will be answered. A mount is decided
here too: Starlette's `Mount` matches every method, so the static files' mount takes GET and HEAD
only (`POST /static/x` is a 405 with `Allow: GET, HEAD`, not a body read and then a 405). Every route
the application has must say which methods it takes, or the application does not start (`methods_of`).
The API key is checked outside this layer (`ApiKeyMiddleware`), on the headers too; `/static` (the
documentation pages' scripts and styles, public like the pages) needs none.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from openjev.api.errors import HttpError, error_response


def announces_body(headers: Headers) -> bool:
    """Whether a body follows the head: a non-zero Content-Length, or chunked transfer."""
    return headers.get("content-length", "0").strip() not in ("", "0") or "transfer-encoding" in headers


#: What a static files' mount serves.
STATIC_METHODS = frozenset({"GET", "HEAD"})


def flat_routes(routes: Sequence[BaseRoute]) -> list[BaseRoute]:
    """Every route as the router matches them: FastAPI keeps an included router as one route without
    `methods` (its `original_router` holds them), so those are opened, recursively."""
    flat: list[BaseRoute] = []
    for route in routes:
        included = getattr(route, "original_router", None)
        flat.extend(flat_routes(included.routes) if included is not None else [route])
    return flat


def methods_of(route: BaseRoute) -> frozenset[str]:
    """The methods `route` takes; a route that would take any method (a mount of another application, an
    endpoint class) is refused here, when the application starts, so none slips past the door."""
    if isinstance(route, Mount) and isinstance(route.app, StaticFiles):
        return STATIC_METHODS
    if isinstance(route, Route) and route.methods:
        return frozenset(route.methods)
    raise TypeError(f"the door cannot tell which methods {route!r} takes")


def refusal(scope: Scope, routes: Sequence[tuple[BaseRoute, frozenset[str]]]) -> HttpError | None:
    """None when a route takes the request; else its 404 or 405 (the methods the path takes, in `Allow`)."""
    allowed: set[str] = set()
    for route, methods in routes:
        match, _ = route.matches(scope)
        if match is Match.NONE:
            continue
        if match is Match.FULL and scope["method"] in methods:
            return None
        allowed |= methods
    if not allowed:
        return HttpError(404, "not_found", "Not Found")
    return HttpError(405, "method_not_allowed", "Method Not Allowed", {"Allow": ", ".join(sorted(allowed))})


class Door:
    """Answers what no route takes (module doc); `routes`: the application's, matched as its router does
    (read when the middleware stack is built, at start, so a route added after `add_middleware` counts)."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute], retry_after: int) -> None:
        self.app = app
        self.routes = [(route, methods_of(route)) for route in flat_routes(routes)]
        self.retry_after = retry_after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (error := refusal(scope, self.routes)) is not None:
            if announces_body(Headers(scope=scope)):
                error.headers["Connection"] = "close"
            await error_response(error, self.retry_after)(scope, receive, send)
            return
        await self.app(scope, receive, send)
