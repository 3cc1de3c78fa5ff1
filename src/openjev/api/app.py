"""`create_app`: the FastAPI application around one `Service`.

Middleware, outermost first: status counts for the answering routes, OpenAI's error envelope on
`/v1/decisions`, a request id on every response (and a 500 of our own for anything unforeseen), the
API key checked on the headers (under /v1/ and /api/), bounded and
decoded bodies, then `POST /v1/systemone` answered without FastAPI's request machinery where the
route would take the body as it is (`fast_path.py`). Slashes are not redirected: a 307 would send
the client to whatever its Host header named. The backend starts in the background: `/health/live`
answers at once, `/health` and `/v1/systemone` answer 503 with Retry-After until the service is ready.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from openjev import __version__
from openjev.api.body import BodyDecoder
from openjev.api.catalog import router as catalog_router
from openjev.api.decisions import router as decisions_router
from openjev.api.docs import GUIDES, STATIC_DIR, STATIC_PATH
from openjev.api.door import Door
from openjev.api.errors import install_error_handlers
from openjev.api.fast_path import SystemOneFastPath
from openjev.api.middleware import (
    ANSWERING_PATHS,
    ApiKeyMiddleware,
    RequestIdMiddleware,
    StatusMetricsMiddleware,
)
from openjev.api.openai_errors import OpenAIErrorEnvelope
from openjev.api.probe import SharedProbe
from openjev.api.routes import router
from openjev.api.tasks import router as tasks_router
from openjev.api.workers import worker_pool
from openjev.backends.base import Backend
from openjev.config import Settings
from openjev.endpoints import DECISIONS_PATH
from openjev.service import Service


def create_app(
    settings: Settings, backend: Backend, *, on_fatal: Callable[[BaseException], None] | None = None
) -> FastAPI:
    """Build the API around `backend`. `on_fatal` is called when the service cannot go on: start-up
    failed, or (supervised SGLang) the backend died."""
    service = Service(settings, backend, on_fatal=on_fatal)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        asyncio.get_running_loop().set_default_executor(worker_pool())
        starter = asyncio.create_task(service.start())
        try:
            yield
        finally:
            starter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starter
            await service.aclose()

    app = FastAPI(
        title="openjev",
        version=__version__,
        summary="A self-hosted, Jev-compatible System One API.",
        description="Typed answers (noul, choice, score, box) about a state, read from a language model's first "
        "output token. Compatible with TypeSafe's Jev API and its official SDKs.\n\n" + GUIDES,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        redirect_slashes=False,
    )
    app.state.service = service
    app.state.health_probe = SharedProbe()
    routers = (router, catalog_router, decisions_router, tasks_router)
    for included in routers:
        app.include_router(included)
    app.mount(STATIC_PATH, StaticFiles(directory=STATIC_DIR), name="static")
    install_error_handlers(app, settings.retry_after)
    app.add_middleware(SystemOneFastPath, service=service, retry_after=settings.retry_after)
    app.add_middleware(
        BodyDecoder,
        image_paths=ANSWERING_PATHS,
        max_body_bytes=settings.max_body_bytes,
        max_image_body_bytes=settings.max_image_body_bytes,
        read_timeout=settings.body_read_timeout,
        max_reads=settings.max_concurrent_body_reads,
        retry_after=settings.retry_after,
        max_bytes_in_flight=settings.max_body_bytes_in_flight,
    )
    app.add_middleware(Door, routes=app.router.routes, retry_after=settings.retry_after)
    api_key = settings.api_key.get_secret_value() if settings.api_key is not None else None
    app.add_middleware(ApiKeyMiddleware, api_key=api_key, retry_after=settings.retry_after)
    app.add_middleware(RequestIdMiddleware, retry_after=settings.retry_after)
    app.add_middleware(OpenAIErrorEnvelope, paths=frozenset({DECISIONS_PATH}))
    app.add_middleware(StatusMetricsMiddleware)
    return app
