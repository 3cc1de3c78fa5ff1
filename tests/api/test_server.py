"""Both HTTP protocols (httptools, and the h11 fallback) close a connection whose request head is late,
and neither touches one that sends its head in time; both answer a head over its bounds (bytes or
lines) with a 431 before their parser sees it, and count neither a body nor a second request's head
against the first's."""

from __future__ import annotations

import contextlib
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
    if scope["path"] == "/big":  # a response larger than the socket buffers hold, sent as the client reads
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % BIG)]})
        for _ in range(BIG // PART - 1):
            await send({"type": "http.response.body", "body": b"x" * PART, "more_body": True})
        await send({"type": "http.response.body", "body": b"x" * PART})
        return
    if scope["method"] == "POST" and scope["path"] != "/early":  # the body read to its end, then answered
        while (await receive()).get("more_body"):
            pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


BIG = 16 * 1024 * 1024
PART = 64 * 1024


#: Connections the servers here keep open at most.
MAX_CONNECTIONS = 8


def protocols() -> list[type]:
    chosen = http_protocol(0.5, MAX_CONNECTIONS)
    bounds = {"head_timeout": 0.5, "max_connections": MAX_CONNECTIONS}
    fallback = type("H11At0.5s", (HeadDeadlineH11Protocol,), bounds)
    return [chosen, fallback]


@pytest.fixture(params=protocols(), ids=lambda protocol: protocol.__name__)
def server(request: pytest.FixtureRequest) -> Iterator[int]:
    with serving(request.param) as port:
        yield port


@pytest.fixture(params=protocols(), ids=lambda protocol: protocol.__name__)
def patient_server(request: pytest.FixtureRequest) -> Iterator[int]:
    """As `server`, with a 5 s head deadline: what closes a connection sooner is another bound."""
    with serving(type(f"{request.param.__name__}Patient", (request.param,), {"head_timeout": 5.0})) as port:
        yield port


@contextlib.contextmanager
def serving(protocol: type) -> Iterator[int]:
    port = free_port()
    config = uvicorn.Config(hello, host="127.0.0.1", port=port, http=protocol, log_level="error")
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


def read_all(sock: socket.socket) -> bytes:
    answers = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(1 << 20):
            answers += chunk
    return answers


def test_trailers_count_against_the_head_bounds(server: int, request: pytest.FixtureRequest) -> None:
    """Header lines sent as trailers of a chunked body are refused as a head's would be (h11 bounds
    them in bytes as one event, httptools in lines and bytes per message); nothing is answered 200."""
    head = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n"
    for trailers in (b"X-T: 1\r\n" * (4 * MAX_HEAD_LINES), b"X-T: 1\r\n" * (4 * MAX_HEAD_BYTES)):
        with socket.create_connection(("127.0.0.1", server), timeout=10) as sock:
            with contextlib.suppress(OSError):
                sock.sendall(head + trailers + b"\r\n")
            answer = read_all(sock)
        if "H11" in request.node.name and len(trailers) < MAX_HEAD_BYTES:
            continue  # within h11's byte bound: answered as a valid request
        assert b"HTTP/1.1 200" not in answer and answer.startswith((b"HTTP/1.1 431", b"HTTP/1.1 400")), answer[:100]


def test_a_response_before_the_body_ends_the_connection(patient_server: int) -> None:
    """Answered before its announced body arrived, the connection is closed after the response: the
    body is never read as the next request's head."""
    early = b"POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n"
    with socket.create_connection(("127.0.0.1", patient_server), timeout=10) as sock:
        sock.sendall(early)
        started = time.monotonic()
        assert sock.recv(100).startswith(b"HTTP/1.1 200")
        with contextlib.suppress(OSError):
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 4)
        assert b"HTTP/1.1" not in read_all(sock)
        assert time.monotonic() - started < 3  # the linger, not the 5 s head deadline


def test_a_head_pipelined_behind_an_unread_response_is_counted(server: int) -> None:
    """The next head is counted from the end of the previous message, not of its response: a head of
    header lines pipelined behind a large response the client does not read yet is refused."""
    with socket.create_connection(("127.0.0.1", server), timeout=10) as sock:
        sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.3)  # the response is being written; the client reads nothing yet
        with contextlib.suppress(OSError):
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * (8 * MAX_HEAD_LINES) + b"\r\n")
        answer = read_all(sock)
    # Refused while the first response is being written: the connection is dropped (or the 431 follows
    # it); the pipelined head is never answered as a request.
    assert answer.startswith(b"HTTP/1.1 200") and b"HTTP/1.1 200" not in answer[100:]
    assert len(answer) < BIG or b"HTTP/1.1 431" in answer[BIG:]


def test_a_fresh_client_is_served_while_others_hold_every_connection(patient_server: int) -> None:
    """Past MAX_CONNECTIONS the oldest connection still waiting for a head is closed, before its head
    deadline: a new client is answered, the oldest ones find themselves closed, the newest are open."""
    held = []
    for _ in range(MAX_CONNECTIONS + 2):
        held.append(socket.create_connection(("127.0.0.1", patient_server), timeout=5))
        held[-1].sendall(b"GET / HTTP/1.1\r\n")  # a head begun, never ended
        time.sleep(0.02)
    try:
        assert exchange(patient_server, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        assert held[0].recv(100) == b"" and held[2].recv(100) == b""
        assert time.monotonic() - started < 1
        held[-1].settimeout(0.2)
        with pytest.raises(TimeoutError):
            held[-1].recv(100)
    finally:
        for sock in held:
            sock.close()


def test_a_keep_alive_client_between_requests_outlasts_the_dribblers(patient_server: int) -> None:
    """Of the connections waiting for a head, one that began a head goes first: the oldest connection,
    a client idle between two requests on it, is still served after the limit made room twice."""
    client = socket.create_connection(("127.0.0.1", patient_server), timeout=5)
    held = []
    try:
        client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert client.recv(65536).startswith(b"HTTP/1.1 200")
        for _ in range(MAX_CONNECTIONS + 1):
            held.append(socket.create_connection(("127.0.0.1", patient_server), timeout=5))
            held[-1].sendall(b"GET / HTTP/1.1\r\n")  # a head begun, never ended
            time.sleep(0.02)
        assert held[0].recv(100) == b"" and held[1].recv(100) == b""  # the dribblers made room
        client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert client.recv(65536).startswith(b"HTTP/1.1 200")
    finally:
        client.close()
        for sock in held:
            sock.close()
