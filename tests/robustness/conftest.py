"""Shared by the robustness suites: a figures record (printed, and written as JSON into the test's tmp
dir), the resident memory of a server process, and `keyed`, a keyed openjev on the fake SGLang."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RunningOpenJev, launch_openjev, stop_openjev
from tests.fake_sglang import FakeSGLang

Record = Callable[..., None]


def rss_mib(pid: int) -> float:
    """Resident memory of process `pid` in MiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


@pytest.fixture
def figures(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Record]:
    """`figures(name=value, ...)` records the suite's numbers; at the end of the test they are printed
    (seen with `-s`) and written to `<tmp_path>/figures.json`."""
    recorded: dict[str, Any] = {}

    def record(**values: Any) -> None:
        recorded.update(values)

    yield record
    path = tmp_path / "figures.json"
    path.write_text(json.dumps(recorded, indent=2))
    print(f"\n{request.node.name}: {json.dumps(recorded)}\n(figures written to {path})")


#: Polls `/health/live` every 10 ms for `seconds` in its own process (no GIL shared with the senders);
#: prints the latencies in seconds as JSON.
POLLER = """
import json, sys, time, httpx
url, seconds = sys.argv[1], float(sys.argv[2])
latencies = []
with httpx.Client(base_url=url, timeout=30) as http:
    http.get("/health/live").raise_for_status()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        http.get("/health/live").raise_for_status()
        latencies.append(time.perf_counter() - started)
        time.sleep(0.01)
print(json.dumps(latencies))
"""
#: Posts each `<kind>.body` (with `<kind>.headers`, to `<kind>.path`) from a directory in a loop, `count`
#: threads per kind (`kind:count` arguments), for `seconds`; prints the statuses per kind as JSON.
SENDERS = """
import json, pathlib, sys, threading, time, httpx
url, seconds, folder = sys.argv[1], float(sys.argv[2]), pathlib.Path(sys.argv[3])
statuses, stop = {}, time.monotonic() + seconds
def send(kind):
    content = (folder / f"{kind}.body").read_bytes()
    headers = json.loads((folder / f"{kind}.headers").read_text())
    path = (folder / f"{kind}.path").read_text()
    with httpx.Client(base_url=url, timeout=120) as http:
        while time.monotonic() < stop:
            statuses[kind].append(http.post(path, content=content, headers=headers).status_code)
threads = []
for argument in sys.argv[4:]:
    kind, count = argument.split(":")
    statuses[kind] = []
    threads += [threading.Thread(target=send, args=(kind,)) for _ in range(int(count))]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps(statuses))
"""


def p99(latencies: list[float]) -> float:
    return statistics.quantiles(latencies, n=100, method="inclusive")[98]


#: A body to send: its bytes, its headers, how many senders post it at once, and the path (by default
#: `/v1/systemone`).
Body = tuple[bytes, dict[str, str], int] | tuple[bytes, dict[str, str], int, str]


def liveness_under(url: str, bodies: dict[str, Body], folder: Path, seconds: float) -> tuple[list[float], dict]:
    """`/health/live`'s latencies (seconds) while senders post `bodies` for `seconds`, and each kind's
    statuses. Senders and poller run in processes of their own: their GIL is not the server's."""
    for kind, (content, headers, *rest) in bodies.items():
        (folder / f"{kind}.body").write_bytes(content)
        (folder / f"{kind}.headers").write_text(json.dumps(headers))
        (folder / f"{kind}.path").write_text(rest[1] if len(rest) > 1 else "/v1/systemone")
    counts = [f"{kind}:{body[2]}" for kind, body in bodies.items()]
    senders = subprocess.Popen(
        [sys.executable, "-c", SENDERS, url, str(seconds), str(folder), *counts], stdout=subprocess.PIPE, text=True
    )
    poller = subprocess.Popen([sys.executable, "-c", POLLER, url, str(seconds)], stdout=subprocess.PIPE, text=True)
    output, _ = poller.communicate(timeout=seconds + 60)
    sent, _ = senders.communicate(timeout=seconds + 120)
    return json.loads(output), json.loads(sent)


#: The API key of `keyed`.
KEY = "door-key"


@pytest.fixture(scope="module")
def keyed(qwen_tokenizer_dir, tmp_path_factory) -> Iterator[tuple[RunningOpenJev, FakeSGLang]]:
    fake = FakeSGLang(vision=True, tokenizer_path=str(qwen_tokenizer_dir)).start()
    env = {"OPENJEV_API_KEY": KEY, "OPENJEV_BODY_READ_TIMEOUT": "60"}
    server = launch_openjev(
        "--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir),
        log_dir=tmp_path_factory.mktemp("logs"), env=env, timeout=240,
    )  # fmt: skip
    try:
        yield server, fake
    finally:
        stop_openjev(server)
        fake.stop()


def address(server: RunningOpenJev) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").split(":")
    return host, int(port)
