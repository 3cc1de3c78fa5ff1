"""Asking any Jev server a file's rows: the server checked first, bounded concurrency, every answer kept.

Contract:
- Before the first row, `GET /health` (once; only a server that says when to come back is waited
  for, and not one whose status is `failed`): no answer, or a failure status, stops the run naming
  the URL; a 404 under a URL ending in
  `/v1` says to drop it (openjev asks `/v1/systemone` under the URL itself). A server without
  `/health` (404 elsewhere) is asked on.
- Then the key, with one authorized `GET /v1/limits` (openjev guards it with OPENJEV_API_KEY): a 401
  or 403 there is KeyRefused, nothing sent; any other answer (a server without `/v1/limits` too) is
  asked on. A row answered 401 or 403 later (the key revoked mid-run) stops the run as the breaker
  does (ServerDown), with no record for that row: every other row would be refused the same way, and
  the resumed run asks it again.
- The server is identified as it reports itself: the served model of `/health`, the answer settings
  of `/v1/limits` and, where it answers a question equal to a task's with that task unnamed
  (`tasks.match_questions`), the digest of the tasks it keeps (None where it does not say), with the
  requested model name. Its digest is `server` in every record; the answers file
  (`batch/answers_file.py`) keeps an answer only where the row's digest and this one are the ones it
  was made with.
- At most `concurrency` requests in flight; each row is one `POST /v1/systemone` with the row's state
  and its one question under the id `q`, sent as `client.py` sends (retries, breaker, pace). A
  connection still failing, or the breaker, stops the run (ServerUnreachable): what was answered is
  kept, and the same command resumes it. Each retry is reported to `on_retry` with its reason.
- Every finished row is appended to the answers file as one JSON line the moment it finishes:
  `{"id", "line", "input", "server", "answer", "latency_s", "attempts"}` for a 200 holding the
  question's answer, `"error": {"status", "body"}` in place of `answer` for anything else (a 200
  that is no Jev answer, from another service behind the URL, with the body "not a Jev answer: ...").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import httpx

from openjev.batch.answers_file import Opened, kept_answers, read_answers
from openjev.batch.client import (
    KeyRefused,
    RetryPolicy,
    Sending,
    ServerDown,
    ServerUnreachable,
    bearer,
    send_with_retry,
)
from openjev.batch.progress import Progress
from openjev.batch.rows import Row, digest_of

QUESTION_ID = "q"
#: The statuses that say the key is wrong, missing or not allowed.
KEY_STATUSES = (401, 403)
LIMITS_PATH = "/v1/limits"


def request_for(row: Row, model: str) -> dict[str, Any]:
    """The `/v1/systemone` body that asks `row`'s question of its state."""
    return {"model": model, "state": row.state, "questions": {QUESTION_ID: row.question}}


async def checked_health(client: httpx.AsyncClient, policy: RetryPolicy) -> dict[str, Any]:
    """`/health`'s JSON object ({} from a server without one); ServerUnreachable as the module doc says."""
    url = str(client.base_url).rstrip("/")
    once = RetryPolicy(0, policy.breaker, policy.pacer, policy.deadline_s)

    async def probe() -> httpx.Response:
        response = await client.get("/health")
        if response.status_code == 503 and _object(response).get("status") == "failed":
            # Its Retry-After is not a promise: a server that could not start will not start by waiting.
            raise ServerUnreachable(f"GET {url}/health: the server could not start: {response.text[:200]}")
        return response

    try:
        response, _, _ = await send_with_retry(probe, policy=once)
    except httpx.TransportError as error:
        raise ServerUnreachable(f"no server answers at {url} (GET {url}/health: {error!r})") from None
    if response.status_code == 404 and url.endswith("/v1"):
        base = url.removesuffix("/v1")
        raise ServerUnreachable(
            f"GET {url}/health answered 404: openjev adds /v1/systemone to the URL itself, so drop the /v1: "
            f"--url {base}"
        )
    if response.status_code >= 500:
        raise ServerUnreachable(f"GET {url}/health answered {response.status_code}: {response.text[:200]}")
    return _object(response)


def key_refusal(client: httpx.AsyncClient, request: str, status: int) -> str:
    """What the user is told when the server refuses the key (never the key itself)."""
    url = str(client.base_url).rstrip("/")
    given = "" if "authorization" in client.headers else "no key was given; "
    return f"{url} refused the key ({request} answered {status}): {given}pass the one it takes with --api-key"


async def checked_key(client: httpx.AsyncClient, policy: RetryPolicy) -> dict[str, Any]:
    """`/v1/limits`'s JSON object ({} from a server that does not answer it); KeyRefused on 401 or 403."""
    once = RetryPolicy(0, policy.breaker, policy.pacer, policy.deadline_s)
    try:
        response = (await send_with_retry(lambda: client.get(LIMITS_PATH), policy=once))[0]
    except httpx.TransportError:
        return {}
    if response.status_code in KEY_STATUSES:
        raise KeyRefused(key_refusal(client, f"GET {LIMITS_PATH}", response.status_code))
    return _object(response)


async def server_identity(client: httpx.AsyncClient, model: str, policy: RetryPolicy) -> dict[str, Any]:
    """The requested model, the served model (`/health`, checked first), the answer settings
    (`/v1/limits`) and, where the server answers a question with a task it matches unnamed, the tasks it
    keeps; as the server reports them, None for what it does not report."""
    health = await checked_health(client, policy)
    limits = await checked_key(client, policy)
    tasks = limits.get("tasks") if isinstance(limits.get("tasks"), dict) else {}
    return {
        "model": model,
        "served_model": health.get("model"),
        "answer_settings": limits.get("answer_settings"),
        "matched_tasks": tasks.get("ids_sha256") if tasks.get("match_questions") else None,
    }


def _object(response: httpx.Response) -> dict[str, Any]:
    """The response's JSON object ({} for an answer that is not one)."""
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
    sending: Sending | None = None,
) -> dict[str, dict[str, Any]]:
    """Ask every row whose answer in `opened` does not stand (`answers_file.kept_answers`), appending each
    record to `answers_path` as it finishes; all records of the file."""
    progress = progress or Progress(len(rows))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    sending = sending or Sending()
    slots, policy = asyncio.Semaphore(concurrency), sending.policy()
    async with httpx.AsyncClient(
        base_url=url.rstrip("/"), headers=bearer(api_key), timeout=sending.timeout_s, limits=limits
    ) as client:
        server = digest_of(await server_identity(client, model, policy))
        kept, changed, other_server = kept_answers(opened.records, rows, server)
        progress.started(len(kept), changed=changed, other_server=other_server, lost=opened.lost)
        with answers_path.open("a", encoding="utf-8") as sink:

            async def ask(row: Row) -> None:
                async with slots:
                    body = request_for(row, model)
                    try:
                        response, attempts, latency = await send_with_retry(
                            lambda: client.post("/v1/systemone", json=body), on_retry=progress.retried, policy=policy
                        )
                    except httpx.TransportError as error:
                        raise ServerUnreachable(f"{url}: {error!r}") from error
                    except ServerDown as error:
                        raise ServerDown(f"{url}: {error}") from None
                if response.status_code in KEY_STATUSES:
                    raise ServerDown(key_refusal(client, "POST /v1/systemone", response.status_code))
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
        try:
            answer = response.json()["answers"][QUESTION_ID]
        except (ValueError, KeyError, TypeError):
            # Another service behind the URL: the row is unanswered, and says what came back.
            return {**named, "error": {"status": 200, "body": f"not a Jev answer: {response.text[:2000]}"}}
        return {**named, "answer": answer, "latency_s": round(latency, 4)}
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text[:2000]
    return {**named, "error": {"status": response.status_code, "body": body}}
