"""Both HTTP protocols (httptools, and the h11 fallback) close a connection whose request head is late,
and neither touches one that sends its head in time; both answer a head over its bounds (bytes or
lines) with a 431 before their parser sees it, and count neither a body nor a second request's head
against the first's."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from openjev.api.server import MAX_HEAD_BYTES, MAX_HEAD_LINES, HeadDeadlineH11Protocol, http_protocol
from openjev.backends.supervised import free_port


async def hello(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
    if scope["type"] != "http":
        return
    if scope["method"] == "POST":  # the body read to its end, then answered
        while (await receive()).get("more_body"):
            pass
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


def exchange(port: int, *requests: bytes) -> bytes:
    """Send each request on one connection, reading its answer before the next; everything read."""
    answers = b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for request in requests:
            sock.sendall(request)
            answer = sock.recv(65536)
            answers += answer
            if b"431" in answer:
                while chunk := sock.recv(65536):
                    answers += chunk
    return answers


def test_a_head_over_its_bounds_is_a_431_and_one_within_them_is_answered(server: int) -> None:
    start = b"GET / HTTP/1.1\r\nHost: x\r\n"
    many_lines = start + b"X-A: b\r\n" * MAX_HEAD_LINES + b"\r\n"
    many_bytes = start + b"X-A: " + b"b" * MAX_HEAD_BYTES + b"\r\n\r\n"
    within = start + b"X-A: b\r\n" * (MAX_HEAD_LINES - 4) + b"X-B: " + b"b" * (MAX_HEAD_BYTES - 3000) + b"\r\n\r\n"
    for head in (many_lines, many_bytes):
        answer = exchange(server, head)
        assert answer.startswith(b"HTTP/1.1 431 ") and b"request_header_fields_too_large" in answer, answer[:200]
    assert exchange(server, within, within).count(b"HTTP/1.1 200") == 2


def test_a_body_and_the_next_head_are_not_counted_as_the_head(server: int) -> None:
    lines = b"\n" * (4 * MAX_HEAD_BYTES)
    post = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(lines), lines)
    get = b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * (MAX_HEAD_LINES - 3) + b"\r\n"
    assert exchange(server, post, get, post, get).count(b"HTTP/1.1 200") == 4
