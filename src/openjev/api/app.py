"""`create_app`: the FastAPI application around one `Service`.

Middleware, outermost first: a request id on every response, status counts for `/v1/systemone`,
then bounded and decoded bodies. The backend starts in the background: `/health/live` answers at
once, `/health` and `/v1/systemone` answer 503 with Retry-After until the service is ready.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from openjev import __version__
from openjev.api.body import BodyDecoder
from openjev.api.errors import install_error_handlers
from openjev.api.middleware import RequestIdMiddleware, StatusMetricsMiddleware
from openjev.api.routes import router
from openjev.backends.base import Backend
from openjev.config import Settings
from openjev.service import Service


def create_app(
    settings: Settings, backend: Backend, *, on_fatal: Callable[[BaseException], None] | None = None
) -> FastAPI:
    """Build the API around `backend`. `on_fatal` is called when the service cannot go on: start-up
    failed, or (supervised SGLang) the backend died."""
    service = Service(settings, backend, on_fatal=on_fatal)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
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
        description="Typed answers (noul, choice, score) about a state, read from a language model's first "
        "output token. Compatible with TypeSafe's Jev API and its official SDKs.",
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.service = service
    app.include_router(router)
    install_error_handlers(app, settings.retry_after)
    app.add_middleware(BodyDecoder, max_body_bytes=settings.max_body_bytes, retry_after=settings.retry_after)
    app.add_middleware(StatusMetricsMiddleware)
    app.add_middleware(RequestIdMiddleware)
    return app
