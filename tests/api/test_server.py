"""Both HTTP protocols (httptools, and the h11 fallback) close a connection whose request head is late,
and neither touches one that sends its head in time."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from openjev.api.server import HeadDeadlineH11Protocol, http_protocol
from openjev.backends.supervised import free_port


async def hello(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def protocols() -> list[type]:
    chosen = http_protocol(0.5)
    fallback = type("H11At0.5s", (HeadDeadlineH11Protocol,), {"head_timeout": 0.5})
    return [chosen, fallback]


@pytest.fixture(params=protocols(), ids=lambda protocol: protocol.__name__)
def server(request: pytest.FixtureRequest) -> Iterator[int]:
    port = free_port()
    config = uvicorn.Config(hello, host="127.0.0.1", port=port, http=request.param, log_level="warning")
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not running.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield port
    running.should_exit = True
    thread.join(10)


def test_the_compiled_parser_is_used_where_installed() -> None:
    pytest.importorskip("httptools")
    assert "HttpTools" in http_protocol(1.0).__name__


def test_a_late_head_is_closed_and_a_timely_one_answered(server: int) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=5) as slow:
        slow.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        assert slow.recv(100) == b""  # closed, nothing answered
        assert 0.3 < time.monotonic() - started < 3
    with socket.create_connection(("127.0.0.1", server), timeout=5) as timely:
        timely.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert timely.recv(100).startswith(b"HTTP/1.1 200")
        time.sleep(0.2)  # kept alive after its response: a second request still gets its full deadline
        timely.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert timely.recv(100).startswith(b"HTTP/1.1 200")
