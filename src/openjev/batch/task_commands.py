"""`openjev tasks list|show|delete`: a running server's tasks (`/v1/tasks`), from the command line.

Each command checks the server first, as `eval` and `tasks fit` do, with the same functions: a `--url`
without its scheme or host is exit 2 (`client.checked_url`); `GET /health` not answering, a 5xx, or
a 404 under a URL ending in `/v1` (told to drop it) is exit 1 (`asking.checked_health`); a key the
server refuses (401 or 403 on `GET /v1/limits`, `asking.checked_key`) is exit 2, nothing else asked.
Then it talks to `--url` with the bearer key, follows `GET /v1/tasks`'s pages to the end, and prints
what it got: `list` one line per task (id, type, model, labels, examples, held-out accuracy,
created), `show` the task's document as JSON, `delete` the id it removed. A refusal (404, ...) is
the server's own error body on stderr and exit status 1, as is a server that goes away. No line
shows the key or the URL's password.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import typer

from openjev.batch.asking import checked_health, checked_key
from openjev.batch.client import BadUrl, KeyRefused, RetryPolicy, ServerUnreachable, bearer, checked_url, masked
from openjev.endpoints import TASKS_MAX_PAGE, TASKS_PATH

TIMEOUT_S = 60.0
#: Characters of a refusal's body printed at most.
SHOWN_ERROR = 2000


class CommandFailed(Exception):
    """What the command prints on stderr before it exits 1."""


async def _check_server(url: str, api_key: str | None) -> None:
    async with httpx.AsyncClient(base_url=url, headers=bearer(api_key), timeout=TIMEOUT_S) as client:
        policy = RetryPolicy()
        await checked_health(client, policy)
        await checked_key(client, policy)


def run_command(url: str, api_key: str | None, work: Callable[[str], str]) -> None:
    """Print `work(url)` once the server at `url` is checked; the exits of the module doc."""
    try:
        url = checked_url(url)
        asyncio.run(_check_server(url, api_key))
        text = work(url)
    except (BadUrl, KeyRefused, ServerUnreachable, CommandFailed) as error:
        typer.echo(masked(f"openjev: {error}", url, api_key), err=True)
        raise typer.Exit(2 if isinstance(error, BadUrl | KeyRefused) else 1) from None
    typer.echo(text)


def _client(url: str, api_key: str | None) -> httpx.Client:
    return httpx.Client(base_url=url.rstrip("/"), headers=bearer(api_key), timeout=TIMEOUT_S)


def _send(client: httpx.Client, method: str, path: str, **params: Any) -> httpx.Response:
    try:
        response = client.request(method, path, params=params or None)
    except httpx.TransportError as error:
        raise CommandFailed(f"{client.base_url}: {error!r}") from None
    if response.is_error:
        raise CommandFailed(f"{method} {path} was refused ({response.status_code}): {response.text[:SHOWN_ERROR]}")
    return response


def pages(url: str, api_key: str | None) -> Iterator[dict[str, Any]]:
    """Every task's summary, a page at a time."""
    with _client(url, api_key) as client:
        after: str | None = None
        while True:
            params: dict[str, Any] = {"limit": TASKS_MAX_PAGE, **({"after": after} if after else {})}
            page = _send(client, "GET", TASKS_PATH, **params).json()
            yield from page["tasks"]
            if not page["has_more"]:
                return
            after = page["last_id"]


def _percent(value: Any) -> str:
    return f"{value:.1%}" if isinstance(value, int | float) else "-"


def summary_line(task: dict[str, Any]) -> str:
    created = time.strftime("%Y-%m-%d %H:%M", time.gmtime(task["created"]))
    labels = ",".join(task["labels"])
    return (
        f"{task['id']}  {task['type']:<6} {task['model']}  [{labels}]  {task['examples']} examples  "
        f"accuracy {_percent(task['accuracy'])}  {created} UTC"
    )


def list_lines(url: str, api_key: str | None) -> list[str]:
    lines = [summary_line(task) for task in pages(url, api_key)]
    return lines or ["no tasks"]


def show(url: str, api_key: str | None, task_id: str) -> str:
    with _client(url, api_key) as client:
        task = _send(client, "GET", f"{TASKS_PATH}/{quote(task_id, safe='')}").json()
    return json.dumps(task, indent=1, ensure_ascii=False)


def delete(url: str, api_key: str | None, task_id: str) -> str:
    with _client(url, api_key) as client:
        _send(client, "DELETE", f"{TASKS_PATH}/{quote(task_id, safe='')}")
    return f"deleted {task_id}"
