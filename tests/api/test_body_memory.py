"""The bound on request body bytes held at once (OPENJEV_MAX_BODY_BYTES_IN_FLIGHT), over real HTTP on
the fake SGLang: concurrent large bodies, received as they arrive and decoded from zstd, keep the bytes
held (`openjev_body_bytes_in_flight_peak` in /metrics) within the bound and the server's resident
memory within a few times it; a body that does not fit gets 529 with Retry-After, never a 5xx."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from openjev.api.body import BodyDecoder
from openjev.api.errors import HttpError
from openjev.config import Settings
from tests.conftest import eventually, zstd_compress
from tests.robustness.conftest import rss_mib

MIB = 1024 * 1024
#: Small caps so that a few bodies reach the bound: bodies up to 8 MiB, 16 MiB held at once.
CAP, BOUND = 8 * MIB, 16 * MIB
#: Resident memory a burst may add at most: the bytes held, each body parsed once (its text as Python
#: strings, as large again) and the allocator's slack.
RSS_GROWTH_MIB = 3 * BOUND / MIB + 64


@pytest.fixture
def server(serve_openjev, fake_sglang, qwen_tokenizer_dir):
    env = {"OPENJEV_MAX_IMAGE_BODY_BYTES": str(CAP), "OPENJEV_MAX_BODY_BYTES_IN_FLIGHT": str(BOUND)}
    return serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env=env)


def request_bytes(size: int) -> bytes:
    """A /v1/systemone body of `size` bytes and a hundred more: a long state, one question."""
    body = {"model": "jev-latest", "state": "word " * (size // 5), "questions": {"q": {"type": "noul"}}}
    return json.dumps(body).encode()


def slowly(data: bytes, pause: float = 0.05, piece: int = 256 * 1024) -> Iterator[bytes]:
    """`data` in pieces with pauses: sent chunked, with no Content-Length, so it is counted as it arrives."""
    for start in range(0, len(data), piece):
        yield data[start : start + piece]
        time.sleep(pause)


def gauge(server, name: str) -> float:
    metrics = httpx.get(f"{server.url}/metrics").text
    return float(next(line.split()[-1] for line in metrics.splitlines() if line.startswith(f"{name} ")))


def test_concurrent_large_bodies_stay_within_the_bound_and_the_rest_get_529(server):
    data = request_bytes(6 * MIB)
    assert 6 * MIB <= len(data) < CAP
    start_rss = rss_mib(server.process.pid)
    peak_rss = start_rss

    def send(index: int) -> httpx.Response:
        return httpx.post(f"{server.url}/v1/systemone", content=slowly(data), timeout=60)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(send, index) for index in range(8)]
        while not all(future.done() for future in futures):
            peak_rss = max(peak_rss, rss_mib(server.process.pid))
            time.sleep(0.02)
        responses = [future.result() for future in futures]
    statuses = sorted(response.status_code for response in responses)
    # 8 x 6 MiB cannot all be held within 16 MiB: some are refused as overload, none is a 5xx but 529.
    assert 529 in statuses and set(statuses) - {529} and set(statuses) <= {200, 422, 529}, statuses
    for response in responses:
        if response.status_code == 529:
            assert response.headers["retry-after"] and "OPENJEV_MAX_BODY_BYTES_IN_FLIGHT" in response.text
    peak = gauge(server, "openjev_body_bytes_in_flight_peak")
    assert 6 * MIB <= peak <= BOUND
    assert eventually(lambda: gauge(server, "openjev_body_bytes_in_flight") == 0)
    assert peak_rss - start_rss < RSS_GROWTH_MIB, (start_rss, peak_rss)


def held_back(data: bytes, release: threading.Event) -> Iterator[bytes]:
    """All of `data` but its last byte at once, the last byte once `release` is set."""
    yield data[:-1]
    release.wait(60)
    yield data[-1:]


def test_a_body_that_does_not_fit_now_gets_529_declared_or_decoded(server):
    held, large = request_bytes(5 * MIB), request_bytes(7 * MIB)
    bomb = zstd_compress(large)
    assert len(bomb) < MIB and len(large) < CAP
    releases = [threading.Event(), threading.Event()]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        # Two bodies hold 10 MiB of the 16 while they arrive; each joined in turn takes 5 more.
        slow = [
            pool.submit(httpx.post, f"{server.url}/v1/systemone", content=held_back(held, release), timeout=60)
            for release in releases
        ]
        assert eventually(lambda: gauge(server, "openjev_body_bytes_in_flight") >= 10 * MIB - 2, timeout=30)
        # Its Content-Length says it cannot fit now: refused before a byte is read.
        declared = httpx.post(f"{server.url}/v1/systemone", content=large, timeout=60)
        # Small on the wire, 7 MiB decoded: refused as its decoding passes the room left, not as too large.
        decoded = httpx.post(f"{server.url}/v1/systemone", content=bomb, headers={"content-encoding": "zstd"})
        finished = []
        for release, future in zip(releases, slow, strict=True):
            release.set()
            finished.append(future.result())
    for response in (declared, decoded):
        assert response.status_code == 529, response.text
        assert response.headers["retry-after"] and "OPENJEV_MAX_BODY_BYTES_IN_FLIGHT" in response.text
    assert [response.status_code for response in finished] == [422, 422]  # the state is over its budget
    # Once the room is back, the same zstd body is decoded and answered.
    assert eventually(lambda: gauge(server, "openjev_body_bytes_in_flight") == 0)
    again = httpx.post(f"{server.url}/v1/systemone", content=bomb, headers={"content-encoding": "zstd"}, timeout=60)
    assert again.status_code == 422, again.text


def test_a_body_stopped_by_the_room_is_529_even_when_room_comes_back_while_it_decodes() -> None:
    """Decoding stops where the room ends; other bodies given back meanwhile do not turn that into a 413
    (the body is within its cap) nor leave its bytes counted as held."""
    decoder = BodyDecoder(
        None, max_body_bytes=CAP, read_timeout=5, max_reads=4, retry_after=1, max_bytes_in_flight=BOUND
    )
    other = BOUND - 2 * MIB
    decoder.bytes.take(other)  # another body's bytes: 2 MiB of room left for this one's 7 MiB

    async def decode_while_the_other_finishes() -> HttpError:
        decoding = asyncio.create_task(decoder._decode(zstd_compress(request_bytes(7 * MIB)), ["zstd"], CAP))
        await asyncio.sleep(0)  # the decoding is on its worker thread now
        decoder.bytes.give(other)
        with pytest.raises(HttpError) as refused:
            await decoding
        return refused.value

    refused = asyncio.run(decode_while_the_other_finishes())
    assert refused.status == 529 and decoder.bytes.held == 0


def test_the_default_bound_the_docs_quote_is_the_codes() -> None:
    default = Settings.model_fields["max_body_bytes_in_flight"].default
    api = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    assert f"`OPENJEV_MAX_BODY_BYTES_IN_FLIGHT` ({default // MIB} MiB)" in api
    settings_doc = (Path(__file__).resolve().parents[2] / "docs" / "settings.md").read_text()
    image_cap = Settings.model_fields["max_image_body_bytes"].default
    body_cap = Settings.model_fields["max_body_bytes"].default
    assert f"{default // MIB} MiB holds {default // image_cap:,} bodies" in settings_doc
    assert f"or {default // body_cap:,} at `OPENJEV_MAX_BODY_BYTES`" in settings_doc
