"""A fit left half done and posted again after a restart under other answer settings reads every example
again (`tasks/jobs.py`, `KeptReadouts`): its task is stamped with the settings all its readouts were read under."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.api import test_tasks
from tests.api.test_task_fits import follow
from tests.api.test_tasks import EXAMPLES, QUESTION, start

fake = test_tasks.fake


def test_a_fit_resumed_under_other_answer_settings_reads_its_examples_again(
    serve_openjev, fake, qwen_tokenizer_dir, tmp_path
):
    tasks = tmp_path / "tasks"
    body = {"question": QUESTION, "examples": EXAMPLES}
    server = start(serve_openjev, fake, qwen_tokenizer_dir, tasks, OPENJEV_TASK_WORKED_EXAMPLES="0")
    fake.generate_delay = 0.5
    with server.client() as http:
        with pytest.raises(httpx.ReadTimeout):  # the client leaves: the job stops, its readouts kept
            http.post("/v1/tasks", json=body, timeout=2.5)
        (path,) = (tasks / "fits").glob("*.jsonl")
        follow(http, path.stem, lambda seen: seen["status"] == "cancelled")
    server.process.terminate()
    server.process.wait(timeout=15)
    kept = [line for line in path.read_text().splitlines() if "key" in json.loads(line)]  # the readouts
    assert len(kept) >= 2

    fake.generate_delay = 0.0
    restarted = start(
        serve_openjev, fake, qwen_tokenizer_dir, tasks, OPENJEV_TASK_WORKED_EXAMPLES="0", OPENJEV_TEMPERATURE="0.5"
    )
    before = len(fake.generate_calls)
    with restarted.client() as http:
        again = http.post("/v1/tasks", params={"background": "true"}, json=body).json()
        events = [event["event"] for event in again["events"]]
        assert events[0] == f"{len(kept)} readouts kept under other answer settings removed: read again"
        assert events[1].startswith("started; 0 readouts kept")
        done = follow(http, again["id"], lambda seen: seen["status"] == "done")
        assert done["task"]["answer_settings"]["temperature"] == 0.5
        assert done["progress"]["readouts_done"] == len(EXAMPLES)
    assert len(fake.generate_calls) - before >= len(EXAMPLES)  # every example read again
