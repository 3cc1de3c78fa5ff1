"""Talking to a Jev server: retries of overload and not-ready answers, the server's headers, models and settings.

Contract:
- 408, 429, 5xx and dropped connections are retried as `openjev eval` retries them
  (`openjev.batch.client`): after `retry-after-ms` or `Retry-After` where sent, else an exponential
  backoff with jitter, for up to RETRY_DEADLINE_S; then the last answer stands.
- `connect` opens a client on `--url` with `--api-key` as a bearer token and reads the server's
  `/v1/models` and the answer settings of its `/v1/limits`. A server that is not openjev (SGLang's
  own `/v1/systemone`, TypeSafe's API) may serve neither in openjev's shape: what could not be read
  is None, and `unread` names each such endpoint with the reason (run.json `server_unread`), so the
  run goes on. A server that cannot be reached, or that refuses the key (401/403), is RunRefused:
  nothing it serves would answer.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx

from evals.harness.runs import ANSWER_SETTINGS, RunRefused
from openjev.batch.client import (
    MAX_RETRY_WAIT_S,
    REQUEST_TIMEOUT_S,
    RETRY_DEADLINE_S,
    retry_delay,
    send_with_retry,
)

__all__ = ["MAX_RETRY_WAIT_S", "RETRY_DEADLINE_S", "retry_delay", "send_with_retry"]

AUTH_STATUSES = frozenset({401, 403})


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


async def fetch_json(client: httpx.AsyncClient, path: str) -> tuple[Any, str | None]:
    """GET `path`'s JSON body, or None and why it could not be read (a status other than 200, not JSON);
    RunRefused when the server refuses the key."""
    response, _, _ = await send_with_retry(lambda: client.get(path))
    if response.status_code in AUTH_STATUSES:
        raise RunRefused(f"GET {path} answered {response.status_code}: {response.text[:300]}")
    if response.status_code != 200:
        return None, f"HTTP {response.status_code}: {response.text[:200]}"
    try:
        return response.json(), None
    except ValueError:
        return None, f"not JSON: {response.text[:200]}"


async def fetch_answer_settings(client: httpx.AsyncClient) -> tuple[Any, str | None]:
    """The server's answer settings (openjev's `/v1/limits`), or None and why it does not say them."""
    limits, unread = await fetch_json(client, "/v1/limits")
    if unread is not None:
        return None, unread
    if not isinstance(limits, dict) or ANSWER_SETTINGS not in limits:
        return None, f"no `{ANSWER_SETTINGS}` in its answer"
    return limits[ANSWER_SETTINGS], None


async def fetch_models(client: httpx.AsyncClient) -> tuple[Any, str | None]:
    """The server's `/v1/models` as served, and why it is not openjev's shape (a `models` list), if it is not."""
    models, unread = await fetch_json(client, "/v1/models")
    if unread is None and not (isinstance(models, dict) and isinstance(models.get("models"), list)):
        unread = "no `models` list in its answer (kept as served)"
    return models, unread


@contextlib.asynccontextmanager
async def connect(args: argparse.Namespace) -> AsyncIterator[tuple[httpx.AsyncClient, Any, Any, dict[str, str]]]:
    """A client on `args.url`, the server's `/v1/models`, its answer settings and what could not be read
    ({endpoint: why}), as the module doc says."""
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    async with httpx.AsyncClient(base_url=args.url, headers=headers, timeout=REQUEST_TIMEOUT_S) as client:
        try:
            models, models_unread = await fetch_models(client)
            settings, settings_unread = await fetch_answer_settings(client)
        except httpx.TransportError as error:
            raise RunRefused(f"{args.url} cannot be reached: {error!r}") from error
        unread = {path: why for path, why in (("/v1/models", models_unread), ("/v1/limits", settings_unread)) if why}
        for path, why in unread.items():
            print(f"note: {args.url}{path} not read in openjev's shape: {why}", file=sys.stderr)
        yield client, models, settings, unread
