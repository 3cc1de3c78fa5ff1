"""`openjev tasks fit`: the fit posted as a job, its progress shown, and the server's own answer.

`GET /health` first, so a server that is down or misaddressed is said at once (`asking.checked_health`),
and the key checked (`asking.checked_key`: KeyRefused on a 401 or 403, before the fit is posted);
then `POST /v1/tasks?background=true` (429/503/529 backed off as every request is, `batch/client.py`),
then `GET /v1/tasks/fits/{id}` every `POLL_SECONDS` with a progress bar on stderr until the job ends:
its task, or the error response it ended in (a 422 naming the field). A body the server refuses
before reading it can reach the client as a broken connection rather than the 413; then the server's
`/v1/limits` says what its limit is, and that is what the command prints.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from openjev.batch.asking import checked_health, checked_key
from openjev.batch.client import RetryPolicy, ServerUnreachable, bearer, send_with_retry
from openjev.endpoints import FITS_PATH, TASKS_PATH

POLL_SECONDS = 1.0
#: One poll or post; the fit itself runs as long as it needs on the server.
CALL_TIMEOUT = 300.0


async def _too_large(client: httpx.AsyncClient, size: int) -> tuple[int, str] | None:
    """The 413 the server meant, from its own limits, when the body is over them."""
    try:
        limit = (await client.get("/v1/limits")).json()["max_body_bytes"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None
    if size <= int(limit):
        return None
    return 413, f"the server takes request bodies of at most {limit} bytes (its /v1/limits); this one is {size} bytes"


async def _follow(client: httpx.AsyncClient, job: dict[str, Any]) -> dict[str, Any]:
    columns = (TextColumn("fitting {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        bar = progress.add_task(job["id"], total=None)
        path = f"{FITS_PATH}/{job['id']}"
        while job["status"] == "running":
            await asyncio.sleep(POLL_SECONDS)
            response, _, _ = await send_with_retry(lambda: client.get(path))
            response.raise_for_status()
            job = response.json()
            done, planned = job["progress"]["readouts_done"], job["progress"]["readouts_planned"]
            progress.update(bar, completed=done, total=planned or None)
    return job


async def fit(url: str, body: dict[str, Any], api_key: str | None) -> tuple[int, Any]:
    """(status, the task or the server's error body) of fitting `body` on `url`; ServerUnreachable when
    it cannot be reached."""
    content = json.dumps(body).encode()
    headers = {**bearer(api_key), "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=url.rstrip("/"), headers=headers, timeout=CALL_TIMEOUT) as client:
        await checked_health(client, RetryPolicy())
        await checked_key(client, RetryPolicy())
        try:
            post = lambda: client.post(TASKS_PATH, params={"background": "true"}, content=content)  # noqa: E731
            response, _, _ = await send_with_retry(post)
            if response.status_code in (200, 201):
                return response.status_code, response.json()
            if response.status_code != 202:
                return response.status_code, response.text
            job = await _follow(client, response.json())
        except httpx.TransportError as error:
            refused = await _too_large(client, len(content))
            if refused is not None:
                return refused
            raise ServerUnreachable(f"{url}: {error!r}") from error
    if job["status"] == "done":
        return 201, job["task"]
    if job["status"] == "failed":
        return job["error"]["status"], json.dumps(job["error"]["body"])
    return 499, f"the fit was {job['status']}; its readouts are kept: post it again to resume"
