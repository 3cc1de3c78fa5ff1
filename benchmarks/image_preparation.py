"""What an image costs openjev before any backend sees it: decode, orient, RGB, resize, one PNG.

Cases (photo-like pictures: smooth gradients with seeded noise, so PNG and JPEG work as on photos):
- a 1-megapixel PNG and JPEG (1152x864 is 995k pixels: within the default budget, no resize);
- a 4-megapixel JPEG and PNG (2304x1728), resized to the default budget of 1,048,576 pixels;
- the same 1-megapixel image again (the cache by sha256: a repeated image is decoded once);
- base64 of the prepared PNG, which the SGLang backend sends with every call that shows the image
  (once per image and process while it is recent: `sglang_vision.ImageData`), and the PNG's size.
Printed per case: the median and p90 of `--repeats` runs in milliseconds, and the ratio of the
median to the 1-megapixel PNG's (same run).

    uv run python benchmarks/image_preparation.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import base64
import io
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openjev.config import Settings
from openjev.request.images import ImagePreparer, make_safe


def picture(width: int, height: int, kind: str, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    base = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    noise = Image.frombytes("RGB", (width, height), rng.randbytes(width * height * 3))
    image = Image.blend(base, noise, 0.15)
    out = io.BytesIO()
    image.save(out, format=kind, **({"quality": 90} if kind == "JPEG" else {}))
    return out.getvalue()


def timed(work: Callable[[], object], repeats: int) -> list[float]:
    work()  # warm: imports, allocator
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    repeats = parser.parse_args().repeats
    settings = Settings()
    budget = {"max_pixels": settings.max_image_pixels, "max_source_pixels": settings.max_image_source_pixels}
    one_png, one_jpeg = picture(1152, 864, "PNG"), picture(1152, 864, "JPEG")
    four_png, four_jpeg = picture(2304, 1728, "PNG", 1), picture(2304, 1728, "JPEG", 1)
    prepared = make_safe(one_png, **budget)
    cache = ImagePreparer(settings)
    cache.prepare({"a": one_png})
    cases = {
        "1 MP PNG (no resize)": lambda: make_safe(one_png, **budget),
        "1 MP JPEG (no resize)": lambda: make_safe(one_jpeg, **budget),
        "4 MP PNG -> 1 MP": lambda: make_safe(four_png, **budget),
        "4 MP JPEG -> 1 MP (DCT draft)": lambda: make_safe(four_jpeg, **budget),
        "1 MP PNG again (cache hit)": lambda: cache.prepare({"a": one_png}),
        "base64 of the prepared PNG": lambda: base64.b64encode(prepared.data),
    }
    print(f"inputs: 1 MP PNG {len(one_png) // 1024} KiB, JPEG {len(one_jpeg) // 1024} KiB; "
          f"4 MP PNG {len(four_png) // 1024} KiB, JPEG {len(four_jpeg) // 1024} KiB; prepared PNG "
          f"{len(prepared.data) // 1024} KiB ({prepared.width}x{prepared.height})")  # fmt: skip
    reference = None
    for name, work in cases.items():
        times = timed(work, repeats)
        median, p90 = statistics.median(times), statistics.quantiles(times, n=10)[-1]
        reference = reference or median
        print(f"{name:32s} p50 {median:8.2f} ms   p90 {p90:8.2f} ms   x{median / reference:6.3f} of the 1 MP PNG")


if __name__ == "__main__":
    main()
