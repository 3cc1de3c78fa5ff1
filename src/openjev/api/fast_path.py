"""The answering routes without FastAPI's request machinery, for the bodies they would take as they are.

Contract: a `POST` to `/v1/systemone`, `/v1/decisions`, `/api/alpha/decisions` or `/v1/tasks` whose body is JSON
(`application/json`, parameters allowed) is read and validated by `parsing.parse_body` (on a worker
thread past `parsing.JSON_INLINE_BYTES`); a valid request is answered here by its route's own code
(`evaluating.answer_request`, `decisions.answer_decisions`, `decisions.answer_openrouter`,
`tasks.fit_response`), with errors
mapped by `errors.handled_error_response`, the route's own mapping: the same readiness check first
(503), then the same answer. An invalid body with many issues, or a large one, gets its 422 here,
built as FastAPI's is (`{"detail": [...]}`, the first issues listed), so no part of it runs on the
loop; anything else (another content type, an empty body, a small body with a few issues) goes on
to the FastAPI route with its body replayed, so those errors are still the route's, word for word.
What is skipped: routing, dependency solving and FastAPI's body handling (from body to handler,
1.1 ms became 0.2 ms on a three-question request in the server). Errors on `/v1/decisions` get
OpenAI's envelope outside, as the route's do.

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

from fastapi.responses import JSONResponse, Response
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from openjev.api.body import replay
from openjev.api.body_decoding import INLINE_BYTES
from openjev.api.decisions import answer_decisions, answer_openrouter
from openjev.api.errors import handled_error_response
from openjev.api.evaluating import IMAGE_PARTS, answer_request, asks_long_context
from openjev.api.multipart import split_body
from openjev.api.parsing import JSON_INLINE_BYTES, Parsed, is_media_type, issue_entries, parse_body
from openjev.api.task_fits import background_flag
from openjev.api.tasks import fit_response
from openjev.api.workers import gil_bound
from openjev.endpoints import DECISIONS_PATH, OPENROUTER_PATH, SYSTEM_ONE_PATH, TASKS_PATH
from openjev.errors import OpenJevError
from openjev.request.decision_schema import DecisionRequest
from openjev.request.schema import SystemOneRequest
from openjev.service import Service
from openjev.tasks.schema import TaskRequest


def as_json_body(scope: Scope, body: bytes, parts: dict[str, bytes]) -> Scope:
    """The scope of a multipart request whose `request` part is now the whole body, `application/json`."""
    headers = [(name, value) for name, value in scope["headers"] if name not in (b"content-type", b"content-length")]
    headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return {**scope, "headers": headers, IMAGE_PARTS: parts}


#: Each route's request model.
MODELS: dict[str, type[SystemOneRequest] | type[DecisionRequest] | type[TaskRequest]] = {
    SYSTEM_ONE_PATH: SystemOneRequest,
    DECISIONS_PATH: DecisionRequest,
    OPENROUTER_PATH: SystemOneRequest,
    TASKS_PATH: TaskRequest,
}
FAST_PATHS = frozenset(MODELS)


class SystemOneFastPath:
    def __init__(self, app: ASGIApp, service: Service, retry_after: int) -> None:
        self.app = app
        self.service = service
        self.retry_after = retry_after

    async def _answer(self, path: str, request: Any, size: int, scope: Scope, receive: Receive) -> Response:
        """The route's own answer to a valid request of `size` bytes, its errors mapped as the route's."""
        try:
            runtime = self.service.runtime()
            long_context = asks_long_context(Headers(scope=scope))
            if path == SYSTEM_ONE_PATH:
                parts = scope.get(IMAGE_PARTS)
                return await answer_request(request, size, receive, self.service, runtime, parts, long_context)
            if path == TASKS_PATH:
                background = background_flag(scope["query_string"]) is True
                return await fit_response(request, size, receive, self.service, runtime, background)
            if path == DECISIONS_PATH:
                return await answer_decisions(request, size, receive, self.service, runtime, long_context)
            return await answer_openrouter(request, size, receive, self.service, runtime, long_context)
        except OpenJevError as error:
            return handled_error_response(error, scope, self.retry_after)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in FAST_PATHS:
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path == TASKS_PATH and background_flag(scope["query_string"]) is None:
            await self.app(scope, receive, send)  # FastAPI's own 422 names the query parameter
            return
        message = await receive()
        body = message.get("body", b"")
        content_type = Headers(scope=scope).get("content-type")
        if path == SYSTEM_ONE_PATH and is_media_type(content_type, "multipart/form-data"):
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
        # A large body is parsed and validated on a worker thread, and any body's many issues listed there.
        if len(body) <= JSON_INLINE_BYTES:
            parsed = parse_body(body, content_type, MODELS[path], inline=True)
        else:
            parsed = await gil_bound(functools.partial(parse_body, body, content_type, MODELS[path]))
        if parsed.error is not None:
            parsed = Parsed(rejection=await gil_bound(functools.partial(issue_entries, parsed.error)))
        if parsed.rejection is not None:
            response: Response = JSONResponse({"detail": parsed.rejection}, 422)
        elif parsed.request is None:
            await self.app(scope, replay(message, receive), send)
            return
        else:
            response = await self._answer(path, parsed.request, len(body), scope, receive)
        await response(scope, receive, send)
