"""The fit repros of `hostile_goals.py`, on a server whose tasks directory holds a FIFO named like a task
file: 8 and 20 background fits while a well-behaved caller sends 50 requests (its 529s counted,
`/health/live` p99 over it), the running fits cancelled (their readout files looked for), a fit of
1,000 examples of a 255-option choice and one of 16 nested-list states (`/health/live` over each),
and the bytes of a `GET /v1/tasks` page against OPENJEV_TASK_PAGE_BYTES.

The fake SGLang answers as `tests/api/test_tasks.py`'s (letter-biased), each readout delayed 0.2 s
while the caller runs, so the fits are reading throughout.
"""

from __future__ import annotations

import functools
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hostile_probes import Liveness, Row, caller_statuses, memory_peak

from tests.api.test_tasks import EXAMPLES, QUESTION, letter_biased
from tests.conftest import RunningOpenJev, launch_openjev, stop_openjev
from tests.fake_sglang import FakeSGLang

ASKED = {"model": "jev-latest", "state": "Ticket: my parcel is late", "questions": {"q": QUESTION}}
PAGE_BYTES = 1024 * 1024


def fit_body(number: int) -> dict:
    """A fit of its own (its examples differ from every other number's)."""
    return {"question": QUESTION, "examples": [{**e, "state": f"{e['state']} (set {number})"} for e in EXAMPLES]}


def fits_row(server: RunningOpenJev, fake: FakeSGLang, live: Liveness, fits: int, tasks: Path) -> Row:
    """`fits` fits posted in the background, a caller's 50 requests meanwhile, then the running ones
    cancelled: met where the caller gets no 529, p99 < 50 ms and no cancelled fit's readouts stay."""
    fake.generate_delay = 0.2
    since = time.time()
    with memory_peak(server.process.pid) as found, server.client(timeout=120) as http:
        posted = [
            http.post("/v1/tasks", params={"background": "true"}, json=fit_body(n + 100 * fits)) for n in range(fits)
        ]
        with ThreadPoolExecutor(1) as pool:
            answered = pool.submit(caller_statuses, server.url, 50, ASKED).result()
        until = time.time()
        jobs = [answer.json()["id"] for answer in posted if answer.status_code == 202]
        fake.generate_delay = 0.0
        for job in jobs:
            http.delete(f"/v1/tasks/fits/{job}")
    time.sleep(0.5)
    left = [path.name for path in (tasks / "fits").glob("*.jsonl") if path.stem in jobs]
    statuses = [answer.status_code for answer in posted]
    p99 = live.p99_ms(since, until)
    refused = answered.count(529)
    answer = f"posts {statuses.count(202)}x202 {statuses.count(529)}x529; caller {refused}x529 of 50"
    goal = "caller no 529, p99 < 50 ms, cancelled readouts removed"
    row = Row(f"{fits} background fits + a caller", answer, found["seconds"], found["growth"], p99, goal)
    row.met = refused == 0 and p99 < 50 and not left
    row.detail = {"caller": answered, "cancelled_readout_files_left": left, "posted": statuses}
    return row


def big_fit_row(server: RunningOpenJev, live: Liveness, name: str, body: dict) -> Row:
    """One fit waited for; met where `/health/live` p99 over it stays under 50 ms."""
    since = time.time()
    with memory_peak(server.process.pid) as found, server.client(timeout=900) as http:
        fitted = http.post("/v1/tasks", json=body)
    p99 = live.p99_ms(since)
    longest = max(live.probes(since), default=float("nan")) * 1000
    answer = f"{fitted.status_code}, longest probe {longest:.0f} ms"
    row = Row(name, answer, found["seconds"], found["growth"], p99, "p99 < 50 ms", p99 < 50)
    row.detail = {"status": fitted.status_code, "body": fitted.text[:300]}
    return row


def page_row(server: RunningOpenJev) -> Row:
    """The bytes of the largest `GET /v1/tasks` page, against OPENJEV_TASK_PAGE_BYTES."""
    with memory_peak(server.process.pid) as found, server.client() as http:
        page = http.get("/v1/tasks", params={"limit": 1000})
    shown = len(page.json()["tasks"])
    answer = f"{page.status_code}, {len(page.content):,} B, {shown} tasks"
    met = len(page.content) <= PAGE_BYTES or shown == 1
    return Row("GET /v1/tasks page", answer, found["seconds"], found["growth"], None, "<= 1 MiB a page", met)


def fifo_start(tokenizer: Path, fake: FakeSGLang, tasks: Path, logs: Path) -> tuple[RunningOpenJev, Row]:
    """The fits' server, started with a FIFO named like a task file in its tasks directory."""
    tasks.mkdir(parents=True)
    os.mkfifo(tasks / "task_fifo.json")
    env = {"OPENJEV_TASKS_DIR": str(tasks), "OPENJEV_TASK_FOLDS": "3", "OPENJEV_OPTION_SHIFTS": "1"}
    started = time.monotonic()
    server = launch_openjev(
        "--connect", fake.url, "--tokenizer", str(tokenizer), log_dir=logs, timeout=240,
        env={**env, "OPENJEV_TASK_WORKED_EXAMPLES": "0"},
    )  # fmt: skip
    seconds = time.monotonic() - started
    skipped = "not a regular file" in server.log()
    row = Row("start with a FIFO as a task file", f"ready, FIFO skipped: {skipped}", seconds, 0.0, None)
    row.goal, row.met = "starts, FIFO skipped", skipped
    return server, row


def fit_rows(tokenizer: Path, logs: Path) -> list[Row]:
    fake = FakeSGLang()
    fake.logprobs = letter_biased
    fake.start()
    tasks = logs / "fits" / "tasks"
    server, fifo = fifo_start(tokenizer, fake, tasks, logs / "fits")
    live = Liveness(server.url, logs)
    try:
        rows = [fifo, fits_row(server, fake, live, 8, tasks), fits_row(server, fake, live, 20, tasks)]
        options = {f"team {n}": None for n in range(255)}
        question = {"type": "choice", "instructions": "Which team?", "criteria": options}
        examples = [{"state": f"Ticket {i}: parcel {i} went astray", "label": f"team {i % 255}"} for i in range(1000)]
        body = {"question": question, "examples": examples}
        rows.append(big_fit_row(server, live, f"1,000-example 255-option fit ({len(json.dumps(body)):,} B)", body))
        # 50-deep empty lists: 16 states of 300 (240,000 values) are read; 600 each pass the body's value cap.
        nested = [[functools.reduce(lambda inner, _: [inner], range(49), [])] * 300]
        labels = ["billing", "shipping"]
        states = [{"state": [*nested, i], "label": labels[i % 2]} for i in range(16)]
        rows.append(big_fit_row(server, live, "16 nested-list states fit", {"question": QUESTION, "examples": states}))
        rows.append(page_row(server))
        return rows
    finally:
        live.stop()
        stop_openjev(server)
        fake.stop()
