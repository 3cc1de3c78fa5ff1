"""The tasks directory and listing on the real app under uvicorn over the fake SGLang: entries that are no
regular file skipped at start, list pages bounded in bytes, fits' kept readouts counted with the tasks."""

from __future__ import annotations

import json
import os

import httpx

from tests.api.test_task_fits import follow
from tests.api.test_task_store import EXAMPLES, NOUL, fitted, start, stop


def test_a_fifo_or_a_directory_named_like_a_task_file_is_skipped_at_start(
    serve_openjev, fake_sglang, qwen_tokenizer_dir, tmp_path
) -> None:
    """A FIFO named like a task file hung start-up: opening it for reading waited for a writer."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    os.mkfifo(tasks / f"task_{'1' * 24}.json")
    (tasks / f"task_{'2' * 24}.json").mkdir()
    server = start(serve_openjev, fake_sglang, qwen_tokenizer_dir, tasks)
    with server.client() as http:
        assert http.get("/v1/tasks").json()["tasks"] == []
        assert fitted(http, NOUL)["id"].startswith("task_")
    for digit in "12":
        assert f"task_{digit * 24}.json skipped: not a regular file" in server.log()


def test_a_page_of_tasks_is_bounded_in_bytes_and_goes_on_past_it(
    serve_openjev, fake_sglang, qwen_tokenizer_dir, tmp_path
) -> None:
    server = start(serve_openjev, fake_sglang, qwen_tokenizer_dir, tmp_path / "tasks", OPENJEV_TASK_PAGE_BYTES="1024")
    with server.client() as http:
        ids = sorted(fitted(http, {**NOUL, "instructions": f"Refund {n}?"})["id"] for n in range(5))
        listed, after, pages = [], None, 0
        while True:
            page = http.get("/v1/tasks", params={"after": after} if after else {})
            assert page.status_code == 200, page.text
            rows = page.json()["tasks"]
            assert rows and len(json.dumps(rows)) <= 1024
            listed += [row["id"] for row in rows]
            pages += 1
            if not page.json()["has_more"]:
                break
            after = page.json()["last_id"]
    assert listed == ids and pages >= 2


def test_kept_readouts_count_with_the_tasks_the_oldest_of_fits_not_running_removed_first(
    serve_openjev, fake_sglang, qwen_tokenizer_dir, tmp_path
) -> None:
    """Readout files of fits cut short stayed on disk, uncounted, however many there were."""
    tasks = tmp_path / "tasks"
    stale = tasks / "fits"
    stale.mkdir(parents=True)
    for age, digit in enumerate("123"):
        path = stale / f"task_{digit * 24}.jsonl"
        path.write_text('{"key": "k", "readouts": [[0.5, 0.5]]}\n')
        os.utime(path, (1_700_000_000 + age, 1_700_000_000 + age))  # "1" the oldest
    server = start(serve_openjev, fake_sglang, qwen_tokenizer_dir, tasks, OPENJEV_TASK_MAX_TASKS="3")

    def kept() -> list[str]:
        return sorted(path.name.removesuffix(".jsonl") for path in stale.iterdir())

    def posted(instructions: str) -> httpx.Response:
        body = {"question": {**NOUL, "instructions": instructions}, "examples": EXAMPLES}
        return http.post("/v1/tasks", params={"background": "true"}, json=body)

    with server.client() as http:
        first = fitted(http, NOUL)  # room: 3 less itself, so 2 files of readouts besides
        assert kept() == [f"task_{'2' * 24}", f"task_{'3' * 24}"]
        fake_sglang.generate_delay = 0.5
        running = []
        for instructions in ("Money back?", "Return?"):  # each: 3 less 1 task less itself, 1 besides
            running.append(posted(instructions).json()["id"])
            follow(http, running[-1], lambda seen: seen["progress"]["readouts_done"] >= 1)
        assert kept() == sorted(running)
        # 1 task and 2 running fits' readouts: nothing left that may go, so a new fit is refused.
        fourth = posted("Exchange?")
        assert fourth.status_code == 409 and "OPENJEV_TASK_MAX_TASKS" in fourth.text, fourth.text
        fake_sglang.generate_delay = 0.0
        for job in running:
            follow(http, job, lambda seen: seen["status"] in ("done", "failed"))
        assert [row["id"] for row in http.get("/v1/tasks").json()["tasks"]] == sorted([first["id"], *running])
        assert kept() == []
    stop(server)


def test_a_fit_of_deeply_nested_states_is_stored_at_about_the_size_it_was_posted(
    serve_openjev, fake_sglang, qwen_tokenizer_dir, tmp_path
) -> None:
    """Its file was indented: 16 states of 50-deep lists (a 0.5 MB fit) made a 14.8 MB document, refused
    with a 413 over OPENJEV_TASK_MAX_BYTES after every readout had been read."""
    deep: list = []
    for _ in range(49):
        deep = [deep]
    examples = [{"state": [[deep] * 300, n], "label": n % 2 == 0} for n in range(16)]
    body = json.dumps({"question": NOUL, "examples": examples})
    server = start(serve_openjev, fake_sglang, qwen_tokenizer_dir, tmp_path / "tasks")
    with server.client(timeout=120) as http:
        task = fitted(http, NOUL, examples)
    stored = (tmp_path / "tasks" / f"{task['id']}.json").stat().st_size
    assert stored < len(body) + 64 * 1024, (stored, len(body))
