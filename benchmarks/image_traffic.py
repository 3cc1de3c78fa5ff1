"""What one request with images makes openjev send to SGLang, in bytes, counted by the fake SGLang.

Two processes: the protocol-faithful fake SGLang in vision mode (`tests/fake_sglang`, which counts the
bytes of every `/generate` body it receives) and `openjev serve --connect` to it, once per image
transfer (OPENJEV_IMAGE_TRANSFER: `base64`, and `file`, which a supervised SGLang gets by default).
Cases:
- honest: 10 noul questions about one 1-megapixel JPEG photo (1152x864, quality 90), sent as JSON
  `data_base64`, each time a new photo (a new seed), so nothing is cached by openjev or the fake;
- shown15: a 60 KB noise JPEG (736x736, quality 10) whose placeholder the state writes 15 times, 15
  noul questions, sent as JSON `data_base64`, a new image each time;
- attack: a multipart zstd body of a 64x64 PNG carrying a 9 MiB private ancillary chunk, its
  placeholder written 25 times in the state, 2 questions.
Printed per case and transfer: the body the client sent (bytes on the wire), the `/generate` posts
(a batch of readouts is one post), the readouts they held and the bytes they carried (median of
`--repeats` requests), and that total over the client's bytes; the bytes of the images those posts
carried (decoded; with `file` transfer, the files they name) and that over (the source image's bytes
x the times the calls showed it); and the size of the honest case's prepared image (what `file`
transfer writes to disk, once).

    uv run python benchmarks/image_traffic.py [--repeats 3] [--transfers base64,file]
"""

from __future__ import annotations

import argparse
import base64
import io
import random
import statistics
import struct
import sys
import tempfile
import zlib
from pathlib import Path

import httpx
import zstandard
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from image_preparation import picture

from openjev.config import Settings
from openjev.request.images import make_safe
from tests.conftest import fetch_qwen_tokenizer, launch_openjev, stop_openjev
from tests.fake_sglang import FakeSGLang

QUESTIONS = {
    f"q{i}": {"type": "noul", "instructions": f"Is detail number {i} visible in the photo?"} for i in range(10)
}


def private_chunk_png(chunk_bytes: int) -> bytes:
    """A 64x64 RGB PNG with an ancillary private chunk (`prVt`) of `chunk_bytes` zero bytes before IEND."""
    out = io.BytesIO()
    Image.new("RGB", (64, 64), (40, 90, 160)).save(out, format="PNG")
    png = out.getvalue()
    data = bytes(chunk_bytes)
    chunk = struct.pack(">I", len(data)) + b"prVt" + data + struct.pack(">I", zlib.crc32(b"prVt" + data))
    return png[:-12] + chunk + png[-12:]


def honest(client: httpx.Client, seed: int) -> tuple[int, int]:
    photo = base64.b64encode(picture(1152, 864, "JPEG", seed)).decode()
    body = {
        "model": "jev-latest",
        "state": "The customer sent this photo: <image:p>",
        "questions": QUESTIONS,
        "assets": {"<image:p>": {"type": "image", "format": "jpeg", "data_base64": photo}},
    }
    request = client.build_request("POST", "/v1/systemone", json=body)
    response = client.send(request)
    if response.status_code != 200:
        raise RuntimeError(f"{response.status_code}: {response.text}")
    return len(request.content), response.status_code


def noise_jpeg(seed: int) -> bytes:
    """A 736x736 JPEG of random pixels at quality 10: about 60 KB, whose PNG is about 1.6 MB."""
    out = io.BytesIO()
    Image.frombytes("RGB", (736, 736), random.Random(seed).randbytes(736 * 736 * 3)).save(
        out, format="JPEG", quality=10
    )
    return out.getvalue()


def shown15(client: httpx.Client, seed: int) -> tuple[int, int]:
    photo = base64.b64encode(noise_jpeg(seed)).decode()
    body = {
        "model": "jev-latest",
        "state": "Look: " + " ".join(["<image:p>"] * 15),
        "questions": {f"q{i}": {"type": "noul", "instructions": f"Is detail {i} there?"} for i in range(15)},
        "assets": {"<image:p>": {"type": "image", "format": "jpeg", "data_base64": photo}},
    }
    request = client.build_request("POST", "/v1/systemone", json=body)
    return len(request.content), client.send(request).status_code


def attack(client: httpx.Client, seed: int) -> tuple[int, int]:
    image = private_chunk_png(9 * 1024 * 1024 + seed)
    request_part = {
        "model": "jev-latest",
        "state": "look " + "<image:a> " * 25,
        "questions": {"a": {"type": "noul", "instructions": "?"}, "b": {"type": "noul", "instructions": "!"}},
        "assets": {"<image:a>": {"type": "image", "part": "img"}},
    }
    multipart = httpx.Request(
        "POST", "http://x/", files={"request": (None, httpx.Response(200, json=request_part).content,
                                                "application/json"), "img": ("a.png", image, "image/png")}
    )  # fmt: skip
    raw = multipart.read()
    compressed = zstandard.ZstdCompressor(level=19).compress(raw)
    headers = {"content-type": multipart.headers["content-type"], "content-encoding": "zstd"}
    response = client.post("/v1/systemone", content=compressed, headers=headers)
    return len(compressed), response.status_code


def image_bytes(entry: str) -> bytes:
    """What an `image_data` entry holds: a file's bytes, or its base64 (bare or a data URL) decoded."""
    if entry.startswith("/"):
        return Path(entry).read_bytes() if Path(entry).exists() else b""
    return base64.b64decode(entry.split(",", 1)[-1])


#: Each case: its name, how it is sent and its source image by seed (for the `x source` column).
CASES = (
    ("honest", honest, lambda seed: picture(1152, 864, "JPEG", seed)),
    ("shown15", shown15, noise_jpeg),
    ("attack", attack, lambda seed: private_chunk_png(9 * 1024 * 1024 + seed)),
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--transfers", default="base64,file")
    options = parser.parse_args()
    tokenizer = fetch_qwen_tokenizer()
    settings = Settings()
    prepared = make_safe(
        picture(1152, 864, "JPEG", 1),
        max_pixels=settings.max_image_pixels,
        max_source_pixels=settings.max_image_source_pixels,
    )
    print(f"the honest case's photo: a {len(picture(1152, 864, 'JPEG', 1)):,}-byte JPEG sent, a "
          f"{len(prepared.data):,}-byte {prepared.kind} once prepared (with `file` transfer, written to disk once per "
          "photo)")  # fmt: skip
    print(f"{'case':8s} {'transfer':8s} {'client bytes':>13s} {'status':>6s} {'posts':>5s} {'readouts':>8s} "
          f"{'bytes to SGLang':>16s} {'x client':>9s} {'image bytes':>14s} {'x source':>9s}")  # fmt: skip
    for transfer in options.transfers.split(","):
        fake = FakeSGLang(vision=True, tokenizer_path=str(tokenizer)).start()
        with tempfile.TemporaryDirectory() as logs:
            env = {"OPENJEV_IMAGE_TRANSFER": transfer}
            server = launch_openjev(
                "--connect", fake.url, "--tokenizer", str(tokenizer), log_dir=Path(logs), env=env, timeout=240
            )
            try:
                with httpx.Client(base_url=server.url, timeout=300) as client:
                    for name, send, source in CASES:
                        rows = []
                        for seed in range(options.repeats):
                            before, readouts_before = len(fake.generate_bytes), len(fake.generate_calls)
                            sent, status = send(client, seed + 1)
                            posts, readouts = fake.generate_bytes[before:], len(fake.generate_calls) - readouts_before
                            shown = [entry for call in fake.generate_calls[readouts_before:]
                                     for entry in call["body"].get("image_data") or []]  # fmt: skip
                            images = sum(len(image_bytes(entry)) for entry in shown)
                            ratio = images / (len(source(seed + 1)) * len(shown)) if shown else 0.0
                            rows.append((sent, status, len(posts), readouts, sum(posts), images, ratio))
                        sent, status, posts, readouts, total, images, ratio = (
                            statistics.median(column) for column in zip(*rows, strict=True)
                        )
                        print(f"{name:8s} {transfer:8s} {sent:13,.0f} {status:6.0f} {posts:5.0f} {readouts:8.0f} "
                              f"{total:16,.0f} {total / sent:9.2f} {images:14,.0f} {ratio:9.2f}")  # fmt: skip
            finally:
                stop_openjev(server)
                fake.stop()


if __name__ == "__main__":
    main()
