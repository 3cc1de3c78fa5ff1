"""What a route depends on, stated in its signature: the service, a ready runtime, and the bearer scheme
that documents the API key (`ApiKeyMiddleware` checks it on the headers, before the body is read)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPBearer

from openjev.service import Runtime, Service


async def get_service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]


async def ready_runtime(service: ServiceDep) -> Runtime:
    return service.runtime()


RuntimeDep = Annotated[Runtime, Depends(ready_runtime)]
AUTHORIZED = [
    Security(
        HTTPBearer(
            auto_error=False,
            description="`Authorization: Bearer <key>` when the server sets OPENJEV_API_KEY; ignored otherwise.",
        )
    )
]
