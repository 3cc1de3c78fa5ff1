"""Slow and unwelcome clients over raw sockets against a real openjev: the API key is checked on the
headers before any body byte is read, bodies and request heads have deadlines, and only so many
bodies are received at once."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from tests.conftest import RunningOpenJev

NOUL_BODY = b'{"model": "jev-latest", "state": "x", "questions": {"q": {"type": "noul", "instructions": "?"}}}'


def open_request(server: RunningOpenJev, head: str, body: bytes = b"") -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(head.encode() + body)
    return sock


def post_head(length: int, *extra: str) -> str:
    lines = [
        "POST /v1/systemone HTTP/1.1",
        "Host: openjev",
        "Content-Type: application/json",
        f"Content-Length: {length}",
        *extra,
    ]
    return "\r\n".join(lines) + "\r\n\r\n"


def read_until_closed(sock: socket.socket, timeout: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took."""
    sock.settimeout(timeout)
    started = time.monotonic()
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received, time.monotonic() - started


@pytest.fixture
def server(serve_openjev, fake_sglang, qwen_tokenizer_dir) -> RunningOpenJev:
    env = {
        "OPENJEV_API_KEY": "s3cret",
        "OPENJEV_BODY_READ_TIMEOUT": "1.5",
        "OPENJEV_MAX_CONCURRENT_BODY_READS": "2",
    }
    return serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env=env)


def test_no_key_is_refused_on_the_headers_before_the_body_arrives(server) -> None:
    with open_request(server, post_head(2_000_000)) as sock:  # a 2 MB body is announced, none sent
        response, seconds = read_until_closed(sock, timeout=5)
    assert response.startswith(b"HTTP/1.1 401") and b"x-typesafe-request-id" in response
    assert seconds < 1.0  # answered and closed at once, not after the body deadline


def test_a_body_that_does_not_arrive_in_time_gets_408_and_the_connection_closes(server) -> None:
    auth = "Authorization: Bearer s3cret"
    with open_request(server, post_head(len(NOUL_BODY), auth), NOUL_BODY[:10]) as sock:
        response, seconds = read_until_closed(sock, timeout=10)
    assert response.startswith(b"HTTP/1.1 408") and b"OPENJEV_BODY_READ_TIMEOUT" in response
    assert 1.0 < seconds < 4.0


def test_a_request_head_that_never_ends_is_closed_by_the_deadline(server) -> None:
    with open_request(server, "POST /v1/systemone HTTP/1.1\r\nHost: openjev\r\n") as sock:
        sock.sendall(b"X-Slow: 1\r\n")
        response, seconds = read_until_closed(sock, timeout=10)
    assert response == b"" and 1.0 < seconds < 4.0


def test_bodies_received_at_once_are_capped_and_the_next_gets_529(server) -> None:
    auth = "Authorization: Bearer s3cret"
    slow = [open_request(server, post_head(len(NOUL_BODY), auth), NOUL_BODY[:5]) for _ in range(2)]
    time.sleep(0.3)
    with open_request(server, post_head(len(NOUL_BODY), auth)) as sock:
        response, seconds = read_until_closed(sock, timeout=5)
    assert response.startswith(b"HTTP/1.1 529") and b"retry-after: 1" in response.lower()
    assert b"OPENJEV_MAX_CONCURRENT_BODY_READS" in response and seconds < 1.0
    for sock in slow:
        sock.close()


def two_reads_then_a_caller(
    serve_openjev, fake_sglang, qwen_tokenizer_dir, first: tuple[int, bytes]
) -> tuple[socket.socket, socket.socket]:
    """On a server of two body slots, a read announcing `first[0]` bytes and sending `first[1]`, then
    0.2 s later one sending 5 bytes of a request; 1.2 s on (both past the grace) a caller, answered 200.
    The two reads' sockets."""
    env = {"OPENJEV_BODY_READ_TIMEOUT": "30", "OPENJEV_MAX_CONCURRENT_BODY_READS": "2"}
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env=env)
    older = open_request(server, post_head(first[0]), first[1])
    time.sleep(0.2)
    younger = open_request(server, post_head(len(NOUL_BODY)), NOUL_BODY[:5])
    time.sleep(1.2)
    headers = {"Content-Type": "application/json"}
    answer = httpx.post(f"{server.url}/v1/systemone", content=NOUL_BODY, headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text
    return older, younger


def test_a_new_body_ends_the_read_that_held_its_slot_longest_once_past_the_grace(
    serve_openjev, fake_sglang, qwen_tokenizer_dir
) -> None:
    """Bodies sent slowly held every slot until their deadline: a caller got 529 on every request
    meanwhile (32 of them at 1 KiB/s: 50 of 50 refused). Past SLOT_GRACE one is ended for it: of two
    as slow, the one that held its slot longest."""
    oldest, younger = two_reads_then_a_caller(
        serve_openjev, fake_sglang, qwen_tokenizer_dir, (len(NOUL_BODY), NOUL_BODY[:5])
    )
    try:
        response, seconds = read_until_closed(oldest, timeout=5)
        assert response.startswith(b"HTTP/1.1 408") and b"body slots were taken" in response
        assert seconds < 1.0
        younger.settimeout(0.5)
        with pytest.raises(TimeoutError):  # still reading: one slot was needed, one read ended
            younger.recv(1)
    finally:
        oldest.close()
        younger.close()


def test_of_the_reads_past_the_grace_the_slowest_is_ended_not_an_upload_arriving_at_speed(
    serve_openjev, fake_sglang, qwen_tokenizer_dir
) -> None:
    """The oldest read is a large body already mostly received; a younger one has sent 5 bytes in as
    long: the new body ends the slow one, and the upload carries on."""
    upload = NOUL_BODY[:-1] + b" " * 200_000 + b"}"
    fast, slow = two_reads_then_a_caller(
        serve_openjev, fake_sglang, qwen_tokenizer_dir, (len(upload), upload[:150_000])
    )
    try:
        response, _ = read_until_closed(slow, timeout=5)
        assert response.startswith(b"HTTP/1.1 408") and b"body slots were taken" in response
        fast.sendall(upload[150_000:])
        fast.settimeout(10)
        assert fast.recv(65536).startswith(b"HTTP/1.1 200")
    finally:
        fast.close()
        slow.close()
