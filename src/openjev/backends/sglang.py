"""SGLang as a backend: one `/generate` call per readout, over pooled keep-alive HTTP.

Every call has the same shape (SGLang's native `/generate`, `GenerateReqInput`):

    {"rid", "input_ids", "sampling_params": {"max_new_tokens": 1, "temperature": 0},
     "return_logprob": true, "logprob_start_len": -1, "token_ids_logprob": [label ids]}

- `token_ids_logprob` is never empty, so any two of our calls can share a batch without the
  mixed-batch scheduler crash (SGLang #34719).
- `logprob_start_len = -1` asks for output logprobs only and keeps full radix-prefix reuse.
- `temperature = 0` returns the raw log-softmax; openjev applies its own temperature afterwards.
- The label logprobs are `meta_info.output_token_ids_logprobs[0]`, one `[logprob, id, text]` per
  requested id, in request order.
- A cancelled call closes its connection (which aborts it on the Rust frontend) and posts
  `/abort_request` with its rid (the Python frontend's way); neither may leave work running.

Readiness: `/health` must answer 200, then one real generation must succeed (the Rust frontend's
`/health` has no "starting" state, so a 200 alone does not prove the warm-up is done).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson

from openjev.backends.base import (
    Backend,
    BackendError,
    BackendHealth,
    BackendTimeout,
    BackendUnavailable,
    LabelLogprobs,
    ReadoutCall,
)
from openjev.config import Settings

log = logging.getLogger("openjev.sglang")

READOUT_SAMPLING_PARAMS = {"max_new_tokens": 1, "temperature": 0}
_ABORT_TIMEOUT = 2.0
_PROBE_INTERVAL = 0.5
_CONNECTIONS_PER_POOL = 8
_JSON_HEADERS = {"content-type": "application/json"}


def client_options(settings: Settings) -> dict[str, Any]:
    """The `SGLangBackend` keyword arguments that come from settings (connected or supervised)."""
    return {
        "api_key": settings.backend_api_key.get_secret_value() if settings.backend_api_key else None,
        "request_timeout": settings.request_timeout,
        "startup_timeout": settings.backend_startup_timeout,
        "max_connections": settings.max_concurrent_branches,
    }


def generate_payload(call: ReadoutCall) -> dict[str, Any]:
    return {
        "rid": call.rid,
        "input_ids": list(call.input_ids),
        "sampling_params": READOUT_SAMPLING_PARAMS,
        "return_logprob": True,
        "logprob_start_len": -1,
        "token_ids_logprob": list(call.label_token_ids),
    }


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error, str):
            return error
        if isinstance(body.get("message"), str):
            return body["message"]
    return str(body)[:500]


def parse_label_logprobs(body: Any, call: ReadoutCall) -> LabelLogprobs:
    """Read the requested ids' logprobs at the first generated position."""
    try:
        meta = body["meta_info"]
        finish = meta.get("finish_reason") or {}
        if isinstance(finish, dict) and finish.get("type") == "abort":
            raise BackendError(f"SGLang aborted the request: {finish.get('message') or 'no reason given'}")
        position = meta["output_token_ids_logprobs"][0]
        # SGLang's Rust frontend sends NaN as null; a null logprob means the model is broken, not "impossible".
        if any(entry[0] is None for entry in position):
            raise BackendError("SGLang returned null label logprobs (NaN in the model output)")
        by_id = {int(token_id): float(logprob) for logprob, token_id, *_ in position}
        logprobs = tuple(by_id[token_id] for token_id in call.label_token_ids)
        prompt_tokens = int(meta.get("prompt_tokens", len(call.input_ids)))
        cached = meta.get("cached_tokens")
    except BackendError:
        raise
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise BackendError(f"SGLang's /generate answer lacks the label logprobs ({error!r})") from error
    return LabelLogprobs(logprobs, prompt_tokens, None if cached is None else int(cached))


class SGLangBackend(Backend):
    kind = "sglang"

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        request_timeout: float = 120.0,
        startup_timeout: float = 1800.0,
        max_connections: int = 64,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self.startup_timeout = startup_timeout
        # httpcore walks every pooled connection on each request, so one pool of 64 costs O(64) per
        # call; readouts are spread over small pools instead (measured: see benchmarks/sidecar_overhead.py).
        pool_size = min(max_connections, _CONNECTIONS_PER_POOL)
        self._pools = [
            httpx.AsyncClient(
                base_url=self.base_url,
                headers=headers,
                timeout=httpx.Timeout(request_timeout, connect=10.0),
                limits=httpx.Limits(max_connections=pool_size, max_keepalive_connections=pool_size),
            )
            for _ in range(-(-max_connections // pool_size))
        ]
        self._next_pool = itertools.cycle(self._pools)
        self._client = self._pools[0]
        self.model_info: dict[str, Any] = {}
        self._context_length: int | None = None

    # -- readout ----------------------------------------------------------------------------------

    async def readout(self, call: ReadoutCall) -> LabelLogprobs:
        try:
            # orjson: a 24k-id payload encodes in about 1 ms instead of about 20 ms with the json module.
            response = await next(self._next_pool).post(
                "/generate", content=orjson.dumps(generate_payload(call)), headers=_JSON_HEADERS
            )
        except asyncio.CancelledError:
            await self._abort(call.rid)
            raise
        except httpx.TimeoutException as error:
            await self._abort(call.rid)
            raise BackendTimeout(f"SGLang did not answer in time ({type(error).__name__})") from error
        except httpx.TransportError as error:
            raise BackendUnavailable(f"SGLang is unreachable at {self.base_url}: {error!r}") from error
        if response.status_code == 503:
            raise BackendUnavailable(f"SGLang is not accepting work: {_error_message(response)}")
        if response.status_code != 200:
            raise BackendError(f"SGLang answered {response.status_code}: {_error_message(response)}")
        try:
            body = orjson.loads(response.content)
        except orjson.JSONDecodeError as error:
            raise BackendError("SGLang answered with a body that is not JSON") from error
        return parse_label_logprobs(body, call)

    async def _abort(self, rid: str) -> None:
        # Best effort: the Rust frontend has no /abort_request (closing the connection aborted the
        # call already) and a dead server cannot be reached; neither may delay the cancellation.
        with contextlib.suppress(Exception):
            await self._client.post("/abort_request", json={"rid": rid}, timeout=_ABORT_TIMEOUT)

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def context_length(self) -> int | None:
        return self._context_length

    @property
    def tokenizer_dir(self) -> Path | None:
        path = self.model_info.get("tokenizer_path")
        if isinstance(path, str) and Path(path).is_dir():
            return Path(path)
        return None

    async def start(self) -> None:
        """Wait until SGLang is really ready, then read its model facts."""
        started = time.monotonic()
        deadline = started + self.startup_timeout
        while True:
            try:
                if await self._health_ok():
                    # One real generation proves readiness on both frontends; it carries an id list too.
                    await self.readout(ReadoutCall(uuid.uuid4().hex, [0], [0]))
                    break
            except BackendError as error:
                log.debug("SGLang not ready yet: %s", error)
            if time.monotonic() > deadline:
                raise BackendUnavailable(f"SGLang at {self.base_url} was not ready within {self.startup_timeout:g}s")
            await asyncio.sleep(_PROBE_INTERVAL)
        await self._read_model_facts()
        log.info("SGLang at %s is ready (%.1fs)", self.base_url, time.monotonic() - started)

    async def _health_ok(self) -> bool:
        try:
            response = await self._client.get("/health", timeout=5.0)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def _read_model_facts(self) -> None:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            response = await self._client.get("/model_info", timeout=10.0)
            if response.status_code == 200 and isinstance(response.json(), dict):
                self.model_info = response.json()
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
            response = await self._client.get("/v1/models", timeout=10.0)
            length = response.json()["data"][0].get("max_model_len")
            if isinstance(length, int) and length > 0:
                self._context_length = length

    async def health(self) -> BackendHealth:
        ok = await self._health_ok()
        return BackendHealth(
            ready=ok,
            detail={
                "url": self.base_url,
                "status": "ok" if ok else "unavailable",
                "model": self.model_info.get("served_model_name"),
                "context_length": self._context_length,
            },
        )

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()
