"""ASGI middleware that must see every response, whichever layer produced it."""

from __future__ import annotations

import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openjev import metrics

REQUEST_ID_HEADER = "x-typesafe-request-id"
SYSTEM_ONE_PATH = "/v1/systemone"


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
        if scope["type"] != "http" or scope["path"] != SYSTEM_ONE_PATH:
            await self.app(scope, receive, send)
            return

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                metrics.REQUESTS.labels(str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, counting_send)
