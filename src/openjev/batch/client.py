"""Sending to any Jev server: failures retried with floored, jittered waits, and a run stopped when the
server is plainly down rather than slow.

Contract:
- A URL must name its scheme and host (`http://host:port`); one that does not is a BadUrl at once,
  never retried. No message shows a secret: `masked` writes the key and a URL's password as MASK.
- 408, 429, 5xx (not 501) and connection errors are retried by tenacity: after `retry-after-ms`,
  `Retry-After` (seconds or an HTTP date; at most MAX_RETRY_WAIT_S a wait) where the server sends one,
  else after an exponential backoff (0.5 s doubling to 30 s). Every wait is at least MIN_WAIT_S and
  stretched by a random share of up to JITTER, so `Retry-After: 0` never spins and clients that
  failed together do not come back together. A server that says when to come back (openjev's 529
  overload, or its 503 while the backend starts: any retried status with a wait named) is retried
  until RETRY_DEADLINE_S has passed, never counted as a failure; other failures (a 503 naming no
  wait included) at most `max_retries` times after the first try. Then the last answer stands, or a
  connection still failing raises httpx.TransportError.
- A `Breaker` shared by a run counts failures in a row over all its requests (a failure: a
  connection error, or a retried status with no Retry-After); any other answer resets it. At
  `max_failures` the run stops (ServerDown): a server answering 500 to everything, or gone, ends the
  run in seconds instead of retrying each row for minutes.
- A `Pacer` starts at most `rps` requests a second, retries included.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_delay, wait_exponential

RETRY_DEADLINE_S = 1800.0
MAX_RETRY_WAIT_S = 60.0
MIN_WAIT_S = 0.5
JITTER = 0.25
MAX_RETRIES = 8
MAX_FAILURES_IN_A_ROW = 10
REQUEST_TIMEOUT_S = 600.0
BACKOFF = wait_exponential(multiplier=0.5, max=30.0)
MASK = "***"


class ServerUnreachable(RuntimeError):
    """The server could not be reached (or went away) during a run."""


class ServerDown(ServerUnreachable):
    """Failures in a row reached the breaker's limit: the server is taken as down."""


class KeyRefused(RuntimeError):
    """The server refused the key (401 or 403) before anything was sent: a usage error, not a fault."""


class BadUrl(ValueError):
    """A server URL that cannot be asked (no scheme or no host)."""


class _Retryable(Exception):
    def __init__(self, response: httpx.Response) -> None:
        self.response = response


def masked(text: str, url: str | None, api_key: str | None) -> str:
    """`text` with `api_key` and the password of `url` (with or without its scheme) shown as MASK."""
    password = urlsplit(url if "://" in url else f"http://{url}").password if url else None
    for secret in (api_key, password):
        if secret:
            text = text.replace(secret, MASK)
    return text


def checked_url(url: str) -> str:
    """`url` without a trailing slash; BadUrl naming what is missing (its password masked)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        guess = f"; did you mean http://{url}?" if "://" not in url else ""
        raise BadUrl(masked(f"--url {url!r} is not an http:// or https:// URL with a host{guess}", url, None))
    return url.rstrip("/")


def retryable(status: int) -> bool:
    return status in (408, 429) or (status >= 500 and status != 501)


def retry_delay(headers: httpx.Headers) -> float | None:
    """Seconds the server asks to wait (`retry-after-ms`, else `Retry-After` in seconds or as an HTTP
    date), at most MAX_RETRY_WAIT_S; None when it asks nothing."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        with contextlib.suppress(ValueError):
            return min(max(float(value) * scale, 0.0), MAX_RETRY_WAIT_S)
        with contextlib.suppress(TypeError, ValueError):
            when = email.utils.parsedate_to_datetime(value).timestamp()
            return min(max(when - time.time(), 0.0), MAX_RETRY_WAIT_S)
    return None


def jittered(seconds: float) -> float:
    """`seconds`, at least MIN_WAIT_S, times 1 + U(0, JITTER)."""
    return max(seconds, MIN_WAIT_S) * (1.0 + random.uniform(0.0, JITTER))


@dataclass
class Breaker:
    """Failures in a row over every request of a run (module doc); `last` says what the last one was."""

    limit: int = MAX_FAILURES_IN_A_ROW
    in_a_row: int = 0
    last: str = ""

    def failed(self, what: str) -> None:
        self.in_a_row, self.last = self.in_a_row + 1, what
        if self.in_a_row >= self.limit:
            raise ServerDown(f"stopped after {self.in_a_row} failures in a row (the last: {what})")

    def answered(self) -> None:
        self.in_a_row = 0


@dataclass
class Pacer:
    """At most `rps` request starts a second (None: no limit)."""

    rps: float | None = None
    next_at: float = 0.0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def wait(self) -> None:
        if self.rps is None:
            return
        async with self.lock:
            now = time.monotonic()
            self.next_at = max(self.next_at, now) + 1.0 / self.rps
            await asyncio.sleep(max(self.next_at - 1.0 / self.rps - now, 0.0))


@dataclass
class RetryPolicy:
    """How a run sends: its retries, its breaker and its pace (module doc)."""

    max_retries: int = MAX_RETRIES
    breaker: Breaker = field(default_factory=Breaker)
    pacer: Pacer = field(default_factory=Pacer)
    deadline_s: float = RETRY_DEADLINE_S


def _reason(state: RetryCallState) -> str:
    error = state.outcome.exception() if state.outcome else None
    return str(error.response.status_code) if isinstance(error, _Retryable) else "connection"


def _wait(state: RetryCallState) -> float:
    error = state.outcome.exception() if state.outcome else None
    asked = retry_delay(error.response.headers) if isinstance(error, _Retryable) else None
    return jittered(BACKOFF(state) if asked is None else asked)


async def send_with_retry(
    send: Callable[[], Awaitable[httpx.Response]],
    deadline_s: float = RETRY_DEADLINE_S,
    on_retry: Callable[[str], None] = lambda reason: None,
    policy: RetryPolicy | None = None,
) -> tuple[httpx.Response, int, float]:
    """The first response that is not retried (module doc), or the last one; its attempts and latency.
    httpx.TransportError when the connection still fails after the retries; ServerDown from the breaker."""
    policy = policy or RetryPolicy(deadline_s=deadline_s, breaker=Breaker(limit=1 << 30))
    failures, latency = 0, 0.0

    async def attempt() -> httpx.Response:
        nonlocal failures, latency
        await policy.pacer.wait()
        started = time.perf_counter()
        try:
            response = await send()
        except httpx.TransportError as error:
            failures += 1
            policy.breaker.failed(f"connection: {error!r}")
            raise
        latency = time.perf_counter() - started
        if retryable(response.status_code):
            if retry_delay(response.headers) is None:
                failures += 1
                policy.breaker.failed(f"HTTP {response.status_code} {response.text[:200]}")
            raise _Retryable(response)
        policy.breaker.answered()
        return response

    retrying = AsyncRetrying(
        retry=retry_if_exception_type((_Retryable, httpx.TransportError)),
        wait=_wait,
        stop=stop_after_delay(policy.deadline_s) | (lambda state: failures > policy.max_retries),
        before_sleep=lambda state: on_retry(_reason(state)),
        reraise=True,
    )
    try:
        response = await retrying(attempt)
    except _Retryable as error:
        response = error.response
    return response, retrying.statistics.get("attempt_number", 1), latency


def bearer(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


@dataclass(frozen=True)
class Sending:
    """A run's sending flags: `--max-retries`, `--max-failures`, `--rps`, `--timeout` (module doc)."""

    max_retries: int = MAX_RETRIES
    max_failures: int = MAX_FAILURES_IN_A_ROW
    rps: float | None = None
    timeout_s: float = REQUEST_TIMEOUT_S

    def policy(self) -> RetryPolicy:
        """A fresh policy for one run: its own breaker and pacer."""
        return RetryPolicy(self.max_retries, Breaker(limit=self.max_failures), Pacer(self.rps))
