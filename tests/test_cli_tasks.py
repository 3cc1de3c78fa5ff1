"""`openjev tasks fit FILE`: against a running server (`--url`, openjev over the fake SGLang; a full one is
backed off) and on the embedded default the command starts for the run; bad files and refused tasks exit
non-zero, nothing kept."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import eventually
from tests.fake_sglang import FakeSGLang

QUESTION = {
    "type": "noul",
    "instructions": "Does the customer ask for their money back?",
    "criteria": {"true": "A refund is asked for", "false": "Anything else"},
}
STATES = [
    ("I want a refund for the broken kettle, please return my money.", True),
    ("Please refund my order 1182, it never arrived.", True),
    ("Give me my money back for the damaged chair.", True),
    ("What time do you open on Sunday?", False),
    ("Can I change the delivery address of order 77?", False),
    ("Do you sell gift cards?", False),
]


def write_jsonl(path: Path, rows: list[tuple[str, object]]) -> Path:
    path.write_text("".join(json.dumps({"state": state, "label": label}) + "\n" for state, label in rows))
    return path


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openjev", "tasks", "fit", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "300", **(env or {})},
    )


def test_fit_against_a_running_server_prints_the_report_and_keeps_the_task(
    serve_openjev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path, tmp_path: Path
) -> None:
    env = {"OPENJEV_TASKS_DIR": str(tmp_path / "tasks")}
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env=env)
    data = write_jsonl(tmp_path / "refunds.jsonl", STATES)
    question = tmp_path / "question.json"
    question.write_text(json.dumps(QUESTION))
    saved = tmp_path / "task.json"
    done = run_cli(str(data), "--question", str(question), "--url", server.url, "--json", str(saved))
    assert done.returncode == 0, done.stderr
    task = json.loads(saved.read_text())
    assert task["id"] in done.stdout and "adopted by nested cross-validation" in done.stdout
    assert f"{task['report']['examples']} examples" in done.stdout
    with server.client() as http:
        assert http.get(f"/v1/tasks/{task['id']}").json() == task

    # The same file as CSV, inline question: the same content, so the same task.
    csv = tmp_path / "refunds.csv"
    csv.write_text("state,label\n" + "".join(f'"{s}",{str(label).lower()}\n' for s, label in STATES))
    again = run_cli(str(csv), "--question", json.dumps(QUESTION), "--url", server.url)
    assert again.returncode == 0, again.stderr
    assert task["id"] in again.stdout

    wrong = write_jsonl(tmp_path / "wrong.jsonl", [("s", True), ("t", "perhaps")])
    refused = run_cli(str(wrong), "--question", str(question), "--url", server.url)
    assert refused.returncode == 1
    assert f"openjev: {wrong}:2: label: " in refused.stderr and "perhaps" in refused.stderr
    with server.client() as http:
        assert [row["id"] for row in http.get("/v1/tasks").json()["tasks"]] == [task["id"]]


def test_fit_waits_for_a_full_server_shows_progress_and_fits_once_it_has_room(
    serve_openjev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path, tmp_path: Path
) -> None:
    """Every evaluation slot is held by slow requests when the fit is posted: the fit's job waits for
    room (its readouts are never refused to it with 529) and is made once the slots are free."""
    server = serve_openjev(
        "--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), "--max-concurrent-requests", "4",
        env={"OPENJEV_TASKS_DIR": str(tmp_path / "tasks")},
    )  # fmt: skip
    fake_sglang.generate_delay = 8.0
    body = {"model": "jev-latest", "state": "Refund me now.", "questions": {"q": QUESTION}}
    data = write_jsonl(tmp_path / "refunds.jsonl", STATES)
    with ThreadPoolExecutor(5) as pool:
        holders = [pool.submit(httpx.post, f"{server.url}/v1/systemone", json=body, timeout=90) for _ in range(4)]
        in_flight = re.compile(r"^openjev_in_flight_requests 4\.0$", re.MULTILINE)
        assert eventually(lambda: in_flight.search(httpx.get(f"{server.url}/metrics").text), timeout=30)
        fit = pool.submit(run_cli, str(data), "--question", json.dumps(QUESTION), "--url", server.url)
        assert eventually(lambda: '"POST /v1/tasks?background=true HTTP/1.1" 202' in server.log(), timeout=60)
        fake_sglang.generate_delay = 0.0
        assert all(holder.result().status_code == 200 for holder in holders)
        done = fit.result()
    assert done.returncode == 0, done.stderr
    assert '/v1/tasks?background=true HTTP/1.1" 529' not in server.log()
    with server.client() as http:
        assert len(http.get("/v1/tasks").json()["tasks"]) == 1


def test_a_body_over_the_servers_limit_prints_its_413_and_the_limit(
    serve_openjev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path, tmp_path: Path
) -> None:
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir))
    large = [(f"{state} " + "x" * 500_000, label) for state, label in STATES]
    data = write_jsonl(tmp_path / "large.jsonl", large)
    done = run_cli(str(data), "--question", json.dumps(QUESTION), "--url", server.url)
    assert done.returncode == 1
    assert "413" in done.stderr and "2097152" in done.stderr and "ReadError" not in done.stderr


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.jsonl", "\n\n", "no rows in it"),
        ("broken.jsonl", '{"state": "s", "label": true}\n{"state": \n', "broken.jsonl:2: not JSON"),
        ("nolabel.jsonl", '{"state": "s"}\n', "nolabel.jsonl:1: every row needs a state and a label"),
        ("columns.csv", "text,label\nhello,true\n", "the header has no 'state' column"),
        ("table.xlsx", "", "expected a .jsonl, .json, .csv, .tsv, .parquet file"),
    ],
)
def test_a_file_that_cannot_be_read_is_a_usage_error(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    # An unreachable --url: the file is refused before anything is sent.
    done = run_cli(str(path), "--question", json.dumps(QUESTION), "--url", "http://127.0.0.1:9", timeout=60)
    assert done.returncode == 2
    assert message in " ".join(done.stderr.replace("│", " ").split())


def test_a_question_that_is_not_json_is_a_usage_error(tmp_path: Path) -> None:
    """Said as eval and classify say it: one `openjev:` line naming the flag, no box."""
    data = write_jsonl(tmp_path / "d.jsonl", STATES)
    for question in ("{not json", str(tmp_path / "missing.json")):
        done = run_cli(str(data), "--question", question, "--url", "http://127.0.0.1:9", timeout=60)
        assert done.returncode == 2 and done.stderr.startswith("openjev: --question: not a JSON question"), done.stderr
        assert "╭" not in done.stderr and "│" not in done.stderr


@pytest.mark.embedded
@pytest.mark.timeout(900)
def test_fit_on_the_embedded_model_and_use_the_task_on_the_sglang_path(
    serve_openjev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path, tmp_path: Path
) -> None:
    """The embedded default the command starts (the small test model) fits the task; the same file, read by a
    server on the SGLang path that serves under the same model name, answers with it."""
    tasks = tmp_path / "tasks"
    env = {"OPENJEV_TASKS_DIR": str(tasks), "OPENJEV_LOCAL_MODEL": "packaged:qwen2.5-coder-0.5b"}
    data = write_jsonl(tmp_path / "refunds.jsonl", STATES)
    done = run_cli(str(data), "--question", json.dumps(QUESTION), env=env, timeout=840)
    assert done.returncode == 0, done.stderr
    (path,) = tasks.glob("task_*.json")
    task = json.loads(path.read_text())
    assert task["id"] in done.stdout
    nested = task["report"]["nested"]
    # Examples shown as worked ones are set apart from those scored (`tasks/fitting.py`, step 3).
    assert nested["plain"]["n"] == nested.get("examples_scored", len(STATES)) and 0 <= nested["chosen"]["accuracy"] <= 1

    server = serve_openjev(
        "--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir),
        env={"OPENJEV_TASKS_DIR": str(tasks), "OPENJEV_SERVED_MODEL_NAME": task["model"]},
    )  # fmt: skip
    body = {"model": "jev-latest", "state": "Refund me now.", "questions": {"q": {**QUESTION, "x_task": task["id"]}}}
    answered = httpx.post(f"{server.url}/v1/systemone", json=body, timeout=60)
    assert answered.status_code == 200, answered.text
    assert 0 <= answered.json()["answers"]["q"]["noul"] <= 1


def run_tasks(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openjev", "tasks", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )


def test_list_show_and_delete_a_running_servers_tasks(
    serve_openjev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path, tmp_path: Path
) -> None:
    env = {"OPENJEV_TASKS_DIR": str(tmp_path / "tasks"), "OPENJEV_TASK_WORKED_EXAMPLES": "0"}
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env=env)
    examples = [{"state": state, "label": label} for state, label in STATES]
    with server.client() as http:
        task = http.post("/v1/tasks", json={"question": QUESTION, "examples": examples}).json()
    listed = run_tasks("list", "--url", server.url)
    assert listed.returncode == 0, listed.stderr
    [line] = listed.stdout.splitlines()
    assert line.startswith(task["id"]) and "noul" in line and f"{len(STATES)} examples" in line
    shown = run_tasks("show", task["id"], "--url", server.url)
    assert shown.returncode == 0 and json.loads(shown.stdout) == task
    deleted = run_tasks("delete", task["id"], "--url", server.url)
    assert deleted.returncode == 0 and task["id"] in deleted.stdout
    assert run_tasks("list", "--url", server.url).stdout.strip() == "no tasks"
    # The server's own refusal, and an unreachable server: exit 1, saying why.
    gone = run_tasks("show", task["id"], "--url", server.url)
    assert gone.returncode == 1 and "404" in gone.stderr and "not_found" in gone.stderr
    nowhere = run_tasks("list", "--url", "http://127.0.0.1:9")
    assert nowhere.returncode == 1 and "127.0.0.1:9" in nowhere.stderr


def test_list_show_and_delete_fail_fast_on_a_misaddressed_or_dead_url(openjev_on_fake) -> None:
    """As `tasks fit` and `eval`: a URL without its scheme is exit 2 at once, a dead one and a `/v1` one
    exit 1 from `GET /health`, the /v1 told to drop it, nothing asked of /v1/tasks."""
    bare = openjev_on_fake.url.removeprefix("http://")
    for command in (["list"], ["show", "tk_none"], ["delete", "tk_none"]):
        done = run_tasks(*command, "--url", bare)
        assert done.returncode == 2 and f"did you mean http://{bare}?" in done.stderr, done.stderr
        done = run_tasks(*command, "--url", "http://127.0.0.1:9")
        assert done.returncode == 1 and "no server answers at http://127.0.0.1:9" in done.stderr, done.stderr
        done = run_tasks(*command, "--url", openjev_on_fake.url + "/v1")
        assert done.returncode == 1 and f"drop the /v1: --url {openjev_on_fake.url}" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert "/v1/v1/tasks" not in openjev_on_fake.log()
