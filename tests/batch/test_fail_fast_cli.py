"""`openjev classify` against servers that are down, misaddressed, slow or overloaded: the run stops in
seconds naming the URL, waits are never zero, and no line it prints holds the key. The servers are real
HTTP servers on 127.0.0.1: a scripted one for faults, openjev over the fake SGLang for answers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from openjev.backends.supervised import free_port
from openjev.batch.client import JITTER
from tests.batch.test_eval_cli import CHOICE, STATES, answers_of, openjev_cli, requests_with_status, write_rows
from tests.conftest import RunningOpenJev, ServeOpenJev, eventually
from tests.fake_sglang import FakeSGLang

#: (status, headers, body) a scripted server answers, or None to pass the request on to its target.
Scripted = tuple[int, dict[str, str], bytes] | None


class Listening(ThreadingHTTPServer):
    """A backlog for a run's every connection at once: past socketserver's 5, a connection waits a
    SYN retry (about 1 s) before it is taken."""

    request_queue_size = 64


class ScriptedServer:
    """Answers every request as `script(method, path)` says; None forwards it to `target`. Counts POSTs."""

    def __init__(self, script: Callable[[str, str], Scripted], target: str | None = None) -> None:
        self.script, self.target, self.posts = script, target, 0
        #: (when, body) of every POST, in the order they came.
        self.posted: list[tuple[float, bytes]] = []
        self.lock = threading.Lock()
        self.url = f"http://127.0.0.1:{free_port()}"
        self.server = Listening(("127.0.0.1", int(self.url.rsplit(":", 1)[1])), self.handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.answer("GET")

            def do_POST(self) -> None:
                self.answer("POST")

            def answer(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with scripted.lock:
                    scripted.posts += method == "POST"
                    if method == "POST":
                        scripted.posted.append((time.monotonic(), body))
                said = scripted.script(method, self.path)
                if said is None:
                    headers = {"content-type": "application/json"}
                    real = httpx.request(method, f"{scripted.target}{self.path}", content=body, headers=headers)
                    said = (real.status_code, {"content-type": "application/json"}, real.content)
                status, headers, content = said
                self.send_response(status)
                for name, value in {**headers, "content-length": str(len(content))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(content)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def rows_file(tmp_path: Path, n: int) -> Path:
    return write_rows(tmp_path / "in.jsonl", [{"state": f"ticket {i}", "question": CHOICE} for i in range(n)])


def classify(rows: Path, url: str, out: Path, *more: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = openjev_cli("classify", str(rows), "--url", url, "--out", str(out), *more)
    return done, time.monotonic() - started


def test_a_dead_server_stops_a_200_row_run_in_seconds_naming_the_url(tmp_path: Path) -> None:
    rows, out = rows_file(tmp_path, 200), tmp_path / "a.jsonl"
    dead = ScriptedServer(lambda method, path: (500, {}, b"internal error"))
    sick = ScriptedServer(lambda method, path: (200, {}, b"{}") if path == "/health" else (500, {}, b"boom"))
    failed = ScriptedServer(lambda method, path: (503, {"retry-after": "1"}, b'{"status": "failed", "ready": false}'))
    try:
        done, took = classify(rows, failed.url, out)
        assert done.returncode == 1 and took < 15 and "the server could not start" in done.stderr, done.stderr
        done, took = classify(rows, dead.url, out)
        assert done.returncode == 1 and took < 15, done.stderr
        assert f"GET {dead.url}/health answered 500" in done.stderr and dead.posts == 0
        # Healthy by /health, but every row fails: the failures in a row stop it.
        done, took = classify(rows, sick.url, out)
        assert done.returncode == 1 and took < 15, done.stderr
        assert "stopped after 10 failures in a row (the last: HTTP 500 boom)" in done.stderr
        assert sick.posts < 20 and "resume with:" in done.stderr
    finally:
        dead.stop()
        sick.stop()
        failed.stop()


def test_a_url_without_scheme_or_with_v1_is_told_at_once(tmp_path: Path, openjev_on_fake: RunningOpenJev) -> None:
    rows, out = rows_file(tmp_path, 3), tmp_path / "a.jsonl"
    bare = openjev_on_fake.url.removeprefix("http://")
    done, took = classify(rows, bare, out)
    assert done.returncode == 2 and took < 15
    assert f"did you mean http://{bare}?" in done.stderr and "Traceback" not in done.stderr
    done, took = classify(rows, openjev_on_fake.url + "/v1", out)
    assert done.returncode == 1 and took < 15
    assert f"drop the /v1: --url {openjev_on_fake.url}" in done.stderr
    assert requests_with_status(openjev_on_fake, 404) == 0, "a /v1 URL must not be asked row by row"
    done, took = classify(rows, "http://127.0.0.1:9", out)
    assert done.returncode == 1 and took < 15 and "no server answers at http://127.0.0.1:9" in done.stderr


def test_a_200_that_is_no_jev_answer_is_a_row_error_not_a_traceback(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    """Another service behind the URL answering 200: each row without an answer, saying what came back."""
    rows, out = rows_file(tmp_path, 3), tmp_path / "a.jsonl"
    for content in (b'{"id": "chatcmpl-1", "choices": []}', b"<html>welcome</html>"):
        other = ScriptedServer(
            lambda method, path, content=content: None if method == "GET" else (200, {}, content),
            openjev_on_fake.url,
        )
        try:
            done, _ = classify(rows, other.url, out, "--restart")
        finally:
            other.stop()
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert "0 of 3 rows answered" in done.stderr and "HTTP 200 not a Jev answer: " in done.stderr
        assert content.decode()[:20] in done.stderr


def test_retry_after_zero_never_spins_and_max_retries_bounds_each_row(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    rows, out = rows_file(tmp_path, 4), tmp_path / "a.jsonl"
    opened = time.monotonic() + 2.0

    def overloaded_for_two_seconds(method: str, path: str) -> Scripted:
        busy = method == "POST" and time.monotonic() < opened
        return (503, {"retry-after": "0"}, b'{"error": "busy"}') if busy else None

    proxy = ScriptedServer(overloaded_for_two_seconds, openjev_on_fake.url)
    try:
        done, _ = classify(rows, proxy.url, out, "--concurrency", "4")
        assert done.returncode == 0, done.stderr
        assert len(answers_of(out)) == 4
        # At least 0.5 s between tries of a row: 4 rows in 2 s try at most 4 * 5 times, never thousands.
        assert proxy.posts <= 4 + 4 * 5, proxy.posts
    finally:
        proxy.stop()
    failing = ScriptedServer(
        lambda method, path: None if method == "GET" else (502, {}, b"bad gateway"), openjev_on_fake.url
    )
    try:
        done, _ = classify(rows, failing.url, tmp_path / "b.jsonl", "--max-retries", "1", "--max-failures", "100")
        assert done.returncode == 1 and failing.posts == 4 * 2, (failing.posts, done.stderr)
        assert "0 of 4 rows answered" in done.stderr
    finally:
        failing.stop()


def test_a_named_wait_is_kept_and_jittered_row_by_row(tmp_path: Path, openjev_on_fake: RunningOpenJev) -> None:
    """Eight rows at once meet `Retry-After: 1`: each waits at least the second asked, at most a JITTER
    share more, and not all the same share (eight draws of U(0, 0.25 s) span under 50 ms with p ~ 1e-4),
    so clients turned away together do not come back together."""
    rows, out = rows_file(tmp_path, 8), tmp_path / "a.jsonl"
    first: list[float] = []

    def busy_at_first(method: str, path: str) -> Scripted:
        if method != "POST":
            return None
        first.append(first[0] if first else time.monotonic())
        return (503, {"retry-after": "1"}, b'{"error": "busy"}') if time.monotonic() < first[0] + 0.5 else None

    proxy = ScriptedServer(busy_at_first, openjev_on_fake.url)
    try:
        done, _ = classify(rows, proxy.url, out, "--concurrency", "8")
        assert done.returncode == 0 and len(answers_of(out)) == 8, done.stderr
    finally:
        proxy.stop()
    tries: dict[bytes, list[float]] = {}
    for when, body in proxy.posted:
        tries.setdefault(body, []).append(when)
    waits = [times[1] - times[0] for times in tries.values()]
    assert len(waits) == 8 and all(len(times) == 2 for times in tries.values()), tries
    assert all(1.0 <= wait <= 1.0 * (1 + JITTER) + 0.5 for wait in waits), waits
    assert max(waits) - min(waits) >= 0.05, waits


def test_timeout_and_rps_shape_each_request(tmp_path: Path, openjev_on_fake: RunningOpenJev) -> None:
    rows, out = rows_file(tmp_path, 6), tmp_path / "a.jsonl"
    done, took = classify(rows, openjev_on_fake.url, out, "--rps", "4", "--concurrency", "6")
    assert done.returncode == 0, done.stderr
    # Six starts at four a second: the last one at least 1.25 s after the first.
    assert took >= 1.25 and len(answers_of(out)) == 6

    def slow(method: str, path: str) -> Scripted:
        if method == "POST":
            time.sleep(3)
        return None

    proxy = ScriptedServer(slow, openjev_on_fake.url)
    try:
        done, took = classify(rows, proxy.url, tmp_path / "b.jsonl", "--timeout", "0.5", "--max-retries", "0")
        assert done.returncode == 1 and "ReadTimeout" in done.stderr
    finally:
        proxy.stop()


def test_sigterm_stops_like_ctrl_c_and_no_line_shows_the_key(
    tmp_path: Path, serve_openjev: ServeOpenJev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path
) -> None:
    fake_sglang.generate_delay = 0.8
    key = "sk-test-0123456789abcdef"
    server = serve_openjev(
        "--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env={"OPENJEV_API_KEY": key}
    )
    rows = write_rows(tmp_path / "in.jsonl", [{"state": state, "question": CHOICE} for state in STATES])
    out = tmp_path / "answers.jsonl"
    command = ["classify", str(rows), "--url", server.url, "--out", str(out), "--concurrency", "1", "--api-key", key]
    run = subprocess.Popen(
        [sys.executable, "-m", "openjev", *command], stderr=subprocess.PIPE, text=True, env=os.environ
    )
    assert eventually(lambda: out.is_file() and out.read_text().count('"answer":') >= 2, timeout=60)
    run.send_signal(signal.SIGTERM)
    _, said = run.communicate(timeout=30)
    assert run.returncode == 143, said
    kept = len(answers_of(out))
    assert f"openjev: terminated (SIGTERM). {kept} of {len(STATES)} rows have an answer kept" in said
    assert key not in said and '--api-key "$OPENJEV_API_KEY"' in said
    resumed = openjev_cli(*command[:-2], env={"OPENJEV_API_KEY": key})
    assert resumed.returncode == 0 and len(answers_of(out)) == len(STATES), resumed.stderr
    assert json.loads(out.read_text().splitlines()[-1])["id"]
