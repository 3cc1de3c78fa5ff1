"""The embedded default as a server of its own, for `openjev eval` and `classify` run without `--url`.

`openjev serve` is started as a child process on a free port of 127.0.0.1 with the caller's environment
(so every OPENJEV_* setting applies), waited for until `/health` says ready, and stopped when the
block ends. Talking to it over HTTP makes the embedded default and any other Jev server one code path.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import IO

import httpx

from openjev.backends.supervised import free_port

READY_TIMEOUT_S = 900.0


class ServerFailed(RuntimeError):
    """The embedded server exited or did not become ready; the message carries the end of its log."""


@contextlib.contextmanager
def embedded_server(ready_timeout: float = READY_TIMEOUT_S) -> Iterator[str]:
    """The base URL of a ready `openjev serve` on the embedded default, stopped afterwards."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "openjev", "serve", "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            _wait_ready(url, process, log, ready_timeout)
            print(f"openjev: the embedded default serves this run at {url}", file=sys.stderr)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: IO[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerFailed(f"openjev serve exited with {process.returncode}:\n{_tail(log)}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.25)
    raise ServerFailed(f"openjev serve was not ready within {timeout:.0f} s:\n{_tail(log)}")


def _tail(log: IO[bytes], size: int = 4000) -> str:
    log.seek(0, os.SEEK_END)
    log.seek(max(0, log.tell() - size))
    return log.read().decode(errors="replace")
