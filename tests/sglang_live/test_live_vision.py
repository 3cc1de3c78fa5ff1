"""Images end to end on a real SGLang 0.5.19: the official SDK's `Image` through openjev to SGLang's
own Qwen-VL processor, vision encoder and radix cache, on its CPU engine.

The model is the tiny random-weight Qwen2.5-VL checkpoint of `tests/backends/embedded/tiny_vision.py`
(built here, seeded): it proves plumbing, never accuracy. openjev supervises SGLang (Python frontend,
which reports `cached_tokens`), with the live tests' CPU flags and two more for this model on the CPU:
- `--image-processor-backend pil`: with the torchvision stand-in installed, transformers would pick
  its torchvision image processor, whose first call (`pil_to_tensor`) the stand-in cannot serve.
- `TORCHDYNAMO_DISABLE=1`: SGLang's `@torch.compile` helpers run eager. Compiling them made the first
  image request take 37 s on a 2-core machine; eager took 5 s, with identical logprobs.
Supervised, SGLang gets each image as a path to the PNG openjev wrote (`OPENJEV_IMAGE_TRANSFER=auto`):
the radix-cache hit and the probabilities below hold for images read from files.
One SGLang start and four requests: about 2 minutes on 2 cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import httpx2
import pytest
from typesafe_sdk import Choice, Image, Noul, RetryPolicy, TypeSafeClient

from tests.conftest import ServeOpenJev, wait_for
from tests.sglang_live.environment import CPU_FLAGS

pytestmark = [pytest.mark.sglang_live, pytest.mark.timeout(600)]

START_TIMEOUT = 420
QUESTIONS = {
    "blurry": Noul(instructions="Is the photo blurry?"),
    "animal": Choice(
        instructions="Which animal does the photo show?",
        criteria={"cat": "A cat is shown", "dog": "A dog is shown", "none": "No animal"},
    ),
}


@pytest.fixture(scope="module")
def tiny_vl(tmp_path_factory: pytest.TempPathFactory, qwen_tokenizer_dir: Path) -> Path:
    pytest.importorskip("transformers")
    from tests.backends.embedded.tiny_vision import build_tiny_vision

    return build_tiny_vision(tmp_path_factory.mktemp("tiny-qwen2.5-vl"), qwen_tokenizer_dir, "qwen2_5_vl")


def noise_png(seed: int, height: int, width: int) -> bytes:
    from tests.backends.embedded.tiny_vision import png_image

    return png_image(seed, height, width).data


def probabilities(result) -> list[float]:
    return [result.nouls["blurry"].noul, *result.choices["animal"].probabilities.values()]


def test_the_sdk_asks_sglang_about_a_state_image(
    serve_openjev: ServeOpenJev, sglang_python: Path, tiny_vl: Path, cpu_environment: dict[str, str]
) -> None:
    from openjev.backends.sglang_vision import vision_spec

    spec = vision_spec(*(json.loads((tiny_vl / name).read_text()) for name in
                         ("config.json", "preprocessor_config.json", "tokenizer.json")))  # fmt: skip
    assert spec is not None
    environment = {
        **cpu_environment,
        "OPENJEV_SGLANG_ARGS": f"{CPU_FLAGS} --image-processor-backend pil",
        "TORCHDYNAMO_DISABLE": "1",
    }
    server = serve_openjev(
        "--sglang-python", str(sglang_python), "--frontend", "python", "--model", str(tiny_vl),
        "--tokenizer", str(tiny_vl), "--served-model-name", "tiny-vl", "--max-long-context-tokens", "1024",
        env=environment, ready=False, timeout=60,
    )  # fmt: skip
    wait_for(f"{server.url}/health", timeout=START_TIMEOUT, process=server.process)
    images = httpx.get(f"{server.url}/v1/limits").json()["images"]
    assert images["accepted"] is True, server.log()
    # Supervised, SGLang runs on this machine: each image reaches it as a file openjev wrote once.
    assert httpx.get(f"{server.url}/health").json()["backend"]["image_transfer"] == "file"
    assert images["square_image_tokens"] == spec.image_tokens(1024, 1024)

    # The SDK's response holds no headers: an event hook on its HTTP client keeps them.
    headers: list[httpx2.Headers] = []
    keep = {"response": [lambda response: headers.append(response.headers)]}
    client = httpx2.Client(base_url=server.url, timeout=300, event_hooks=keep)
    with TypeSafeClient(base_url=server.url, api_key="k", http_client=client, retry=RetryPolicy(max_retries=0)) as sdk:

        def ask(png: bytes):
            result = sdk.system_one(state=["The customer sent this photo:", Image(png)], questions=QUESTIONS)
            return result, int(headers[-1]["x-openjev-prefix-tokens"]), int(headers[-1]["x-openjev-cached-tokens"])

        a, b, larger = noise_png(1, 84, 112), noise_png(2, 84, 112), noise_png(1, 112, 168)
        first, prefix, _ = ask(a)
        other, other_prefix, other_cached = ask(b)
        again, _, again_cached = ask(a)
        bigger, bigger_prefix, _ = ask(larger)

    print(f"live vision: A {probabilities(first)}, B {probabilities(other)}; cached tokens B {other_cached}, "
          f"A again {again_cached}; input tokens {first.usage.input_tokens}, "
          f"larger image {bigger.usage.input_tokens}")  # fmt: skip
    # The model sees the image: another one (same size, same text) moves the probabilities.
    assert max(abs(x - y) for x, y in zip(probabilities(first), probabilities(other), strict=True)) > 1e-3
    # The first image again: SGLang's radix cache keys its positions by the image's hash, so the warm-up
    # finds the whole earlier prefix, image included, where B's found only the text before its image.
    assert probabilities(again) == pytest.approx(probabilities(first), abs=1e-5)
    image = spec.image_tokens(84, 112)
    assert other_prefix == prefix and again_cached - other_cached >= image, (again_cached, other_cached)
    # usage.input_tokens counts the state's image once, as SGLang's positions: a larger image adds its
    # extra positions once, as many as openjev counted into the prefix.
    extra = spec.image_tokens(112, 168) - image
    assert bigger_prefix - prefix == extra > 0
    grown = bigger.usage.input_tokens - first.usage.input_tokens
    assert grown == extra, (grown, extra)
