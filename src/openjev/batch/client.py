"""Asking any Jev server a file's rows: bounded concurrency, overload backed off, every answer kept.

Contract:
- At most `concurrency` requests in flight. 429, 503 and 529 are retried after `retry-after-ms` or
  `Retry-After` (1 s when absent, at most MAX_RETRY_WAIT_S a wait) until RETRY_DEADLINE_S has passed;
  then the last answer stands. A connection that fails stops the run (ServerUnreachable): what was
  answered is kept, and the same command resumes it.
- Each row is one `POST /v1/systemone` with the row's state and its one question under the id `q`.
- Every finished row is appended to the answers file as one JSON line the moment it finishes:
  `{"id", "answer"}` for a 200, `{"id", "error": {"status", "body"}}` for anything else. A run
  started again on the same file skips the rows that already have an answer (errors are asked
  again), so an interrupted run resumes where it stopped and loses nothing.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import httpx

from openjev.batch.rows import Row

RETRY_STATUSES = frozenset({429, 503, 529})
RETRY_DEADLINE_S = 1800.0
MAX_RETRY_WAIT_S = 60.0
REQUEST_TIMEOUT_S = 600.0
QUESTION_ID = "q"


class ServerUnreachable(RuntimeError):
    """The server could not be reached (or went away) during a run."""


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


def read_answers(path: Path) -> dict[str, dict[str, Any]]:
    """The last record of each id in an answers file (none: an empty mapping); a torn last line is skipped."""
    records: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return records
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "id" in record:
            records[str(record["id"])] = record
    return records


async def answer_rows(
    rows: Iterable[Row],
    *,
    url: str,
    answers_path: Path,
    api_key: str | None = None,
    model: str = "jev-latest",
    concurrency: int = 4,
    on_finished: Callable[[], None] = lambda: None,
) -> dict[str, dict[str, Any]]:
    """Ask every row without an answer in `answers_path`, appending each record as it finishes; all records."""
    done = {key for key, record in read_answers(answers_path).items() if "answer" in record}
    pending = [row for row in rows if row.id not in done]
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    slots = asyncio.Semaphore(concurrency)
    answers_path.parent.mkdir(parents=True, exist_ok=True)
    async with httpx.AsyncClient(
        base_url=url.rstrip("/"), headers=bearer(api_key), timeout=REQUEST_TIMEOUT_S, limits=limits
    ) as client:
        with answers_path.open("a", encoding="utf-8") as sink:

            async def ask(row: Row) -> None:
                async with slots:
                    body = request_for(row, model)
                    try:
                        response, _, latency = await send_with_retry(lambda: client.post("/v1/systemone", json=body))
                    except httpx.TransportError as error:
                        raise ServerUnreachable(f"{url}: {error!r}; run again to resume") from error
                sink.write(json.dumps(_record(row, response, latency), ensure_ascii=False) + "\n")
                sink.flush()
                on_finished()

            await asyncio.gather(*(ask(row) for row in pending))
    return read_answers(answers_path)


def _record(row: Row, response: httpx.Response, latency: float) -> dict[str, Any]:
    if response.status_code == 200:
        answer = response.json()["answers"][QUESTION_ID]
        return {"id": row.id, "answer": answer, "latency_s": round(latency, 4)}
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text[:2000]
    return {"id": row.id, "error": {"status": response.status_code, "body": body}}
