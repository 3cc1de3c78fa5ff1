"""Standard JSON only: NaN, Infinity and numbers that overflow are a 422 `json_invalid`.

Python's parser accepts them, and a non-finite number in, say, a score level would otherwise come
back in `legend`, which JSON cannot carry. Routes use `StrictJSONRoute` to parse bodies this way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute


def _refuse_constant(token: str) -> Any:
    raise json.JSONDecodeError(f"{token} is not valid JSON", token, 0)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise json.JSONDecodeError(f"{text} overflows a JSON number", text, 0)
    return value


def loads_strict(data: bytes | str) -> Any:
    return json.loads(data, parse_constant=_refuse_constant, parse_float=_finite_float)


class StrictJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads_strict(await self.body())
        return self._json


class StrictJSONRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict
