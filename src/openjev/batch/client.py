"""Asking any Jev server a file's rows: bounded concurrency, failures retried, every answer kept.

Contract:
- At most `concurrency` requests in flight. 408, 429, 5xx (not 501) and connection errors are retried
  by tenacity: after `retry-after-ms`, `Retry-After` (seconds or an HTTP date; at most
  MAX_RETRY_WAIT_S a wait) where the server sends one, else after an exponential backoff with jitter
  (0.5 s doubling to 30 s). A server that says when to come back (overload) is retried until
  RETRY_DEADLINE_S has passed; other failures at most MAX_FAILURES times. Then the last answer
  stands, or a connection still failing stops the run (ServerUnreachable): what was answered is kept,
  and the same command resumes it. Each retry is reported to `on_retry` with its reason (the status,
  or `connection`).
- Each row is one `POST /v1/systemone` with the row's state and its one question under the id `q`.
- Before the first row, the server is identified as it reports itself: the served model of
  `/health`, the answer settings of `/v1/limits` and, where it answers a question equal to a task's
  with that task unnamed (`tasks.match_questions`), the digest of the tasks it keeps (None where it
  does not say), with the requested model name. Its digest is `server` in every record; the answers
  file (`batch/answers_file.py`) keeps an answer only where the row's digest and this one are the ones
  it was made with.
- Every finished row is appended to the answers file as one JSON line the moment it finishes:
  `{"id", "line", "input", "server", "answer", "latency_s", "attempts"}` for a 200, `"error":
  {"status", "body"}` in place of `answer` for anything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_delay, wait_exponential_jitter

from openjev.batch.answers_file import Opened, kept_answers, read_answers
from openjev.batch.progress import Progress
from openjev.batch.rows import Row, digest_of

RETRY_DEADLINE_S = 1800.0
MAX_RETRY_WAIT_S = 60.0
MAX_FAILURES = 8
REQUEST_TIMEOUT_S = 600.0
QUESTION_ID = "q"
BACKOFF = wait_exponential_jitter(initial=0.5, max=30.0, jitter=0.5)


class ServerUnreachable(RuntimeError):
    """The server could not be reached (or went away) during a run."""


class _Retryable(Exception):
    def __init__(self, response: httpx.Response) -> None:
        self.response = response


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


def _reason(state: RetryCallState) -> str:
    error = state.outcome.exception() if state.outcome else None
    return str(error.response.status_code) if isinstance(error, _Retryable) else "connection"


async def send_with_retry(
    send: Callable[[], Awaitable[httpx.Response]],
    deadline_s: float = RETRY_DEADLINE_S,
    on_retry: Callable[[str], None] = lambda reason: None,
) -> tuple[httpx.Response, int, float]:
    """The first response that is not retried (module doc), or the last one; its attempts and latency.
    httpx.TransportError when the connection still fails after MAX_FAILURES tries."""
    failures, latency = 0, 0.0

    async def attempt() -> httpx.Response:
        nonlocal failures, latency
        started = time.perf_counter()
        try:
            response = await send()
        except httpx.TransportError:
            failures += 1
            raise
        latency = time.perf_counter() - started
        if retryable(response.status_code):
            failures += retry_delay(response.headers) is None
            raise _Retryable(response)
        return response

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        asked = retry_delay(error.response.headers) if isinstance(error, _Retryable) else None
        return BACKOFF(state) if asked is None else asked

    retrying = AsyncRetrying(
        retry=retry_if_exception_type((_Retryable, httpx.TransportError)),
        wait=wait,
        stop=stop_after_delay(deadline_s) | (lambda state: failures >= MAX_FAILURES),
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


async def post_with_retry(
    url: str, path: str, body: dict[str, Any], api_key: str | None, read_timeout_s: float = REQUEST_TIMEOUT_S
) -> httpx.Response:
    """One JSON POST to `url` + `path`, overload retried as every row is (module doc); ServerUnreachable
    when the server cannot be reached."""
    async with httpx.AsyncClient(base_url=url.rstrip("/"), headers=bearer(api_key), timeout=read_timeout_s) as client:
        try:
            response, _, _ = await send_with_retry(lambda: client.post(path, json=body))
        except httpx.TransportError as error:
            raise ServerUnreachable(f"{url}: {error!r}") from error
    return response


def request_for(row: Row, model: str) -> dict[str, Any]:
    """The `/v1/systemone` body that asks `row`'s question of its state."""
    return {"model": model, "state": row.state, "questions": {QUESTION_ID: row.question}}


async def server_identity(client: httpx.AsyncClient, model: str) -> dict[str, Any]:
    """The requested model, the served model (`/health`), the answer settings (`/v1/limits`) and, where
    the server answers a question with a task it matches unnamed, the tasks it keeps; as the server
    reports them, None for what it does not report. ServerUnreachable when it cannot be reached."""
    health, limits = [await _json_of(client, path) for path in ("/health", "/v1/limits")]
    tasks = limits.get("tasks") if isinstance(limits.get("tasks"), dict) else {}
    return {
        "model": model,
        "served_model": health.get("model"),
        "answer_settings": limits.get("answer_settings"),
        "matched_tasks": tasks.get("ids_sha256") if tasks.get("match_questions") else None,
    }


async def _json_of(client: httpx.AsyncClient, path: str) -> dict[str, Any]:
    """The JSON object at `path` ({} for an answer that is not one)."""
    try:
        response, _, _ = await send_with_retry(lambda: client.get(path))
    except httpx.TransportError as error:
        raise ServerUnreachable(f"{client.base_url}: {error!r}") from error
    with contextlib.suppress(ValueError):
        value = response.json()
        if isinstance(value, dict):
            return value
    return {}


async def answer_rows(
    rows: list[Row],
    *,
    url: str,
    opened: Opened,
    answers_path: Path,
    api_key: str | None = None,
    model: str = "jev-latest",
    concurrency: int = 4,
    progress: Progress | None = None,
) -> dict[str, dict[str, Any]]:
    """Ask every row whose answer in `opened` does not stand (`answers_file.kept_answers`), appending each
    record to `answers_path` as it finishes; all records of the file."""
    progress = progress or Progress(len(rows))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    slots = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(
        base_url=url.rstrip("/"), headers=bearer(api_key), timeout=REQUEST_TIMEOUT_S, limits=limits
    ) as client:
        server = digest_of(await server_identity(client, model))
        kept, changed, other_server = kept_answers(opened.records, rows, server)
        progress.started(len(kept), changed=changed, other_server=other_server, lost=opened.lost)
        with answers_path.open("a", encoding="utf-8") as sink:

            async def ask(row: Row) -> None:
                async with slots:
                    body = request_for(row, model)
                    try:
                        response, attempts, latency = await send_with_retry(
                            lambda: client.post("/v1/systemone", json=body), on_retry=progress.retried
                        )
                    except httpx.TransportError as error:
                        raise ServerUnreachable(f"{url}: {error!r}") from error
                record = {**_record(row, response, latency), "server": server, "attempts": attempts}
                sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                sink.flush()
                progress.finished(record)

            tasks = [asyncio.ensure_future(ask(row)) for row in rows if row.id not in kept]
            try:
                await asyncio.gather(*tasks)
            finally:
                # One row that stops the run stops the others before the file closes under them.
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
    return read_answers(answers_path)


def _record(row: Row, response: httpx.Response, latency: float) -> dict[str, Any]:
    named = {"id": row.id, "line": row.line, "input": row.digest}
    if response.status_code == 200:
        answer = response.json()["answers"][QUESTION_ID]
        return {**named, "answer": answer, "latency_s": round(latency, 4)}
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text[:2000]
    return {**named, "error": {"status": response.status_code, "body": body}}
