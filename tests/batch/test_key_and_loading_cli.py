"""A key the server refuses, and a server that is still loading, as the CLI meets them: a refused key
stops `classify`, `eval` and every `tasks` command before anything is sent (and a run whose key stops
working mid-way, as the breaker stops it); a 503 that says when to come back is waited for, not counted
as a failure. Real servers on 127.0.0.1: openjev with OPENJEV_API_KEY over the fake SGLang, and the
scripted server of the fail-fast tests in front of openjev for the faults."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx

from tests.batch.test_eval_cli import CHOICE, answers_of, openjev_cli, requests_with_status, write_rows
from tests.batch.test_fail_fast_cli import Scripted, ScriptedServer, classify, rows_file
from tests.conftest import RunningOpenJev, ServeOpenJev
from tests.fake_sglang import FakeSGLang

KEY = "sk-right-0123456789abcdef"
WRONG = "sk-wrong-fedcba9876543210"
NOUL = {"type": "noul", "instructions": "Is it a refund?", "criteria": {"true": "A refund", "false": "Anything else"}}


def refusals_outside_limits(server: RunningOpenJev) -> list[str]:
    """The routes, other than /v1/limits, the server answered 401 on (its /metrics)."""
    found = re.findall(
        r'openjev_requests_total\{route="([^"]+)",status="401"\} (\S+)', httpx.get(f"{server.url}/metrics").text
    )
    return [route for route, count in found if route != "/v1/limits" and float(count) > 0]


def _refused_at_once(done: object, server: RunningOpenJev) -> None:
    stderr = done.stderr  # type: ignore[attr-defined]
    assert done.returncode == 2, stderr  # type: ignore[attr-defined]
    [line] = stderr.strip().splitlines()
    assert line.startswith("openjev: ") and f"{server.url} refused the key" in line, stderr
    assert WRONG not in stderr and KEY not in stderr and "Traceback" not in stderr


def test_a_refused_key_stops_every_command_before_anything_is_sent(
    tmp_path: Path, serve_openjev: ServeOpenJev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path
) -> None:
    env = {"OPENJEV_API_KEY": KEY, "OPENJEV_TASKS_DIR": str(tmp_path / "tasks")}
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env=env)
    rows = write_rows(
        tmp_path / "in.jsonl", [{"state": f"t{i}", "question": CHOICE, "gold": "sales"} for i in range(30)]
    )
    labelled = write_rows(tmp_path / "fit.jsonl", [{"state": f"s{i}", "label": i % 2 == 0} for i in range(8)])
    url = ["--url", server.url]
    for key in (["--api-key", WRONG], []):
        _refused_at_once(openjev_cli("classify", str(rows), *url, "--out", str(tmp_path / "a.jsonl"), *key), server)
        _refused_at_once(openjev_cli("eval", str(rows), *url, "--out", str(tmp_path / "e"), *key), server)
        fit = openjev_cli("tasks", "fit", str(labelled), "--question", json.dumps(NOUL), *url, *key)
        _refused_at_once(fit, server)
        for command in (["list"], ["show", "tk_none"], ["delete", "tk_none"]):
            _refused_at_once(openjev_cli("tasks", *command, *url, *key), server)
    assert requests_with_status(server, 401) == 0 and requests_with_status(server, 200) == 0
    assert refusals_outside_limits(server) == [], "only the key's check may be refused"
    # The right key (here from the environment) is let through.
    listed = openjev_cli("tasks", "list", *url, env={"OPENJEV_API_KEY": KEY})
    assert listed.returncode == 0 and listed.stdout.strip() == "no tasks", listed.stderr


def test_a_key_refused_mid_run_stops_it_as_the_breaker_does(tmp_path: Path, openjev_on_fake: RunningOpenJev) -> None:
    """The key revoked after two rows: the third row's 401 stops the run (exit 1), the two answers kept
    and the command that resumes it said, instead of every other row being sent to fail."""
    rows, out = rows_file(tmp_path, 12), tmp_path / "a.jsonl"
    posts: list[int] = []

    def revoked_after_two(method: str, path: str) -> Scripted:
        if method != "POST":
            return None
        posts.append(1)
        return None if len(posts) <= 2 else (401, {}, b'{"detail": {"error_type": "authentication_error"}}')

    proxy = ScriptedServer(revoked_after_two, openjev_on_fake.url)
    try:
        done, _ = classify(rows, proxy.url, out, "--concurrency", "1", "--api-key", WRONG)
    finally:
        proxy.stop()
    assert done.returncode == 1, done.stderr
    assert f"{proxy.url} refused the key (POST /v1/systemone answered 401)" in done.stderr
    assert proxy.posts == 3 and len(answers_of(out)) == 2
    assert "2 of 12 rows have an answer kept" in done.stderr and "resume with:" in done.stderr
    assert WRONG not in done.stderr


def test_a_503_with_retry_after_is_waited_for_and_one_without_is_a_failure(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    """A backend starting for 3 s (openjev's 503 with Retry-After): eight rows wait and all end answered,
    though that is more tries than --max-retries 1 allows and more failures than --max-failures 2; the
    same 503 without Retry-After is a failure: each row tried twice, the breaker stops the run."""
    rows = rows_file(tmp_path, 8)
    started = time.monotonic()

    def loading(method: str, path: str) -> Scripted:
        if method == "POST" and time.monotonic() < started + 3.0:
            return (503, {"retry-after": "1"}, b'{"detail": {"error_type": "not_ready"}}')
        return None

    proxy = ScriptedServer(loading, openjev_on_fake.url)
    limits = ["--max-retries", "1", "--max-failures", "2", "--concurrency", "8"]
    try:
        done, _ = classify(rows, proxy.url, tmp_path / "a.jsonl", *limits)
        assert done.returncode == 0 and len(answers_of(tmp_path / "a.jsonl")) == 8, done.stderr
        assert proxy.posts > 8 * 2, proxy.posts
    finally:
        proxy.stop()
    bare = ScriptedServer(lambda method, path: None if method == "GET" else (503, {}, b"down"), openjev_on_fake.url)
    try:
        limits = ["--max-retries", "1", "--max-failures", "3", "--concurrency", "1"]
        done, _ = classify(rows, bare.url, tmp_path / "b.jsonl", *limits)
        assert done.returncode == 1 and "stopped after 3 failures in a row (the last: HTTP 503 down)" in done.stderr
        assert bare.posts == 3, bare.posts
    finally:
        bare.stop()
