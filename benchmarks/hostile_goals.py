"""The hostile-input bounds' goals, replayed from outside as a hostile client would, against today's code.

Starts `openjev serve` over the fake SGLang (tests/fake_sglang) three times: open (no key), keyed, and
for fits (its tasks directory holding a FIFO named like a task file). A `/health/live` poller runs in a
process of its own throughout; the server's resident memory is sampled every 10 ms from /proc. Each
repro of the goals' list is sent on raw sockets where framing matters (the shapes are
`tests/robustness/hostile_shapes.py`'s), and held to its goal:

- no request of at most 40 MiB, compressed or not, adds more than 512 MiB; the 464-byte zstd body (a
  12M-digit run) and the 12M-digit state refused in under 1 s with under 64 MiB of growth;
- with no key (on the keyed server), no connection adds more than 64 MiB, each head bypass refused;
- 8 background fits: a well-behaved caller gets no 529; `/health/live` p99 under 50 ms during any fit.

Repros the goals do not bound (slow bodies, 32 x 39 MiB at once, dribbled heads, cancelled fits'
readouts, a page's bytes, the FIFO) are reported with what they did.

    uv run python benchmarks/hostile_goals.py [--out figures.json]

Prints one row per repro: the answer, seconds, peak growth (MiB), `/health/live` p99 over it, met.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hostile_fits import fit_rows
from hostile_probes import (
    HEADER,
    Liveness,
    Row,
    caller_statuses,
    dribblers,
    memory_peak,
    release,
    slow_body,
)

from tests.conftest import RunningOpenJev, fetch_qwen_tokenizer, launch_openjev, stop_openjev
from tests.fake_sglang import FakeSGLang
from tests.robustness.conftest import address
from tests.robustness.hostile_shapes import Shape, head, read_answer, send_body, send_wire

MIB = 1024 * 1024
ASKED = {"model": "jev-latest", "state": "Is the parcel late?", "questions": {"q": {"type": "noul"}}}
HEAD_KINDS = {
    "long_head": "a head of endless lines",
    "trailers": "trailers of a chunked body",
    "unread_body": "GET answered before its body",
    "pipelined": "head behind an unread response",
}


def body_row(server: RunningOpenJev, live: Liveness, name: str, shape: Shape, seconds: float, mib: float) -> Row:
    """One body shape sent once; met where it is refused or answered within `seconds` and `mib`."""
    since = time.time()
    with memory_peak(server.process.pid) as found:
        outcome = send_body(shape, address(server))
    met = outcome.status is not None and found["seconds"] < seconds and found["growth"] < mib
    answer = f"{outcome.status} ({outcome.sent:,} B sent)"
    goal = f"< {seconds:g} s, < +{mib:g} MiB"
    return Row(name, answer, found["seconds"], found["growth"], live.p99_ms(since), goal, met)


def raw_post(server_address: tuple[str, int], body: bytes, coding: str | None) -> int | None:
    headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    with socket.create_connection(server_address, timeout=120) as sock:
        message = head("POST", "/v1/systemone", headers | ({"Content-Encoding": coding} if coding else {}))
        with contextlib.suppress(OSError):
            sock.sendall(message + b"\r\n" + body)
        return read_answer(sock, 120)[0]


def concurrent_row(
    server: RunningOpenJev, live: Liveness, name: str, body: bytes, count: int, bound: float, coding: str | None = None
) -> Row:
    """`count` copies of `body` sent at once; met where the peak growth stays under `bound` MiB."""
    since = time.time()
    with memory_peak(server.process.pid) as found, ThreadPoolExecutor(count) as pool:
        statuses = list(pool.map(lambda _: raw_post(address(server), body, coding), range(count)))
    counted = {str(status): statuses.count(status) for status in sorted(set(statuses), key=str)}
    met = found["growth"] < bound and server.process.poll() is None
    answer = ", ".join(f"{n}x{status}" for status, n in counted.items())
    return Row(name, answer, found["seconds"], found["growth"], live.p99_ms(since), f"< +{bound:g} MiB", met)


def body_rows(server: RunningOpenJev, live: Liveness) -> list[Row]:
    route = "/v1/systemone"
    lists = " ,".join(["[" * 50 + "]" * 50] * 400_000)  # 39 MiB of 50-deep lists, spaced before their commas
    nested = json.dumps(ASKED).replace('"Is the parcel late?"', f"[{lists}]")
    packed = zstandard.ZstdCompressor(level=19).compress(nested.encode())
    rows = [
        body_row(server, live, "12M-digit run as zstd", Shape("run", route, 12_000_000, "digits", "zstd"), 1, 64),
        body_row(server, live, "12M-digit state", Shape("run", route, 12_000_000, "digits"), 1, 64),
        body_row(server, live, "4M CJK state", Shape("run", route, 4_000_000, "cjk"), 30, 512),
        body_row(server, live, "50-deep nested lists, 39 MiB", Shape("nested", route, 39 * MIB), 30, 512),
        concurrent_row(server, live, f"2 x 50-deep nested lists, {len(packed):,} B zstd", packed, 2, 512, "zstd"),
    ]
    plain = json.dumps({**ASKED, "state": "word " * (39 * MIB // 5)}).encode()
    rows.append(concurrent_row(server, live, "32 x 39 MiB bodies at once (peak)", plain, 32, 1024))
    rows[-1].goal = "reported (in-flight room 512 MiB)"
    return rows


def wire_rows(server: RunningOpenJev, live: Liveness, lines: int, label: str, bound: float) -> list[Row]:
    """Each head bypass on one connection at a time: `lines` header lines; met where it is refused
    (an answer, or the connection closed) and the server grows less than `bound` MiB."""
    rows = []
    for kind, what in HEAD_KINDS.items():
        since = time.time()
        with memory_peak(server.process.pid) as found:
            outcome = send_wire(Shape(kind, "/v1/systemone", lines * 4), address(server))
        sent_lines = outcome.sent // 16
        answer = f"{outcome.status or 'closed'} ({sent_lines:,} lines)"
        met = found["growth"] < bound and outcome.status != 200 and server.process.poll() is None
        goal = f"refused, < +{bound:g} MiB"
        rows.append(Row(f"{label}: {what}", answer, found["seconds"], found["growth"], live.p99_ms(since), goal, met))
    return rows


def slow_bodies_row(server: RunningOpenJev, live: Liveness, count: int = 32, requests: int = 50) -> Row:
    """`count` bodies sent at 1 KiB/s while a well-behaved caller sends `requests` requests."""
    stop, statuses, since = threading.Event(), [], time.time()
    senders = [threading.Thread(target=slow_body, args=(address(server), stop, statuses)) for _ in range(count)]
    with memory_peak(server.process.pid) as found:
        for sender in senders:
            sender.start()
        time.sleep(1.0)
        answered = caller_statuses(server.url, requests, ASKED)
        stop.set()
        for sender in senders:
            sender.join(60)
    refused = answered.count(529)
    answer = f"caller {refused}x529 of {requests}"
    row = Row(f"{count} slow bodies + a caller", answer, found["seconds"], found["growth"], live.p99_ms(since))
    row.goal, row.met = "caller no 529", refused == 0
    row.detail = {"caller": answered, "slow": statuses}
    return row


def dribbled_row(server: RunningOpenJev, live: Liveness, counts: list[int]) -> Row:
    """`counts` connections holding unfinished heads, from processes of their own, then a fresh client."""
    since = time.time()
    with memory_peak(server.process.pid) as found:
        held, said = dribblers(address(server), counts)
        try:
            started = time.monotonic()
            fresh = send_body(Shape("run", "/v1/systemone", 1024, "latin"), address(server))
            waited = time.monotonic() - started
        finally:
            release(held)
    name = " + ".join(f"{count:,}" for count in counts) + " dribbled heads, then a fresh client"
    answer = f"fresh {fresh.status} in {waited:.2f} s"
    row = Row(name, answer, found["seconds"], found["growth"], live.p99_ms(since), "fresh client served", None)
    row.met, row.detail = fresh.status is not None and fresh.status < 500, {"opened, failed": said}
    return row


def serve(fake: FakeSGLang, tokenizer: Path, logs: Path, env: dict[str, str] | None = None) -> RunningOpenJev:
    return launch_openjev("--connect", fake.url, "--tokenizer", str(tokenizer), log_dir=logs, env=env, timeout=240)


def open_rows(tokenizer: Path, logs: Path) -> list[Row]:
    fake = FakeSGLang(tokenizer_path=str(tokenizer)).start()
    server = serve(fake, tokenizer, logs / "open")
    live = Liveness(server.url, logs)
    try:
        rows = body_rows(server, live)
        rows += wire_rows(server, live, 10_000_000, "open, 10M lines", 512)
        rows.append(slow_bodies_row(server, live))
        rows.append(dribbled_row(server, live, [10_000, 10_000]))
        return rows
    finally:
        live.stop()
        stop_openjev(server)
        fake.stop()


def keyed_rows(tokenizer: Path, logs: Path) -> list[Row]:
    fake = FakeSGLang(tokenizer_path=str(tokenizer)).start()
    server = serve(fake, tokenizer, logs / "keyed", {"OPENJEV_API_KEY": "hostile-goals-key"})
    live = Liveness(server.url, logs)
    try:
        return wire_rows(server, live, 2_000_000, "keyed, no key, 2M lines", 64)
    finally:
        live.stop()
        stop_openjev(server)
        fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="Write the rows as JSON here.")
    parser.add_argument("--only", choices=["open", "keyed", "fits"], action="append", help="Run these parts only.")
    arguments = parser.parse_args()
    parts = arguments.only or ["open", "keyed", "fits"]
    tokenizer = fetch_qwen_tokenizer()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="hostile-goals-") as scratch:
        logs = Path(scratch)
        for part, run in (("open", open_rows), ("keyed", keyed_rows), ("fits", fit_rows)):
            if part in parts:
                (logs / part).mkdir()
                rows += run(tokenizer, logs)
    print(HEADER)
    for row in rows:
        print(row.line())
    machine = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "load_average_end": os.getloadavg()}
    if arguments.out:
        arguments.out.write_text(json.dumps({"machine": machine, "rows": [row.as_dict() for row in rows]}, indent=2))


if __name__ == "__main__":
    main()
