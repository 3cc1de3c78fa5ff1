"""The task store on the real app under uvicorn over the fake SGLang: files checked before they serve,
tasks tied to the question type and answer settings they were fitted under, bounds, pages, small
refusals; never a 5xx."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx

from openjev.api.parsing import MAX_JSON_VALUES
from openjev.tasks.store import StoreFull, TaskStore
from tests.conftest import RunningOpenJev, ServeOpenJev
from tests.fake_sglang import FakeSGLang

NOUL = {
    "type": "noul",
    "instructions": "Does the customer ask for their money back?",
    "criteria": {"true": "A refund is asked for", "false": "Anything else"},
}
EXAMPLES = [
    {"state": "I want a refund for the broken kettle.", "label": True},
    {"state": "Please refund my order 1182.", "label": True},
    {"state": "Give me my money back for the chair.", "label": True},
    {"state": "What time do you open on Sunday?", "label": False},
    {"state": "Can I change the delivery address?", "label": False},
    {"state": "Do you sell gift cards?", "label": False},
]


def start(serve: ServeOpenJev, fake: FakeSGLang, tokenizer: Path, tasks: Path, **env: str) -> RunningOpenJev:
    settings = {"OPENJEV_TASKS_DIR": str(tasks), "OPENJEV_TASK_FOLDS": "3", "OPENJEV_TASK_WORKED_EXAMPLES": "0"}
    return serve("--connect", fake.url, "--tokenizer", str(tokenizer), env={**settings, **env})


def stop(server: RunningOpenJev) -> None:
    server.process.terminate()
    server.process.wait(timeout=15)


def fitted(http: httpx.Client, question: dict, examples: list[dict] = EXAMPLES) -> dict:
    response = http.post("/v1/tasks", json={"question": question, "examples": examples})
    assert response.status_code == 201, response.text
    return response.json()


def first_task(serve: ServeOpenJev, fake: FakeSGLang, tokenizer: Path, tasks: Path) -> tuple[RunningOpenJev, dict]:
    """A server keeping its tasks in `tasks`, and a noul task fitted on it."""
    server = start(serve, fake, tokenizer, tasks)
    with server.client() as http:
        return server, fitted(http, NOUL)


def asked(http: httpx.Client, question: dict) -> httpx.Response:
    body = {"model": "jev-latest", "state": "Refund me, please.", "questions": {"q": question}}
    response = http.post("/v1/systemone", json=body)
    assert response.status_code < 500, response.text
    return response


def refusal(response: httpx.Response) -> str:
    """The message of a 422 that names `x_task`."""
    assert response.status_code == 422, response.text
    [issue] = response.json()["detail"]
    assert issue["loc"] == ["body", "questions", "q", "x_task"]
    return issue["msg"]


def write(directory: Path, name: str, document: dict | str) -> str:
    path = directory / f"task_{name}.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return f"task_{name}"


def bad_files(directory: Path, good: dict) -> list[str]:
    """A file of each kind that must not serve; their ids."""

    def variant(digit: str, **changes: object) -> str:
        document = {key: value for key, value in good.items() if changes.get(key) != "DROP"}
        changed = {key: value for key, value in changes.items() if value != "DROP"}
        return write(directory, digit * 24, {**document, "id": "task_" + digit * 24, **changed})

    deep = json.dumps({**good, "id": "task_" + "4" * 24, "report": "DEEP"})
    return [
        variant("1", calibration={"biases": [float("nan"), 0.0], "temperature": 1.0}),
        variant("2", calibration={"biases": [1e6, 0.0], "temperature": 1.0}),
        variant("3", created="yesterday"),
        write(directory, "4" * 24, deep.replace('"DEEP"', "[" * 100_000 + "]" * 100_000)),
        # Another task's document under this name: refused, so a DELETE can never leave its file behind.
        write(directory, "5" * 24, good),
        variant("6", report={"pad": " " * 1_100_000}),
        variant("7", answer_settings="DROP"),
    ]


def test_a_bad_task_file_is_skipped_and_breaks_nothing_else(
    serve_openjev, fake_sglang, qwen_tokenizer_dir, tmp_path
) -> None:
    tasks = tmp_path / "tasks"
    first, task = first_task(serve_openjev, fake_sglang, qwen_tokenizer_dir, tasks)
    stop(first)
    good = json.loads((tasks / f"{task['id']}.json").read_text())
    assert good["answer_settings"] and good["answer_settings"]["temperature"] is not None
    bad = bad_files(tasks, good)
    again = start(serve_openjev, fake_sglang, qwen_tokenizer_dir, tasks)
    with again.client() as http:
        listing = http.get("/v1/tasks")
        assert listing.status_code == 200, listing.text
        assert [row["id"] for row in listing.json()["tasks"]] == [task["id"]]
        for identifier in bad:
            assert "no task" in refusal(asked(http, {**NOUL, "x_task": identifier}))
            assert http.get(f"/v1/tasks/{identifier}").status_code == 404
            assert f"{identifier}.json skipped" in again.log()
        assert asked(http, {**NOUL, "x_task": task["id"]}).status_code == 200
        assert http.delete(f"/v1/tasks/{task['id']}").status_code == 204
        assert not (tasks / f"{task['id']}.json").exists()
        # A deleted task's file that comes back is not served while the server runs.
        (tasks / f"{task['id']}.json").write_text(json.dumps(good))
        assert http.get(f"/v1/tasks/{task['id']}").status_code == 404
        assert "no task" in refusal(asked(http, {**NOUL, "x_task": task["id"]}))
    assert " 500 " not in again.log()


def test_a_task_serves_only_its_question_type_and_answer_settings(
    serve_openjev, fake_sglang, qwen_tokenizer_dir, tmp_path
) -> None:
    tasks = tmp_path / "tasks"
    server, task = first_task(serve_openjev, fake_sglang, qwen_tokenizer_dir, tasks)
    with server.client() as http:
        as_choice = {"type": "choice", "criteria": {"true": None, "false": None}, "x_task": task["id"]}
        message = refusal(asked(http, as_choice))
        assert "noul task" in message and "choice question" in message
        assert asked(http, {**NOUL, "x_task": task["id"]}).status_code == 200
    stop(server)
    warmer = start(serve_openjev, fake_sglang, qwen_tokenizer_dir, tasks, OPENJEV_TEMPERATURE="2.5")
    with warmer.client() as http:
        message = refusal(asked(http, {**NOUL, "x_task": task["id"]}))
        assert "answer settings" in message and "temperature" in message and "2.5" in message
        # Posted again here, the same content is fitted again under these settings, and serves.
        again = http.post("/v1/tasks", json={"question": NOUL, "examples": EXAMPLES})
        assert again.status_code == 201 and again.json()["id"] == task["id"]
        assert asked(http, {**NOUL, "x_task": task["id"]}).status_code == 200
        assert again.json()["answer_settings"]["temperature"] == 2.5


def test_a_task_stamped_before_a_setting_was_added_still_serves(
    serve_openjev, fake_sglang, qwen_tokenizer_dir, tmp_path
) -> None:
    """A task file from a server that had no `option_order` (tasks/store.py reads the stamp as that
    setting's former value, `given`): served unchanged where the setting is still `given`, refused naming
    it where it is not."""
    tasks = tmp_path / "tasks"
    server, task = first_task(serve_openjev, fake_sglang, qwen_tokenizer_dir, tasks)
    stop(server)
    path = tasks / f"{task['id']}.json"
    document = json.loads(path.read_text())
    del document["answer_settings"]["option_order"]
    path.write_text(json.dumps(document))
    again = start(serve_openjev, fake_sglang, qwen_tokenizer_dir, tasks)
    with again.client() as http:
        assert asked(http, {**NOUL, "x_task": task["id"]}).status_code == 200
    stop(again)
    canonical = start(serve_openjev, fake_sglang, qwen_tokenizer_dir, tasks, OPENJEV_OPTION_ORDER="canonical")
    with canonical.client() as http:
        assert "option_order" in refusal(asked(http, {**NOUL, "x_task": task["id"]}))


def test_the_store_is_bounded_paged_and_its_refusals_are_small(
    serve_openjev, fake_sglang, qwen_tokenizer_dir, tmp_path
) -> None:
    tasks = tmp_path / "tasks"
    env = {"OPENJEV_TASK_MAX_TASKS": "2", "OPENJEV_TASK_MAX_BYTES": "8192"}
    server = start(serve_openjev, fake_sglang, qwen_tokenizer_dir, tasks, **env)
    with server.client() as http:
        ids = sorted(fitted(http, {**NOUL, "instructions": text})["id"] for text in ("Refund?", "Money back?"))
        third = http.post("/v1/tasks", json={"question": {**NOUL, "instructions": "Return?"}, "examples": EXAMPLES})
        assert third.status_code == 409 and "OPENJEV_TASK_MAX_TASKS" in third.text
        same = http.post("/v1/tasks", json={"question": {**NOUL, "instructions": "Refund?"}, "examples": EXAMPLES})
        assert same.status_code == 200
        large = [{"state": "x" * 3000, "label": index % 2 == 0} for index in range(4)]
        too_large = http.post("/v1/tasks", json={"question": NOUL, "examples": large})
        assert too_large.status_code == 413 and "OPENJEV_TASK_MAX_BYTES=8192" in too_large.text

        page = http.get("/v1/tasks", params={"limit": 1}).json()
        assert [row["id"] for row in page["tasks"]] == ids[:1] and page["has_more"]
        assert page["first_id"] == page["last_id"] == ids[0]
        rest = http.get("/v1/tasks", params={"limit": 1, "after": page["last_id"]}).json()
        assert [row["id"] for row in rest["tasks"]] == ids[1:] and not rest["has_more"]
        assert http.get("/v1/tasks", params={"limit": 0}).status_code == 422

        long_id = "task_" + "x" * 20_000
        for response in (http.get(f"/v1/tasks/{long_id}"), http.delete(f"/v1/tasks/{long_id}")):
            assert response.status_code == 404 and len(response.content) < 1000
        # Parsed with the answering routes' bounds: too many values is refused before validation.
        crowded = http.post("/v1/tasks", json={"question": NOUL, "examples": [0] * MAX_JSON_VALUES})
        assert crowded.status_code == 422
        assert crowded.json()["detail"][0]["loc"] == ["body"] and crowded.json()["detail"][0]["type"] == "too_long"
    stop(server)
    fewer = start(serve_openjev, fake_sglang, qwen_tokenizer_dir, tasks, OPENJEV_TASK_MAX_TASKS="1")
    with fewer.client() as http:
        assert [row["id"] for row in http.get("/v1/tasks").json()["tasks"]] == ids[:1]
    assert "1 task files past OPENJEV_TASK_MAX_TASKS=1 not read" in fewer.log()
    assert " 500 " not in server.log() + fewer.log()


def test_fits_kept_at_once_never_pass_the_store_s_bound(serve_openjev, fake_sglang, qwen_tokenizer_dir, tmp_path):
    """Eight tasks kept from eight threads at once into a store with room for three: three kept, five
    refused, three files."""
    server, task = first_task(serve_openjev, fake_sglang, qwen_tokenizer_dir, tmp_path / "fitted")
    stop(server)
    document = json.loads((tmp_path / "fitted" / f"{task['id']}.json").read_text())
    store = TaskStore(tmp_path / "bounded", max_tasks=3, max_bytes=1 << 20)
    start_together = threading.Barrier(8)
    outcomes: list[str] = []

    def keep(digit: str) -> None:
        start_together.wait()
        try:
            store.put({**document, "id": "task_" + digit * 24})
            outcomes.append("kept")
        except StoreFull:
            outcomes.append("full")

    threads = [threading.Thread(target=keep, args=(digit,)) for digit in "01234567"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["full"] * 5 + ["kept"] * 3
    assert len(store) == 3 and len(list((tmp_path / "bounded").glob("task_*.json"))) == 3
