"""The fake's routes other than `/generate`, as 0.5.19 serves them: `/health` (503 while the Python
frontend starts), `/model_info`, `/server_info` (the scheduler's facts on the Python frontend only),
`/v1/models`, `/abort_request` (an exact in-flight rid only) and `/flush_cache` (refused while requests
are in flight), each behind `--api-key` on the Python frontend but the health probes.

`InfoRoutes` is a part of `FakeSGLang` (server.py), whose fields and state it reads.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from tests.fake_sglang.hidden import server_args
from tests.fake_sglang.meta import model_card
from tests.fake_sglang.rules import max_req_input_len


class InfoRoutes:
    def _unauthorized(self, request: Request) -> Response | None:
        # The Python frontend checks --api-key on every route but the health probes; the Rust one on none.
        expected = f"Bearer {self.api_key}"
        if self.api_key and not self.rust_frontend and request.headers.get("authorization") != expected:
            return JSONResponse({"error": "Unauthorized"}, status_code=401)
        return None

    def _starting(self) -> bool:
        return time.monotonic() < self._ready_at

    async def _health(self, request: Request) -> Response:
        self.health_calls += 1
        return Response(status_code=503 if self._starting() and not self.rust_frontend else 200)

    async def _model_info(self, request: Request) -> Response:
        info = {
            "model_path": self.model_path,
            "served_model_name": self.served_model_name,
            "tokenizer_path": self.tokenizer_path,
            "is_generation": True,
            "has_image_understanding": self.vision,
        }
        return self._unauthorized(request) or JSONResponse(info)

    async def _server_info(self, request: Request) -> Response:
        info: dict[str, Any] = {"max_total_num_tokens": self.max_total_num_tokens, "version": "0.5.19"}
        if not self.rust_frontend:  # the server args, `dp_size` among them
            info |= {"dp_size": self.dp_size, **server_args(self.hidden_states_mode)}
        if not self.rust_frontend and self.report_limits:  # the scheduler's facts, not relayed by Rust
            info |= {
                "context_length": self.context_length,
                "revision": self.revision,
                "max_req_input_len": max_req_input_len(self.context_length, self.max_total_num_tokens),
            }
        return self._unauthorized(request) or JSONResponse(info)

    async def _models(self, request: Request) -> Response:
        model = model_card(self.served_model_name, self.context_length if self.report_limits else None)
        return self._unauthorized(request) or JSONResponse({"object": "list", "data": [model]})

    async def _abort(self, request: Request) -> Response:
        body = await self._read(request)
        if isinstance(body, Response):
            return body
        rid = body.get("rid") or ""
        # 0.5.19's TokenizerManager drops an abort whose rid is not exactly an in-flight one.
        for live_rid, event in list(self._in_flight.items()):
            if body.get("abort_all") or live_rid == rid:
                self.aborted.append(live_rid)
                event.set()
        return Response(status_code=200)

    async def _flush(self, request: Request) -> Response:
        denied = self._unauthorized(request)
        if denied:
            return denied
        if self._in_flight:
            return PlainTextResponse("Flush cache failed.\n", status_code=400)  # the reason goes to its log only
        self._caches.clear()
        return PlainTextResponse("Cache flushed.\n")
