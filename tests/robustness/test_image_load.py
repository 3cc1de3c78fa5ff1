"""Image bodies against a real openjev on the fake SGLang in vision mode, measured from outside.

- Liveness: 1.6 KB zstd bombs (a multipart body that decodes to 39 MiB) and 9 MB photo uploads arrive
  from several senders while another process polls `/health/live`: decoding, splitting, image work and
  the backend's image bodies all run off the event loop, on worker threads less favoured than the
  loop's (`api/workers.py`), so its p99 stays under 50 ms (with the work on the loop it was 3.8 s; on
  an idle 2-core machine, senders and server sharing its cores, four runs gave p99 26-38 ms, max 50).
- Memory: a burst of 20 concurrent small bodies, each a PNG carrying a 9 MiB private chunk: no caller
  byte is kept or forwarded (the image is encoded again from its pixels) and every cache is bounded in
  bytes, so resident memory comes back near where it started.
- Fair admission: requests of four 30-megapixel images decode for seconds; small text requests sent
  meanwhile are never refused for it (image work has slots of its own), and past the image slots and
  their queue an image request gets 529 with Retry-After and the setting named.
"""

from __future__ import annotations

import concurrent.futures
import io
import json
import random
import statistics
import struct
import threading
import time
import zlib
from collections.abc import Iterator

import httpx
import pytest
import zstandard
from PIL import Image

from tests.fake_sglang import FakeSGLang
from tests.robustness.conftest import liveness_under, p99, rss_mib

pytestmark = [pytest.mark.robustness, pytest.mark.timeout(300)]

NOUL = {"type": "noul", "instructions": "Is anything broken?"}
#: Seconds a server may take to start: these suites run beside other load.
START = 240


@pytest.fixture
def vision_fake(qwen_tokenizer_dir) -> Iterator[FakeSGLang]:
    fake = FakeSGLang(vision=True, tokenizer_path=str(qwen_tokenizer_dir)).start()
    yield fake
    fake.stop()
    assert fake.violations == [], fake.violations


def multipart(request: dict, parts: dict[str, bytes]) -> tuple[bytes, str]:
    files = {"request": (None, json.dumps(request).encode(), "application/json")}
    files |= {name: (f"{name}.png", data, "image/png") for name, data in parts.items()}
    built = httpx.Request("POST", "http://x/", files=files)
    return built.read(), built.headers["content-type"]


def zstd_multipart(request: dict, parts: dict[str, bytes]) -> tuple[bytes, dict[str, str]]:
    raw, content_type = multipart(request, parts)
    return zstandard.ZstdCompressor(level=19).compress(raw), {"content-type": content_type, "content-encoding": "zstd"}


def image_request(keys: list[str], state: str | None = None, questions: int = 1) -> dict:
    return {
        "model": "jev-latest",
        "state": state if state is not None else "Photos: " + " ".join(keys),
        "questions": {f"q{i}": NOUL for i in range(questions)},
        "assets": {key: {"type": "image", "part": f"p{i}"} for i, key in enumerate(keys)},
    }


def private_chunk_png(size: int, seed: int) -> bytes:
    """A 64x64 PNG (its colour from `seed`) with an ancillary private chunk of `size` zero bytes."""
    out = io.BytesIO()
    Image.new("RGB", (64, 64), (seed % 256, seed // 256 % 256, 77)).save(out, format="PNG")
    png, data = out.getvalue(), bytes(size)
    chunk = struct.pack(">I", size) + b"prVt" + data + struct.pack(">I", zlib.crc32(b"prVt" + data))
    return png[:-12] + chunk + png[-12:]


def noise_png(width: int, height: int, seed: int) -> bytes:
    """A PNG of random pixels: it compresses to about its raw size, as a large photo's PNG does."""
    rng = random.Random(seed)
    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), rng.randbytes(width * height * 3)).save(out, format="PNG", compress_level=1)
    return out.getvalue()


def flat_png(width: int, height: int, shade: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (shade, 40, 90)).save(out, format="PNG")
    return out.getvalue()


#: Seconds: `/health/live`'s p99 while bodies arrive (see the module docstring for the figures measured).
LIVENESS_P99 = 0.05


def test_liveness_stays_fast_while_zstd_bombs_and_9_mb_uploads_arrive(serve_openjev, vision_fake, tmp_path, figures):
    server = serve_openjev("--connect", vision_fake.url, "--tokenizer", str(vision_fake.tokenizer_path), timeout=START)
    bomb, bomb_headers = zstd_multipart(image_request(["<image:b>"]), {"p0": bytes(39 * 1024 * 1024)})
    upload, upload_type = multipart(image_request(["<image:u>"]), {"p0": noise_png(1800, 1700, 3)})
    with httpx.Client(base_url=server.url, timeout=120) as http:  # warm: first-use imports and caches
        assert http.post("/v1/systemone", content=upload, headers={"content-type": upload_type}).status_code == 200
        assert http.post("/v1/systemone", content=bomb, headers=bomb_headers).status_code == 422
    bodies = {"bomb": (bomb, bomb_headers, 3), "upload": (upload, {"content-type": upload_type}, 2)}
    latencies, statuses = liveness_under(server.url, bodies, tmp_path, seconds=10.0)
    figures(
        bomb_bytes=len(bomb),
        upload_bytes=len(upload),
        bombs=len(statuses["bomb"]),
        uploads=len(statuses["upload"]),
        statuses={kind: sorted(set(codes)) for kind, codes in statuses.items()},
        liveness_polls=len(latencies),
        liveness_p50_ms=round(statistics.median(latencies) * 1000, 1),
        liveness_p99_ms=round(p99(latencies) * 1000, 1),
        liveness_max_ms=round(max(latencies) * 1000, 1),
    )
    assert len(bomb) < 2048 and len(upload) > 9_000_000
    # The bomb's image part passes OPENJEV_MAX_IMAGE_BYTES as it is split: a 422 naming it.
    assert statuses["bomb"] and set(statuses["bomb"]) == {422}, statuses
    assert 200 in statuses["upload"] and set(statuses["upload"]) <= {200, 529}, statuses
    assert len(latencies) >= 100 and p99(latencies) < LIVENESS_P99


def test_memory_returns_near_its_start_after_a_burst_of_padded_images(serve_openjev, vision_fake, figures):
    cache_mib = 16
    caches = {
        "OPENJEV_IMAGE_CACHE_BYTES": str(cache_mib << 20),
        "OPENJEV_ENCODED_IMAGE_CACHE_BYTES": str(cache_mib << 20),
    }
    server = serve_openjev(
        "--connect", vision_fake.url, "--tokenizer", str(vision_fake.tokenizer_path), env=caches, timeout=START
    )
    pid = server.process.pid
    bodies = [
        zstd_multipart(image_request(["<image:x>"], questions=3), {"p0": private_chunk_png(9 * 1024 * 1024, seed)})
        for seed in range(20)
    ]
    warm = zstd_multipart(image_request(["<image:x>"], questions=3), {"p0": private_chunk_png(1024, 999)})
    assert httpx.post(f"{server.url}/v1/systemone", content=warm[0], headers=warm[1], timeout=60).status_code == 200
    rss_before = rss_mib(pid)
    sent_before = len(vision_fake.generate_bytes)

    def post(body: tuple[bytes, dict[str, str]]) -> int:
        return httpx.post(f"{server.url}/v1/systemone", content=body[0], headers=body[1], timeout=120).status_code

    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        statuses = list(pool.map(post, bodies))
    time.sleep(2)
    rss_after = rss_mib(pid)
    sent = vision_fake.generate_bytes[sent_before:]
    figures(
        body_bytes=len(bodies[0][0]),
        statuses=sorted(set(statuses)),
        backend_calls=len(sent),
        bytes_to_backend=sum(sent),
        rss_before_mib=round(rss_before, 1),
        rss_after_mib=round(rss_after, 1),
    )
    assert all(len(body) < 2048 for body, _ in bodies)
    assert statuses.count(200) >= 10 and set(statuses) <= {200, 529}, statuses
    # No caller byte forwarded: each call carries a 64x64 image, not its 9 MiB chunk.
    assert max(sent) < 64 * 1024
    # Within 300 MB of its start (before the byte bounds: 647 MiB more). Measured on an idle 2-core
    # machine: 45-163 MiB over six runs, the caches' 2 x 16 MiB included; the rest is the burst's
    # buffers the allocator keeps, which varies with how the 20 requests interleave.
    assert rss_after - rss_before < 300 * 1000**2 / 2**20, (rss_before, rss_after)


def test_image_work_never_makes_a_small_text_request_529(serve_openjev, vision_fake, figures):
    server = serve_openjev(
        "--connect", vision_fake.url, "--tokenizer", str(vision_fake.tokenizer_path),
        env={"OPENJEV_MAX_CONCURRENT_IMAGE_PREPARATIONS": "2", "OPENJEV_IMAGE_PREPARATION_QUEUE": "1"}, timeout=START,
    )  # fmt: skip
    keys = [f"<image:{i}>" for i in range(4)]
    heavy = [
        multipart(image_request(keys), {f"p{i}": flat_png(6000, 5000, 10 * burst + i) for i in range(4)})
        for burst in range(4)
    ]
    text = {"model": "jev-latest", "state": "The order arrived late.", "questions": {"q": NOUL}}
    image_results: list[httpx.Response] = []

    def post_images(body: tuple[bytes, str]) -> None:
        response = httpx.post(
            f"{server.url}/v1/systemone", content=body[0], headers={"content-type": body[1]}, timeout=120
        )
        image_results.append(response)

    senders = [threading.Thread(target=post_images, args=(body,)) for body in heavy]
    for sender in senders:
        sender.start()
    text_statuses = []
    with httpx.Client(base_url=server.url, timeout=60) as http:
        while any(sender.is_alive() for sender in senders) or len(text_statuses) < 37:
            text_statuses.append(http.post("/v1/systemone", json=text).status_code)
            time.sleep(0.05)
    for sender in senders:
        sender.join()
    image_statuses = [response.status_code for response in image_results]
    refused = [response for response in image_results if response.status_code == 529]
    figures(
        image_requests=len(heavy),
        image_statuses=image_statuses,
        text_requests=len(text_statuses),
        text_529=text_statuses.count(529),
        text_statuses=sorted(set(text_statuses)),
    )
    assert len(text_statuses) >= 37 and set(text_statuses) == {200}, text_statuses
    # Two decoding, one waiting: of four at once, the other is refused, per kind.
    assert image_statuses.count(200) >= 3 and set(image_statuses) <= {200, 529}, image_statuses
    assert refused, image_statuses
    assert all(r.headers["retry-after"] and "OPENJEV_IMAGE_PREPARATION_QUEUE" in r.text for r in refused)
