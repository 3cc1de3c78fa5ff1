"""`POST /v1/systemone` and `POST /v1/decisions` without FastAPI's request machinery, for the bodies
their routes would take as they are.

Contract: a body whose Content-Type is JSON (`application/json`, parameters allowed), that
`loads_if_same` reads and `SystemOneRequest` validates, is answered here by `routes.answer_request`,
the route's own code, with errors mapped by `errors.handled_error_response`, the route's own mapping:
the same readiness check first (503), then the same answer. Anything else (another method or
content type, JSON that is refused or that orjson might read differently, a request that does not
validate) goes on to the FastAPI route with its body replayed, so every validation error a client can
get is still the route's, word for word. What is skipped: routing, dependency solving and FastAPI's
body handling (from body to handler, 1.1 ms became 0.2 ms on a three-question request in the server).
A `/v1/decisions` body that `DecisionRequest` validates is answered by `decisions.answer_decisions`,
its route's own code, the same way (errors then get OpenAI's envelope outside, as the route's do).

A `multipart/form-data` body (image assets, as the SDK sends them) is split here (`multipart.py`):
its `request` part goes on as the JSON body would, answered here or by the route, and its other parts
travel in the scope (`IMAGE_PARTS`), where both read them. A body that does not split is answered
with its error here. A body over `body.INLINE_BYTES` is split on a worker thread.

This layer sits behind `BodyDecoder`, which hands on every POST body whole, in one message.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from openjev.api.body import INLINE_BYTES, replay
from openjev.api.decisions import answer_decisions
from openjev.api.errors import handled_error_response
from openjev.api.middleware import DECISIONS_PATH, SYSTEM_ONE_PATH
from openjev.api.multipart import split_body
from openjev.api.routes import IMAGE_PARTS, answer_request, asks_long_context
from openjev.api.strict_json import loads_if_same
from openjev.errors import OpenJevError
from openjev.request.decision_schema import DecisionRequest
from openjev.request.schema import SystemOneRequest
from openjev.service import Service


def is_json_type(content_type: str | None) -> bool:
    """`application/json`, with any parameters: a type FastAPI reads as JSON too."""
    return content_type is not None and content_type.partition(";")[0].strip().lower() == "application/json"


def is_multipart(content_type: str | None) -> bool:
    return content_type is not None and content_type.partition(";")[0].strip().lower() == "multipart/form-data"


def as_json_body(scope: Scope, body: bytes, parts: dict[str, bytes]) -> Scope:
    """The scope of a multipart request whose `request` part is now the whole body, `application/json`."""
    headers = [(name, value) for name, value in scope["headers"] if name not in (b"content-type", b"content-length")]
    headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return {**scope, "headers": headers, IMAGE_PARTS: parts}


def valid_request(
    body: bytes, content_type: str | None, model: type[SystemOneRequest] | type[DecisionRequest] = SystemOneRequest
) -> Any:
    """The request in `body` (a `model`), where the route would find the same one; None otherwise."""
    if not is_json_type(content_type) or (value := loads_if_same(body)) is None:
        return None
    try:
        return model.model_validate(value)
    except ValidationError:
        return None


FAST_PATHS = frozenset({SYSTEM_ONE_PATH, DECISIONS_PATH})


class SystemOneFastPath:
    def __init__(self, app: ASGIApp, service: Service, retry_after: int) -> None:
        self.app = app
        self.service = service
        self.retry_after = retry_after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in FAST_PATHS:
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        message = await receive()
        body = message.get("body", b"")
        content_type = Headers(scope=scope).get("content-type")
        if path == SYSTEM_ONE_PATH and is_multipart(content_type):
            try:
                settings = self.service.settings
                split = functools.partial(
                    split_body,
                    body,
                    content_type or "",
                    settings.max_body_bytes,
                    settings.max_images + 1,
                    settings.max_image_bytes,
                )
                # A body of megabytes of images is split off the event loop.
                body, parts = split() if len(body) <= INLINE_BYTES else await asyncio.to_thread(split)
            except OpenJevError as error:
                await handled_error_response(error, scope, self.retry_after)(scope, receive, send)
                return
            scope, content_type = as_json_body(scope, body, parts), "application/json"
            message = {"type": "http.request", "body": body, "more_body": False}
        request = valid_request(body, content_type, SystemOneRequest if path == SYSTEM_ONE_PATH else DecisionRequest)
        if request is None:
            await self.app(scope, replay(message, receive), send)
            return
        try:
            runtime = self.service.runtime()
            long_context = asks_long_context(Headers(scope=scope))
            if path == SYSTEM_ONE_PATH:
                parts = scope.get(IMAGE_PARTS)
                work = answer_request(request, len(body), receive, self.service, runtime, parts, long_context)
            else:
                work = answer_decisions(request, len(body), receive, self.service, runtime, long_context)
            response = await work
        except OpenJevError as error:
            response = handled_error_response(error, scope, self.retry_after)
        await response(scope, receive, send)
