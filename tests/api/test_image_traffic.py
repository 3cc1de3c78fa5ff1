"""What images cost the backend: each image sent as a file once or as base64 re-encoded from its pixels
(no caller byte passes), positions capped per request, parts refused as they pass their cap."""

from __future__ import annotations

import base64
import io
import json
import random
import struct
import zlib

import httpx
from PIL import Image as PILImage

from tests.api.test_images import detail, png
from tests.conftest import launch_openjev, stop_openjev, zstd_compress
from tests.fake_sglang.vision import SPEC


def photo_jpeg(width: int, height: int, seed: int) -> bytes:
    """A photo-like JPEG: a gradient under seeded noise (it compresses as a photo does)."""
    rng = random.Random(seed)
    base = PILImage.linear_gradient("L").resize((width, height)).convert("RGB")
    noise = PILImage.frombytes("RGB", (width, height), rng.randbytes(width * height * 3))
    out = io.BytesIO()
    PILImage.blend(base, noise, 0.15).save(out, format="JPEG", quality=90)
    return out.getvalue()


def ten_questions_about(photo: bytes) -> dict:
    return {
        "model": "jev-latest",
        "state": "The customer sent this photo: <image:p>",
        "questions": {f"q{i}": {"type": "noul", "instructions": f"Is detail {i} visible?"} for i in range(10)},
        "assets": {"<image:p>": {"type": "image", "format": "jpeg", "data_base64": base64.b64encode(photo).decode()}},
    }


def test_file_transfer_sends_each_image_once_with_the_same_answers_and_cache_hits(vision_stack, tmp_path):
    """OPENJEV_IMAGE_TRANSFER=file (a supervised SGLang's default): 10 questions about a 1-megapixel photo
    carry its path, not megabytes of base64 per call; SGLang reads the same JPEG, so the answers and the
    cache hits are those of base64."""
    base64_server, fake = vision_stack
    images = tmp_path / "images"
    server = launch_openjev(
        "--connect", fake.url, "--tokenizer", str(fake.tokenizer_path), log_dir=tmp_path,
        env={"OPENJEV_IMAGE_TRANSFER": "file", "OPENJEV_IMAGE_DIR": str(images)},
    )  # fmt: skip
    try:
        assert httpx.get(f"{server.url}/health").json()["backend"]["image_transfer"] == "file"
        body = ten_questions_about(photo_jpeg(1152, 864, 1))
        sent = {}
        answers = {}
        for name, url in (("base64", base64_server.url), ("file", server.url)):
            before = len(fake.generate_bytes)
            response = httpx.post(f"{url}/v1/systemone", json=body, timeout=120)
            assert response.status_code == 200, response.text
            sent[name] = fake.generate_bytes[before:]
            answers[name] = response.json()["answers"]
        (image_file,) = images.glob("openjev-*.jpg")
        assert answers["file"] == answers["base64"]
        # Two posts each: the warm-up, then the 10 readouts as one batched /generate.
        assert len(sent["file"]) == len(sent["base64"]) == 2
        warm_up, batch = sent["base64"]
        assert warm_up > image_file.stat().st_size and batch > 10 * image_file.stat().st_size  # a copy per readout
        assert sum(sent["file"]) < 64 * 1024  # paths: the image crossed once, as a file
        # The same photo again: its warm-up is a prefix hit, image positions included.
        again = httpx.post(f"{server.url}/v1/systemone", json=body, timeout=120)
        assert int(again.headers["x-openjev-cached-tokens"]) > SPEC.image_tokens(864, 1152)
        assert fake.generate_calls[-1]["body"]["image_data"] == [str(image_file)]
    finally:
        stop_openjev(server)
    assert list(images.iterdir()) == []  # openjev's files removed at shutdown


def test_no_caller_byte_reaches_sglang_and_repeated_placeholders_are_bounded(vision_stack):
    """A 64x64 PNG carrying a 2 MiB private chunk, its placeholder written 25 times, in a zstd multipart
    body: SGLang gets the pixels (encoded again), never the chunk; an image shown more often than
    OPENJEV_MAX_IMAGE_POSITIONS allows is a 422 naming the assets."""
    server, fake = vision_stack
    out = io.BytesIO()
    PILImage.new("RGB", (64, 64), (40, 90, 160)).save(out, format="PNG")
    plain, chunk = out.getvalue(), bytes(2 * 1024 * 1024)
    padded = plain[:-12] + struct.pack(">I", len(chunk)) + b"prVt" + chunk
    padded += struct.pack(">I", zlib.crc32(b"prVt" + chunk)) + plain[-12:]
    request = {
        "model": "jev-latest",
        "state": "look " + "<image:a> " * 25,
        "questions": {"a": {"type": "noul", "instructions": "?"}, "b": {"type": "noul", "instructions": "!"}},
        "assets": {"<image:a>": {"type": "image", "part": "img"}},
    }
    files = {"request": (None, json.dumps(request), "application/json"), "img": ("a.png", padded, "image/png")}
    prepared = httpx.Request("POST", f"{server.url}/v1/systemone", files=files)
    body = zstd_compress(prepared.read())
    headers = {"content-type": prepared.headers["content-type"], "content-encoding": "zstd"}
    before, readouts_before = len(fake.generate_bytes), len(fake.generate_calls)
    assert httpx.post(f"{server.url}/v1/systemone", content=body, headers=headers, timeout=120).status_code == 200
    sent, readouts = fake.generate_bytes[before:], len(fake.generate_calls) - readouts_before
    # The warm-up, then both readouts in one batched /generate.
    assert len(body) < 4096 and len(sent) == 2 and readouts == 3
    # At most the client's bytes and the pixels of each image shown, per readout.
    assert sum(sent) < readouts * (len(body) + 25 * 64 * 64 * 3)
    # 20 times a 1024x1024 image (1,024 positions each) is 20,480 positions: over the default 16,384.
    big = base64.b64encode(png(1024, 1024, (9, 9, 9))).decode()
    repeated = {
        "model": "jev-latest",
        "state": "see " + "<image:r> " * 20,
        "questions": {"q": {"type": "noul", "instructions": "?"}},
        "assets": {"<image:r>": {"type": "image", "format": "png", "data_base64": big}},
    }
    refused = httpx.post(f"{server.url}/v1/systemone", json=repeated, timeout=120)
    assert refused.status_code == 422 and ["body", "assets"] in detail(refused)
    assert "20480" in refused.text and "OPENJEV_MAX_IMAGE_POSITIONS" in refused.text


def test_an_image_part_over_its_cap_is_refused_as_it_is_split(vision_stack):
    server, _ = vision_stack
    request = {
        "model": "jev-latest",
        "state": "<image:a>",
        "questions": {"q": {"type": "noul", "instructions": "?"}},
        "assets": {"<image:a>": {"type": "image", "part": "big"}},
    }
    files = {"request": (None, json.dumps(request), "application/json"), "big": ("b.png", bytes(11 << 20), "image/png")}
    prepared = httpx.Request("POST", f"{server.url}/v1/systemone", files=files)
    body = zstd_compress(prepared.read())
    headers = {"content-type": prepared.headers["content-type"], "content-encoding": "zstd"}
    refused = httpx.post(f"{server.url}/v1/systemone", content=body, headers=headers, timeout=60)
    assert refused.status_code == 422 and ["body", "big"] in detail(refused)
    assert "OPENJEV_MAX_IMAGE_BYTES" in refused.text
