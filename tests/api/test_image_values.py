"""Odd but valid image input answered right, and the rest a 4xx naming the field: wide gray modes, extreme
aspect ratios, image content parts, deep states, vision files read locally before any hub look-up."""

from __future__ import annotations

import base64
import contextlib
import http.server
import io
import threading
from collections.abc import Iterator

import httpx
import pytest
from PIL import Image as PILImage

from tests.api.test_images import detail, image_calls, pixels, png
from tests.conftest import launch_openjev, stop_openjev
from tests.fake_sglang import FakeSGLang


def as_asset(data: bytes) -> dict:
    return {"type": "image", "format": "png", "data_base64": base64.b64encode(data).decode()}


def sent_images(fake: FakeSGLang, since: int) -> list[PILImage.Image]:
    entries = [entry for call in image_calls(fake, since) for entry in call.get("image_data", [])]
    return [PILImage.open(io.BytesIO(base64.b64decode(entry))) for entry in entries]


def test_a_16_bit_grayscale_png_reaches_the_model_scaled_not_white(vision_stack):
    from tests.test_images import png16

    server, fake = vision_stack
    # A gray ramp 0..64764 in steps of 1028, which is 4 in 8 bits: clipped, every pixel but the first was 255.
    ramp = png16(0, [[x * 1028 for x in range(64)]] * 64)
    question = {"q": {"type": "noul", "instructions": "?"}}
    body = {
        "model": "jev-latest",
        "state": "Scan: <image:s>",
        "questions": question,
        "assets": {"<image:s>": as_asset(ramp)},
    }
    before = len(fake.generate_calls)
    response = httpx.post(f"{server.url}/v1/systemone", json=body, timeout=60)
    assert response.status_code == 200, response.text
    images = sent_images(fake, before)
    assert images and all(image.mode == "RGB" and image.size == (64, 64) for image in images)
    assert list(images[0].getdata())[:64] == [(4 * x, 4 * x, 4 * x) for x in range(64)]


def test_an_extreme_aspect_ratio_is_a_422_naming_the_asset_for_noul_and_box(vision_stack):
    server, _ = vision_stack
    for size in ((300, 1), (1, 300)):
        for question in ({"type": "noul", "instructions": "Is it a banner?"}, {"type": "box", "instructions": "logo"}):
            body = {
                "model": "jev-latest",
                "state": "Banner: <image:b>",
                "questions": {"q": question},
                "assets": {"<image:b>": as_asset(png(*size, (9, 9, 9)))},
            }
            response = httpx.post(f"{server.url}/v1/systemone", json=body, timeout=60)
            assert response.status_code == 422 and detail(response) == [["body", "assets", "<image:b>"]], response.text
            assert "aspect ratio of 300:1" in response.text


def test_image_content_parts_show_their_asset(vision_stack):
    server, fake = vision_stack
    picture = png(40, 30, (200, 10, 10))
    parts = [
        {"type": "image_url", "image_url": {"url": "<image:p>"}},
        {"type": "image", "image": "<image:p>"},
        {"type": "input_image", "image_url": "<image:p>"},
    ]
    answers = []
    for part in parts:
        content = [{"type": "text", "text": "What does this photo show?"}, part]
        body = {
            "model": "jev-latest",
            "state": [{"role": "user", "content": content}],
            "questions": {"q": {"type": "noul", "instructions": "Is it red?"}},
            "assets": {"<image:p>": as_asset(picture)},
        }
        before = len(fake.generate_calls)
        response = httpx.post(f"{server.url}/v1/systemone", json=body, timeout=60)
        assert response.status_code == 200, response.text
        images = sent_images(fake, before)
        assert images and images[0].convert("RGB").tobytes() == pixels(picture)
        answers.append(response.json()["answers"])
    assert answers[0] == answers[1] == answers[2]  # the same prompt: the image where the part stands
    # An image part without an asset's placeholder (a URL) is refused, naming it.
    content = [
        {"type": "text", "text": "And this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    body = {
        "model": "jev-latest",
        "state": [{"role": "user", "content": content}],
        "questions": {"q": {"type": "noul", "instructions": "?"}},
    }
    response = httpx.post(f"{server.url}/v1/systemone", json=body, timeout=60)
    assert response.status_code == 422 and detail(response) == [["body", "state", 0, "content", 1, "type"]]
    assert "placeholder" in response.text


@pytest.mark.parametrize("depth", [240, 600])
def test_a_state_holding_an_image_deep_inside_is_answered_or_a_422(vision_stack, depth):
    from tests.robustness.test_chat_fields import nested

    server, _ = vision_stack
    body = {
        "model": "jev-latest",
        "state": {"scan": nested(depth, "Photo: <image:d>")},
        "questions": {"q": {"type": "noul", "instructions": "?"}},
        "assets": {"<image:d>": as_asset(png(40, 30, (1, 2, 3)))},
    }
    response = httpx.post(f"{server.url}/v1/systemone", json=body, timeout=60)
    if depth < 254:
        assert response.status_code == 200, response.text
    else:
        assert response.status_code == 422 and detail(response)[0][:3] == ["body", "state", "scan"], response.text


@contextlib.contextmanager
def unreachable_hub() -> Iterator[tuple[str, list[str]]]:
    """A Hugging Face hub stand-in that answers every request 503 (a hub that is down) and lists the
    paths it was asked."""
    asked: list[str] = []

    class Down(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            asked.append(self.path)
            self.send_response(503)
            self.end_headers()

        do_GET = do_HEAD

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Down)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()


def test_vision_is_read_from_local_files_before_any_hub_look_up(qwen_tokenizer_dir, tmp_path):
    from tests.fake_sglang.rules import VOCAB_SIZE

    with unreachable_hub() as (hub, asked):
        env = {
            "HF_ENDPOINT": hub,
            "HF_HOME": str(tmp_path / "hf"),
            "HF_HUB_OFFLINE": "0",
            "OPENJEV_BACKEND_VOCAB_SIZE": str(VOCAB_SIZE),
        }
        # SGLang names its tokenizer by a hub name (not a directory here); --tokenizer and the local model
        # directory hold every file: images are served, and the hub is never asked.
        fake = FakeSGLang(vision=True, tokenizer_path="example-org/vision-model").start()
        try:
            server = launch_openjev(
                "--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir), log_dir=tmp_path, env=env
            )
            try:
                assert httpx.get(f"{server.url}/health").json()["images"] is True
                assert httpx.get(f"{server.url}/v1/limits").json()["images"]["accepted"] is True
            finally:
                stop_openjev(server)
        finally:
            fake.stop()
        assert asked == []
        # A model none of whose files is on this machine: each is asked of the hub once, never retried
        # (huggingface_hub retried each for about 25 s), and the model is served as text only.
        fake = FakeSGLang(vision=True, model_path="example-org/vision-model", tokenizer_path="example-org/vision-model")
        fake.start()
        try:
            server = launch_openjev(
                "--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir), log_dir=tmp_path, env=env
            )
            try:
                assert httpx.get(f"{server.url}/health").json()["images"] is False
            finally:
                stop_openjev(server)
        finally:
            fake.stop()
        assert sorted(asked) == sorted(set(asked)) and len(asked) <= 3, asked
        assert "sees images, but its files do not give" in server.log()
