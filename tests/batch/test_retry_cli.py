"""`openjev classify` through a flaky network: a loopback proxy in front of openjev (over the fake SGLang)
that answers 502 to every 7th call, then stops listening for a second mid-run; every row ends answered."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from openjev.backends.supervised import free_port
from tests.batch.test_eval_cli import CHOICE, STATES, answers_of, openjev_cli, write_rows
from tests.conftest import ServeOpenJev, eventually
from tests.fake_sglang import FakeSGLang

PASSED_ON = ("content-type", "retry-after", "retry-after-ms")


class FlakyProxy:
    """Forwards every request to `target`; every `fail_every`-th POST is answered 502 instead, and
    `pause` stops listening (connections refused) for a while."""

    def __init__(self, target: str, fail_every: int = 0) -> None:
        self.target, self.fail_every, self.posts = target, fail_every, 0
        self.lock = threading.Lock()
        self.url = f"http://127.0.0.1:{free_port()}"
        self.start()

    def start(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", int(self.url.rsplit(":", 1)[1])), self.handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def pause(self, seconds: float) -> None:
        self.stop()
        time.sleep(seconds)
        self.start()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.forward("GET")

            def do_POST(self) -> None:
                self.forward("POST")

            def forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with proxy.lock:
                    proxy.posts += method == "POST"
                    failed = method == "POST" and proxy.fail_every and proxy.posts % proxy.fail_every == 0
                if failed:
                    self.send_response(502)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                headers = {"content-type": self.headers.get("content-type") or "application/json"}
                answer = httpx.request(method, proxy.target + self.path, content=body, headers=headers, timeout=60)
                self.send_response(answer.status_code)
                for name in PASSED_ON:
                    if name in answer.headers:
                        self.send_header(name, answer.headers[name])
                self.send_header("content-length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def test_a_502_every_7th_call_and_a_server_gone_for_a_second_both_end_with_every_row_answered(
    tmp_path: Path, serve_openjev: ServeOpenJev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path
) -> None:
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir))
    rows = write_rows(
        tmp_path / "in.jsonl", [{"state": f"{state} ({n})", "question": CHOICE} for n, state in enumerate(STATES * 2)]
    )
    proxy = FlakyProxy(server.url, fail_every=7)
    try:
        flaky = openjev_cli("classify", str(rows), "--url", proxy.url, "--out", str(tmp_path / "a.jsonl"))
        assert flaky.returncode == 0, flaky.stderr
        assert len(answers_of(tmp_path / "a.jsonl")) == 2 * len(STATES)
        assert f"{2 * len(STATES)} of {2 * len(STATES)} rows answered" in flaky.stderr
        assert "(502: 3)" in flaky.stderr, flaky.stderr
        proxy.fail_every = 0
        fake_sglang.generate_delay = 0.2
        out = tmp_path / "b.jsonl"
        command = [sys.executable, "-m", "openjev", "classify", str(rows), "--url", proxy.url, "--out", str(out)]
        run = subprocess.Popen([*command, "--concurrency", "1"], stderr=subprocess.PIPE, text=True, env=os.environ)
        assert eventually(lambda: out.is_file() and out.read_text().count('"answer":') >= 3, timeout=60)
        proxy.pause(1.0)
        _, said = run.communicate(timeout=120)
    finally:
        proxy.stop()
    assert run.returncode == 0, said
    assert len(answers_of(out)) == 2 * len(STATES) and "connection: " in said
