"""Talking to a Jev server: retries of overload and not-ready answers, the server's headers, models and settings.

Contract:
- 429, 503 and 529 are retried after `retry-after-ms` or `Retry-After` (1 s when absent, at most
  MAX_RETRY_WAIT_S a wait) for up to RETRY_DEADLINE_S; then the last answer stands.
- `connect` opens a client on `--url` with `--api-key` as a bearer token and reads `/v1/models`
  (required) and the answer settings of `/v1/limits` (None for a server that does not say them);
  a server that cannot be reached is RunRefused.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from evals.harness.runs import ANSWER_SETTINGS, RunRefused

RETRY_STATUSES = frozenset({429, 503, 529})
RETRY_DEADLINE_S = 1800.0
MAX_RETRY_WAIT_S = 60.0
REQUEST_TIMEOUT_S = 600.0


def retry_delay(headers: httpx.Headers) -> float:
    """Seconds to wait before retrying: `retry-after-ms`, else `Retry-After` in seconds, else 1; at most 60."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return min(max(float(headers[name]) * scale, 0.0), MAX_RETRY_WAIT_S)
        except (KeyError, ValueError):
            continue
    return 1.0


async def send_with_retry(
    send: Callable[[], Awaitable[httpx.Response]], deadline_s: float = RETRY_DEADLINE_S
) -> tuple[httpx.Response, int, float]:
    """The first response that is not 429/503/529 (or the last one past the deadline), attempts, its latency."""
    give_up_at = time.monotonic() + deadline_s
    attempts = 0
    while True:
        attempts += 1
        started = time.perf_counter()
        response = await send()
        latency = time.perf_counter() - started
        if response.status_code not in RETRY_STATUSES or time.monotonic() >= give_up_at:
            return response, attempts, latency
        await asyncio.sleep(retry_delay(response.headers))


async def post_answers(client: httpx.AsyncClient, request: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """The body of a 200 answer to `request` and its latency; ValueError naming any other status."""
    response, _, latency = await send_with_retry(lambda: client.post("/v1/systemone", json=request))
    if response.status_code != 200:
        raise ValueError(f"HTTP {response.status_code}: {response.text[:300]}")
    return response.json(), latency


def server_timing(headers: httpx.Headers) -> dict[str, float]:
    """`Server-Timing: prep;dur=1.2, prefill;dur=…` as {name: milliseconds}; unreadable entries skipped."""
    timing = {}
    for entry in headers.get("server-timing", "").split(","):
        name, _, rest = entry.strip().partition(";")
        for parameter in rest.split(";"):
            key, _, value = parameter.strip().partition("=")
            if key == "dur" and name:
                with contextlib.suppress(ValueError):
                    timing[name] = float(value)
    return timing


def thinking_headers(headers: httpx.Headers) -> dict[str, int]:
    """The thinking tier's `x-openjev-escalated` and `x-openjev-reasoning-tokens`, where sent."""
    found = {}
    for key, header in (("escalated", "x-openjev-escalated"), ("reasoning_tokens", "x-openjev-reasoning-tokens")):
        with contextlib.suppress(KeyError, ValueError):
            found[key] = int(headers[header])
    return found


async def fetch_answer_settings(client: httpx.AsyncClient) -> Any:
    """The server's answer settings (openjev's `/v1/limits`), or None where it does not say them."""
    response, _, _ = await send_with_retry(lambda: client.get("/v1/limits"))
    if response.status_code != 200:
        return None
    with contextlib.suppress(ValueError, AttributeError):
        return response.json().get(ANSWER_SETTINGS)
    return None


async def fetch_models(client: httpx.AsyncClient) -> Any:
    response, _, _ = await send_with_retry(lambda: client.get("/v1/models"))
    if response.status_code != 200:
        raise RunRefused(f"GET /v1/models answered {response.status_code}: {response.text[:300]}")
    return response.json()


@contextlib.asynccontextmanager
async def connect(args: argparse.Namespace) -> AsyncIterator[tuple[httpx.AsyncClient, Any, Any]]:
    """A client on `args.url`, the server's `/v1/models` and its answer settings (module doc)."""
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    async with httpx.AsyncClient(base_url=args.url, headers=headers, timeout=REQUEST_TIMEOUT_S) as client:
        try:
            models = await fetch_models(client)
            settings = await fetch_answer_settings(client)
        except httpx.TransportError as error:
            raise RunRefused(f"{args.url} cannot be reached: {error!r}") from error
        yield client, models, settings
