"""openjev's two HTTP/1.1 protocols side by side: httptools (compiled) and h11 (pure Python), each
with openjev's bounds (`api/server.py`), serving a bare ASGI app in a uvicorn of its own.

Each round sends the same requests to both, alternating, over one keep-alive connection each, so
both see the same machine noise: a small POST (a 300-byte JSON body, as a short `/v1/systemone`
request) and a 1 MiB POST (a long state). Printed per case: p50 and p99 of each in microseconds and
the ratio of p50s (h11 / httptools). The app reads the body and answers 2 bytes, so the figures are
the protocol's own cost (client and servers share one process, so both pay the same GIL).

    uv run python benchmarks/http_protocols.py [--requests 2000]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from openjev.api.server import HeadDeadlineH11Protocol, http_protocol
from openjev.backends.supervised import free_port


async def app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@contextmanager
def serving(protocol: type) -> Iterator[int]:
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, http=protocol, log_level="error", loop="uvloop")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def exchange(sock: socket.socket, request: bytes) -> float:
    started = time.perf_counter()
    sock.sendall(request)
    answer = b""
    while not answer.endswith(b"ok"):
        answer += sock.recv(65536)
    return time.perf_counter() - started


def request(size: int) -> bytes:
    body = b'{"state": "' + b"x" * size + b'"}'
    return b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    count = parser.parse_args().requests
    protocols = {"httptools": http_protocol(30.0, 1000), "h11": type("H11", (HeadDeadlineH11Protocol,), {})}
    with serving(protocols["httptools"]) as fast_port, serving(protocols["h11"]) as h11_port:
        for name, size, times in (("300 B body", 280, count), ("1 MiB body", 1 << 20, count // 10)):
            payload = request(size)
            seen: dict[str, list[float]] = {"httptools": [], "h11": []}
            with (
                socket.create_connection(("127.0.0.1", fast_port)) as fast,
                socket.create_connection(("127.0.0.1", h11_port)) as slow,
            ):
                for _ in range(times):
                    seen["httptools"].append(exchange(fast, payload))
                    seen["h11"].append(exchange(slow, payload))
            p50 = {key: statistics.median(values) * 1e6 for key, values in seen.items()}
            p99 = {key: statistics.quantiles(values, n=100)[98] * 1e6 for key, values in seen.items()}
            print(
                f"{name}: httptools p50 {p50['httptools']:.0f} us p99 {p99['httptools']:.0f} us; "
                f"h11 p50 {p50['h11']:.0f} us p99 {p99['h11']:.0f} us; "
                f"h11 / httptools {p50['h11'] / p50['httptools']:.2f}"
            )


if __name__ == "__main__":
    main()
