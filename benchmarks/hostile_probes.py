"""Measuring tools for `hostile_goals.py`: a server's resident memory sampled while something runs, a
`/health/live` poller in a process of its own, raw-socket clients (slow bodies, dribbled heads, a
well-behaved caller), and a row of the results table.

A row is one repro of the hostile-input bounds: what was sent, what came back, the seconds it took,
the server's peak memory growth over it (MiB, sampled every 10 ms from /proc), the `/health/live`
p99 over it where a poller ran, and the goal it is held to (None where the repro only reports).
"""

from __future__ import annotations

import contextlib
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.robustness.conftest import rss_mib
from tests.robustness.hostile_shapes import head

#: Polls `/health/live` every 10 ms until killed or the server stops; one JSON line `[wall time,
#: latency s, status]` per probe.
POLLER = """
import json, sys, time, httpx
url, out = sys.argv[1], open(sys.argv[2], "w")
with httpx.Client(base_url=url, timeout=60) as http:
    while True:
        started = time.perf_counter()
        try:
            status = http.get("/health/live").status_code
        except httpx.HTTPError:  # the server stopped
            break
        out.write(json.dumps([time.time(), time.perf_counter() - started, status]) + "\\n")
        out.flush()
        time.sleep(0.01)
"""

#: Opens `count` connections that send the start of a head and never end it; prints how many opened,
#: then holds them until its stdin closes.
DRIBBLER = """
import socket, sys
host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
held, failed = [], 0
for _ in range(count):
    try:
        sock = socket.create_connection((host, port), timeout=5)
        sock.sendall(b"POST /v1/systemone HTTP/1.1\\r\\nHost: x\\r\\nX-Slow: ")
        held.append(sock)
    except OSError:
        failed += 1
print(len(held), failed, flush=True)
sys.stdin.read()
"""


@dataclass
class Row:
    name: str
    answer: str
    seconds: float
    growth_mib: float
    health_p99_ms: float | None = None
    goal: str = ""
    met: bool | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        p99 = "-" if self.health_p99_ms is None else f"{self.health_p99_ms:.0f}"
        met = {True: "met", False: "NOT MET", None: "-"}[self.met]
        return (
            f"{self.name:<56} {self.answer:<22} {self.seconds:>7.2f} {self.growth_mib:>8.0f} {p99:>7} "
            f"{met:<8} {self.goal}"
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


HEADER = f"{'repro':<56} {'answer':<22} {'seconds':>7} {'+MiB':>8} {'p99 ms':>7} {'goal':<8} bound"


@contextlib.contextmanager
def memory_peak(pid: int) -> Iterator[dict[str, float]]:
    """Samples `pid`'s resident memory every 10 ms while the block runs; `growth` (MiB over the value
    before it) and `seconds` are filled in at its end."""
    before, peak, done = rss_mib(pid), [0.0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            with contextlib.suppress(OSError, RuntimeError):
                peak[0] = max(peak[0], rss_mib(pid))
            time.sleep(0.01)

    found: dict[str, float] = {}
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    try:
        yield found
    finally:
        found["seconds"] = time.monotonic() - started
        time.sleep(0.05)
        done.set()
        sampler.join()
        found["growth"] = max(peak[0], before) - before


class Liveness:
    """A `/health/live` poller in its own process; `p99_ms(since)` over the probes made since then."""

    def __init__(self, url: str, folder: Path) -> None:
        self.path = folder / f"live-{time.monotonic_ns()}.jsonl"
        self.process = subprocess.Popen([sys.executable, "-c", POLLER, url, str(self.path)])
        while self.process.poll() is None and not (self.path.exists() and self.path.read_text()):
            time.sleep(0.05)

    def probes(self, since: float, until: float | None = None) -> list[float]:
        rows = [json.loads(line) for line in self.path.read_text().splitlines() if line.endswith("]")]
        return [latency for at, latency, _ in rows if at >= since and (until is None or at <= until)]

    def p99_ms(self, since: float, until: float | None = None) -> float:
        seen = self.probes(since, until)
        if len(seen) < 2:
            return float("nan")
        return statistics.quantiles(seen, n=100, method="inclusive")[98] * 1000

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def caller_statuses(url: str, requests: int, body: dict[str, Any]) -> list[int]:
    """A well-behaved caller: one request at a time, the next once the last is answered."""
    with httpx.Client(base_url=url, timeout=120) as http:
        return [http.post("/v1/systemone", json=body).status_code for _ in range(requests)]


def slow_body(address: tuple[str, int], stop: threading.Event, statuses: list[int | None]) -> None:
    """A POST announcing 1 MiB that sends 1 KiB a second until `stop`, then reads what came back."""
    with contextlib.suppress(OSError), socket.create_connection(address, timeout=60) as sock:
        message = head("POST", "/v1/systemone", {"Content-Type": "application/json", "Content-Length": "1048576"})
        sock.sendall(message + b"\r\n")
        while not stop.wait(1.0):
            sock.sendall(b" " * 1024)
        sock.settimeout(5)
        first = sock.recv(64)
        statuses.append(int(first.split(b" ")[1]) if first.startswith(b"HTTP/1.1 ") else None)


def dribblers(address: tuple[str, int], counts: list[int]) -> tuple[list[subprocess.Popen[str]], list[str]]:
    """Processes holding `counts[i]` unfinished heads each (their own descriptor limits); what each
    said it opened and failed to."""
    started = [
        subprocess.Popen(
            [sys.executable, "-c", DRIBBLER, address[0], str(address[1]), str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for count in counts
    ]
    said = [process.stdout.readline().strip() for process in started]  # type: ignore[union-attr]
    return started, said


def release(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        process.stdin.close()  # type: ignore[union-attr]
        process.wait(60)


def timed(action: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    result = action()
    return result, time.monotonic() - started
