"""What the backend is sent for images, counted by the fake SGLang in vision mode behind a running
openjev: a JPEG shown 15 times to 15 questions costs the backend about its own bytes per showing (it
was re-encoded as a PNG 26 times its size: 400 MB for a 52 KB request), a request whose image bytes x
calls pass OPENJEV_MAX_IMAGE_BACKEND_BYTES is a 422 naming `assets`, and a PNG of many tiny chunks is
refused before Pillow walks them (it cost 19-27 s of CPU)."""

from __future__ import annotations

import base64
import io
import json
import random
import struct
import time
import zlib

import httpx
import pytest
from PIL import Image

from tests.fake_sglang import FakeSGLang

pytestmark = [pytest.mark.robustness, pytest.mark.timeout(600)]

#: The budget the server under test runs with (the default is 64 MiB).
BUDGET = 20 * 1024 * 1024
#: Seconds a server may take to start: these suites run beside other load.
START = 240


@pytest.fixture
def vision_server(serve_openjev, qwen_tokenizer_dir):
    fake = FakeSGLang(vision=True, tokenizer_path=str(qwen_tokenizer_dir)).start()
    env = {"OPENJEV_MAX_IMAGE_BACKEND_BYTES": str(BUDGET), "OPENJEV_IMAGE_TRANSFER": "base64"}
    server = serve_openjev("--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir), env=env, timeout=START)
    yield server, fake
    fake.stop()
    assert fake.violations == [], fake.violations


def noise_jpeg(side: int, quality: int, seed: int) -> bytes:
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), random.Random(seed).randbytes(side * side * 3)).save(
        out, format="JPEG", quality=quality
    )
    return out.getvalue()


def shown_often(image: bytes, times: int, questions: int) -> dict:
    return {
        "model": "jev-latest",
        "state": "Look: " + " ".join(["<image:p>"] * times),
        "questions": {f"q{i}": {"type": "noul", "instructions": f"Is detail {i} there?"} for i in range(questions)},
        "assets": {"<image:p>": {"type": "image", "format": "jpeg", "data_base64": base64.b64encode(image).decode()}},
    }


def image_entries(fake: FakeSGLang, since: int) -> list[bytes]:
    """The bytes of every `image_data` entry the fake was sent since post `since` (base64 or data URL)."""
    entries = []
    for post in fake.generate_posts[since:]:
        for call in post["body"].get("image_data") or []:
            for entry in call if isinstance(call, list) else [call]:
                entries.append(base64.b64decode(entry.split(",", 1)[-1]))
    return entries


def test_a_jpeg_shown_15_times_costs_about_its_own_bytes_per_showing_and_the_budget_holds(vision_server, figures):
    server, fake = vision_server
    photo = noise_jpeg(736, 10, seed=1)
    before, wire_before = len(fake.generate_posts), len(fake.generate_bytes)
    with httpx.Client(base_url=server.url, timeout=300) as client:
        request = client.build_request("POST", "/v1/systemone", json=shown_often(photo, 15, 15))
        response = client.send(request)
        assert response.status_code == 200, response.text
        entries = image_entries(fake, before)
        sent = sum(len(entry) for entry in entries)
        wire = sum(fake.generate_bytes[wire_before:])
        figures(
            client_bytes=len(request.content),
            source_jpeg=len(photo),
            showings=len(entries),
            image_bytes=sent,
            wire_bytes=wire,
            ratio=round(sent / (len(photo) * len(entries)), 3),
        )
        assert len(entries) >= 15 * 16 and all(entry.startswith(b"\xff\xd8\xff") for entry in entries)
        assert sent <= BUDGET and sent <= 1.2 * len(photo) * len(entries)
        # The same image shown to four times as many questions is over the budget: a 422 naming `assets`.
        posts = len(fake.generate_posts)
        refused = client.post("/v1/systemone", json=shown_often(photo, 15, 60))
        assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "assets"], refused.text
        assert "OPENJEV_MAX_IMAGE_BACKEND_BYTES" in refused.text and len(fake.generate_posts) == posts


def many_chunks_png(chunks: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 30, 30)).save(out, format="PNG")
    png, data = out.getvalue(), b"k\0v"
    tiny = struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(">I", zlib.crc32(b"tEXt" + data))
    return png[:33] + tiny * chunks + png[33:]


def test_a_png_of_many_tiny_chunks_is_refused_at_once_naming_its_asset(vision_server, figures):
    server, _ = vision_server
    bomb = many_chunks_png(600_000)  # 9 MB of 15-byte chunks
    body = {
        "model": "jev-latest",
        "state": "Look: <image:p>",
        "questions": {"q": {"type": "noul", "instructions": "Is it red?"}},
        "assets": {"<image:p>": {"type": "image", "part": "p0"}},
    }
    files = {"request": (None, json.dumps(body).encode(), "application/json"), "p0": ("p0.png", bomb, "image/png")}
    with httpx.Client(base_url=server.url, timeout=300) as client:
        started = time.perf_counter()
        response = client.post("/v1/systemone", files=files)
        seconds = time.perf_counter() - started
    figures(bomb_bytes=len(bomb), seconds=round(seconds, 3), status=response.status_code)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "assets", "<image:p>"]
    assert "chunks" in response.text and seconds < 3, seconds
