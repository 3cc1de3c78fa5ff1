"""A grammar of hostile requests: the shapes where input expands (decoding, parsing, tokenizing) or a
connection holds state, each sent to any route of a running server, from the outside.

A shape is `Shape(kind, route, size, detail)`; `send(shape, host, port)` sends it and returns what
came back (the first answer's status and body, or None where the server closed without one) and the
bytes sent. Body shapes put an expanding part into the route's request: a boundary-free run of one
script, nested empty containers with spaced separators, as the state (or `input`, or two of a
fit's four examples' states, so a fit small enough reads and stores them); encoded with each coding
(identity, gzip, zstd; deflate and br, which the server refuses with 415), or as a multipart body.
Wire shapes are written on a raw socket: a head of endless header lines, a chunked body followed by
endless trailers, a head pipelined behind an unread answer, a GET announcing a chunked body it sends
after its answer (keep-alive over an unread body), many connections that never end their heads
while a fresh client asks, and more slow bodies than the server receives at once, held past its
slot grace, while a fresh client asks.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import time
from dataclasses import dataclass

import zstandard

#: Alphabets of runs no exact cut splits: the tokenizer sees each as one piece.
SCRIPTS = {
    "digits": "0123456789",
    "cjk": "日本語中文字符漢",
    "latin": "abcdefghij",
    "punctuation": "-=_*#.",
    "emoji": "😀👍🏽",
    "tabs": "\t \t",
    "arabic": "\u0627\u0644\u0639",
}
BODY_KINDS = ("run", "nested", "objects")
WIRE_KINDS = ("long_head", "trailers", "pipelined", "unread_body", "connections", "slow_bodies")
CODINGS = ("identity", "gzip", "zstd", "deflate", "br", "multipart")
#: Characters of the expanding part that Hypothesis draws from; wire shapes send a quarter of LARGEST
#: in header lines.
SIZES = (64 * 1024, 1024 * 1024, 4 * 1024 * 1024)
#: The size every kind is sent at once on every route (a 12M-digit state took 3.7 GB to refuse).
LARGEST = 12 * 1024 * 1024
LINE = b"X-Filler: 1234\r\n"


@dataclass(frozen=True)
class Shape:
    kind: str
    route: str
    size: int
    #: A body shape's script (runs) and coding; a wire shape's nothing.
    script: str = "digits"
    coding: str = "identity"


@dataclass
class Outcome:
    status: int | None
    body: bytes
    sent: int


def expanding_part(shape: Shape) -> bytes:
    """The JSON text of the part that expands, about `shape.size` characters."""
    if shape.kind == "run":
        alphabet = SCRIPTS[shape.script]
        return json.dumps((alphabet * (shape.size // len(alphabet) + 1))[: shape.size], ensure_ascii=False).encode()
    if shape.kind == "nested":  # 50-deep empty lists, spaced before their commas
        item = b"[" * 50 + b"]" * 50
        return b"[" + b" ,".join([item] * max(1, shape.size // 102)) + b"]"
    return b"[" + b" ,".join([b"{ }"] * max(1, shape.size // 5)) + b"]"


def request_json(route: str, part: bytes) -> bytes:
    """The route's request with `part` where text expands."""
    if route == "/v1/decisions":
        question = (
            b'[{"type": "choice", "name": "q", "instructions": "Which?", "choices": [{"value": "a"}, {"value": "b"}]}]'
        )
        return b'{"model": "gpt-6-luna", "input": %s, "questions": %s}' % (part, question)
    if route.startswith("/v1/tasks"):  # a fit that gets to its readouts: two states of each label, two of them `part`
        examples = b'{"state": %s, "label": true}, {"state": "a", "label": true}' % part
        examples += b', {"state": %s, "label": false}, {"state": "b", "label": false}' % part
        return b'{"question": {"type": "noul", "instructions": "Is it so?"}, "examples": [%s]}' % examples
    question = b'{"q": {"type": "noul", "instructions": "Is it so?"}}'
    return b'{"model": "jev-latest", "state": %s, "questions": %s}' % (part, question)


def encoded(shape: Shape, data: bytes) -> tuple[bytes, dict[str, str]]:
    headers = {"Content-Type": "application/json"}
    if shape.coding == "multipart":
        boundary = "hostileboundary"
        body = (
            b'--%s\r\nContent-Disposition: form-data; name="request"\r\nContent-Type: application/json\r\n\r\n'
            b"%s\r\n--%s--\r\n" % (boundary.encode(), data, boundary.encode())
        )
        return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    if shape.coding == "gzip":
        return gzip.compress(data, 9), {**headers, "Content-Encoding": "gzip"}
    if shape.coding == "zstd":
        return zstandard.ZstdCompressor(level=19).compress(data), {**headers, "Content-Encoding": "zstd"}
    if shape.coding in ("deflate", "br"):  # not accepted: 415, whatever they hold
        return data[:4096], {**headers, "Content-Encoding": shape.coding}
    return data, headers


def head(method: str, route: str, headers: dict[str, str]) -> bytes:
    lines = "".join(f"{name}: {value}\r\n" for name, value in {"Host": "x", **headers}.items())
    return f"{method} {route} HTTP/1.1\r\n{lines}".encode()


def read_answer(sock: socket.socket, seconds: float = 30) -> tuple[int | None, bytes]:
    """The first answer on `sock` (its status and body), read until it is whole or the socket closes."""
    sock.settimeout(seconds)
    data = b""
    with contextlib.suppress(OSError):
        while True:
            end = data.find(b"\r\n\r\n")
            if end >= 0:
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in data[:end].split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                if len(data) >= end + 4 + length:
                    return int(data.split(b" ", 2)[1]), data[end + 4 : end + 4 + length]
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    return (int(data.split(b" ", 2)[1]), b"") if data.startswith(b"HTTP/1.1 ") else (None, data)


def send_body(shape: Shape, address: tuple[str, int]) -> Outcome:
    body, headers = encoded(shape, request_json(shape.route, expanding_part(shape)))
    with socket.create_connection(address, timeout=30) as sock:
        sent = 0
        with contextlib.suppress(OSError):
            message = head("POST", shape.route, {**headers, "Content-Length": str(len(body))}) + b"\r\n"
            sock.sendall(message + body)
            sent = len(message) + len(body)
        status, answer = read_answer(sock, 60)
    return Outcome(status, answer, sent)


def stream_lines(sock: socket.socket, first: bytes, lines: int) -> int:
    """`first`, then `lines` header lines (or until the server closes); the bytes sent."""
    sent = 0
    with contextlib.suppress(OSError):
        sock.sendall(first)
        sent = len(first)
        for _ in range(0, lines, 8192):
            sock.sendall(LINE * 8192)
            sent += len(LINE) * 8192
        sock.sendall(b"\r\n")
    return sent


def send_wire(shape: Shape, address: tuple[str, int]) -> Outcome:
    lines = shape.size // 4
    small = request_json(shape.route, b'"a short state"')
    post = head("POST", shape.route, {"Content-Type": "application/json", "Content-Length": str(len(small))}) + b"\r\n"
    with socket.create_connection(address, timeout=30) as sock:
        if shape.kind == "long_head":
            sent = stream_lines(sock, head("POST", shape.route, {}), lines)
        elif shape.kind == "trailers":
            chunked = head("POST", shape.route, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
            first = chunked + b"\r\n%x\r\n%s\r\n0\r\n" % (len(small), small)
            sent = stream_lines(sock, first, lines)
        elif shape.kind == "pipelined":  # the answer to the first request is not read before the next head
            sent = stream_lines(sock, post + small + head("POST", shape.route, {}), lines)
        else:  # unread_body: a GET announcing a chunked body, answered (405) before it, then sent anyway
            announced = head("GET", shape.route, {"Transfer-Encoding": "chunked"})
            sent = stream_lines(sock, announced + b"\r\n0\r\n", lines)
        status, answer = read_answer(sock)
    return Outcome(status, answer, sent)


def send_connections(shape: Shape, address: tuple[str, int], count: int) -> Outcome:
    """`count` connections that begin a head and never end it, then a fresh client's request."""
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            with contextlib.suppress(OSError):
                held.append(socket.create_connection(address, timeout=5))
                held[-1].sendall(head("POST", shape.route, {}))
        return fresh_client(shape.route, address, count * 64)
    finally:
        for sock in held:
            sock.close()


def fresh_client(route: str, address: tuple[str, int], held_bytes: int) -> Outcome:
    """A fresh client's small request while others hold connections (`held_bytes` sent by them): its
    outcome, status None where it is not answered within 5 s."""
    started = time.monotonic()
    outcome = send_body(Shape("run", route, 1024, "latin"), address)
    outcome.sent += held_bytes
    if time.monotonic() - started > 5:
        outcome.status = None  # not served in time
    return outcome


def send_slow_bodies(shape: Shape, address: tuple[str, int], count: int, held: float) -> Outcome:
    """`count` requests that announce `shape.size` bytes of body and send 1 KiB of it, held `held`
    seconds, then a fresh client's request (None where it is not answered within 5 s)."""
    slow: list[socket.socket] = []
    announced = head("POST", shape.route, {"Content-Type": "application/json", "Content-Length": str(shape.size)})
    try:
        for _ in range(count):
            with contextlib.suppress(OSError):
                slow.append(socket.create_connection(address, timeout=5))
                slow[-1].sendall(announced + b"\r\n" + b" " * 1024)
        time.sleep(held)
        return fresh_client(shape.route, address, count * (len(announced) + 1026))
    finally:
        for sock in slow:
            sock.close()
