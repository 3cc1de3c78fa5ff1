"""Every route and mount of the application decided at the door, on a keyed openjev over the fake SGLang.

The routes are enumerated from the application itself (built in this process, as `openjev serve`
builds it), so a route or mount added later is tried too: for each, every method it does not take is
a 405 with `Allow` naming the methods its path takes, answered from the head while the 10 MB body it
announced is never sent. The static files are public: the documentation pages' scripts need no key.
"""

from __future__ import annotations

import contextlib
import socket
import time
from pathlib import Path

import pytest
from starlette.routing import BaseRoute, Mount, Route

from openjev.api import create_app
from openjev.backends import build_backend
from openjev.config import Settings
from tests.conftest import RunningOpenJev
from tests.robustness.conftest import KEY, address

pytestmark = [pytest.mark.robustness]

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def enumerated(routes: list[BaseRoute]) -> list[tuple[str, frozenset[str]]]:
    """(a path the route answers, the methods it takes) for every route and mount, included routers opened."""
    found: list[tuple[str, frozenset[str]]] = []
    for route in routes:
        if (included := getattr(route, "original_router", None)) is not None:
            found += enumerated(included.routes)
        elif isinstance(route, Mount):
            found.append((f"{route.path}/x", frozenset({"GET", "HEAD"})))
        elif isinstance(route, Route) and route.methods:
            found.append((route.path.replace("{task_id}", "x"), frozenset(route.methods)))
        else:
            pytest.fail(f"a route this test cannot enumerate: {route!r}")
    return found


def answer_head(server: RunningOpenJev, method: str, path: str) -> tuple[str, dict[str, str], float]:
    """Announce a 10 MB body, send none of it: the status line, the headers and the seconds it took."""
    started = time.monotonic()
    with socket.create_connection(address(server), timeout=20) as sock:
        sock.sendall(
            f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
            "Content-Type: application/json\r\nContent-Length: 10000000\r\n\r\n".encode()
        )
        answer = b""
        with contextlib.suppress(TimeoutError):
            while b"\r\n\r\n" not in answer and (chunk := sock.recv(4096)):
                answer += chunk
    line, *fields = answer.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (field.partition(":") for field in fields)}
    return line, headers, time.monotonic() - started


@pytest.fixture(scope="module")
def routes(qwen_tokenizer_dir: Path) -> list[tuple[str, frozenset[str]]]:
    settings = Settings(connect="http://127.0.0.1:9", tokenizer=str(qwen_tokenizer_dir))
    found = enumerated(create_app(settings, build_backend(settings, lambda _: None)).routes)
    assert {"/v1/systemone", "/v1/decisions", "/health", "/metrics", "/docs", "/openapi.json", "/static/x"} <= {
        path for path, _ in found
    }
    return found


def test_every_method_a_route_or_mount_does_not_take_is_a_405_from_the_head(keyed, routes) -> None:
    server, _ = keyed
    tried, wrong = 0, []
    for path in sorted({path for path, _ in routes}):
        taken = frozenset().union(*(methods for other, methods in routes if other == path))
        for method in sorted(set(METHODS) - taken):
            line, headers, seconds = answer_head(server, method, path)
            tried += 1
            if line != "HTTP/1.1 405 Method Not Allowed" or headers.get("allow") != ", ".join(sorted(taken)):
                wrong.append((method, path, line, headers.get("allow")))
            elif seconds >= 10:  # not the 60 s the body had to arrive in
                wrong.append((method, path, f"answered after {seconds:.1f} s"))
    assert tried > 40 and wrong == []


def test_the_static_files_are_public_and_a_post_to_one_is_a_405_from_the_head(keyed) -> None:
    server, _ = keyed
    with server.client() as http:  # no key
        assert http.get("/static/scalar/standalone.js").status_code == 200
        assert http.post("/v1/systemone", json={}).status_code == 401
    line, headers, seconds = answer_head(server, "POST", "/static/scalar/standalone.js")
    assert (line, headers.get("allow"), headers.get("connection")) == (
        "HTTP/1.1 405 Method Not Allowed",
        "GET, HEAD",
        "close",
    )
    assert seconds < 10
