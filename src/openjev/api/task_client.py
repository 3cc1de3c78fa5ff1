"""`openjev tasks fit`: a task body posted to a running server, or to this process's own embedded one.

With a URL the body goes to `POST {url}/v1/tasks` over HTTP. Without one, the app is built here on
the embedded default (the settings of the environment) and the same route answers through httpx's
ASGI transport: one code path for both. `report_lines` prints what the fit found.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from openjev.api.tasks import TASKS_PATH
from openjev.config import Settings

#: A fit asks every example several questions; on a CPU that takes minutes.
FIT_TIMEOUT = 3600.0
READY_POLL_SECONDS = 0.5


def post_remote(url: str, body: dict[str, Any], api_key: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(base_url=url.rstrip("/"), timeout=FIT_TIMEOUT, headers=headers) as client:
        return client.post(TASKS_PATH, json=body)


async def _post_embedded(settings: Settings, body: dict[str, Any]) -> httpx.Response:
    from openjev.api import create_app
    from openjev.backends import build_backend

    failures: list[BaseException] = []
    app = create_app(settings, build_backend(settings, failures.append), on_fatal=failures.append)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://openjev", timeout=FIT_TIMEOUT) as client:
            while (await client.get("/health")).status_code != 200:
                if failures:
                    raise RuntimeError(f"the embedded backend could not start: {failures[0]}")
                await asyncio.sleep(READY_POLL_SECONDS)
            return await client.post(TASKS_PATH, json=body)


def post_embedded(settings: Settings, body: dict[str, Any]) -> httpx.Response:
    return asyncio.run(_post_embedded(settings, body))


def _row(name: str, quality: dict[str, Any]) -> str:
    low, high = quality["accuracy_ci95"]
    pairs = quality["pairs"]
    paired = f"  pairs {pairs['pair_accuracy']:.1%} of {pairs['pairs']}" if pairs else ""
    return (
        f"  {name:<7} accuracy {quality['accuracy']:.1%} [{low:.1%}, {high:.1%}]{paired}"
        f"  Brier {quality['brier']:.3f}  ECE {quality['ece']:.3f}"
    )


def report_lines(task: dict[str, Any]) -> list[str]:
    """The task's id and its held-out report, one line per figure."""
    report = task["report"]
    lines = [
        f"task {task['id']} ({task['question']['type']}, model {task['model']})",
        f"{report['examples']} examples {report['label_counts']}, {report['folds']}-fold cross-validation",
    ]
    for count, row in report["by_worked_examples"].items():
        adopted = "adopted" if row["calibration_adopted"] else "not adopted"
        lines += [f"{count} worked example(s) per label (calibration {adopted}):"]
        lines += [_row("before", row["before"]), _row("after", row["after"])]
    calibration = task["calibration"]
    biases = ", ".join(
        f"{label} {bias:+.2f}" for label, bias in zip(task["labels"], calibration["biases"], strict=True)
    )
    lines += [
        f"chosen: {task['worked_examples_per_label']} worked example(s) per label; "
        f"temperature {calibration['temperature']:.3f}; biases {biases}",
        f'use it: "x_task": "{task["id"]}" on the question',
    ]
    return lines
