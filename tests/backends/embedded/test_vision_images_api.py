"""The official SDK's image requests against `openjev serve` on the embedded tiny Qwen2.5-VL checkpoint
(`tiny_vision.py`), over real HTTP, with no fakes: a state image and a choice question whose instructions
show another image are answered; another state image gives other probabilities; the same request again
is answered alike from the prefix cache, and every count includes the images' positions. A box question
is answered by the constrained generation over the logits mask, in Qwen2.5-VL's pixel coordinates."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from typesafe_sdk import Box, Choice, Image, Noul, RetryPolicy, TypeSafeClient

from openjev.prompting.vision import VisionSpec
from tests.api.test_images import png
from tests.backends.embedded.tiny_vision import MAX_PIXELS, MIN_PIXELS
from tests.conftest import ServeOpenJev, eventually

pytestmark = pytest.mark.embedded


def ask(sdk: TypeSafeClient, state_png: bytes, reference_png: bytes):
    return sdk.system_one(
        state=["The customer sent this photo:", Image(state_png)],
        questions={
            "match": Choice(
                instructions=["Which animal matches this reference picture?", Image(reference_png)],
                criteria={"cat": "A cat is shown", "dog": "A dog is shown", "car": None},
            ),
            "blurry": Noul(instructions="Is the photo blurry?"),
        },
    )


def text_twin(sdk_url: str) -> int:
    """The input tokens of the same request with its images left out."""
    retry = RetryPolicy(max_retries=0)
    with TypeSafeClient(base_url=sdk_url, api_key="k", retry=retry, timeout=300) as sdk:
        answer = sdk.system_one(
            state="The customer sent this photo:",
            questions={
                "match": Choice(
                    instructions="Which animal matches this reference picture?",
                    criteria={"cat": "A cat is shown", "dog": "A dog is shown", "car": None},
                ),
                "blurry": Noul(instructions="Is the photo blurry?"),
            },
        )
    return answer.usage.input_tokens


def test_the_sdk_asks_the_embedded_vision_model(serve_openjev: ServeOpenJev, tiny_qwen2_5_vl: Path) -> None:
    server = serve_openjev(env={"OPENJEV_LOCAL_MODEL": str(tiny_qwen2_5_vl)}, timeout=600)
    limits = httpx.get(f"{server.url}/v1/limits").json()["images"]
    assert limits["accepted"] is True
    red, blue, green = png(120, 80, (200, 30, 30)), png(120, 80, (20, 30, 230)), png(64, 64, (30, 200, 30))
    retry = RetryPolicy(max_retries=0)
    with TypeSafeClient(base_url=server.url, api_key="k", compression="zstd", retry=retry, timeout=300) as sdk:
        first, other, again = ask(sdk, red, green), ask(sdk, blue, green), ask(sdk, red, green)
    assert abs(sum(first.answers["match"].probabilities.values()) - 1) < 1e-6
    assert first.answers["blurry"].noul != other.answers["blurry"].noul
    assert again.answers == first.answers
    # usage counts each image once, as its positions: the state image's 12 (120 x 80 resized to 112 x 84,
    # one position per 28 x 28) in the input, the reference image's 4 in its question.
    spec = VisionSpec("<|vision_start|>", "<|image_pad|>", "<|vision_end|>", 14, 2, MIN_PIXELS, MAX_PIXELS)
    assert (spec.image_tokens(80, 120), spec.image_tokens(64, 64)) == (12, 4)
    assert first.usage.input_tokens - text_twin(sdk_url=server.url) >= 12 + 4

    # `/health` shares one backend probe for a second (`api/probe.py`): its counters may lag by that much.
    def backend() -> dict:
        return httpx.get(f"{server.url}/health").json()["backend"]

    assert eventually(lambda: backend()["batched_readouts"] >= 2 and backend()["prefix_cache"]["hits"] >= 4, 5)


def test_the_embedded_vision_model_answers_a_well_formed_deterministic_box(
    serve_openjev: ServeOpenJev, tiny_qwen2_5_vl: Path
) -> None:
    server = serve_openjev(env={"OPENJEV_LOCAL_MODEL": str(tiny_qwen2_5_vl)}, timeout=600)
    limits = httpx.get(f"{server.url}/v1/limits").json()["boxes"]
    # Qwen2.5-VL writes pixels of the resized image: up to 4 digits at this processor's pixel bound.
    assert limits == {"accepted": True, "grounding": "absolute-pixels", "max_new_tokens": 4 * 4 + 3 * 2 + 1 + 1}
    photo = png(120, 80, (200, 30, 30))
    retry = RetryPolicy(max_retries=0)
    with TypeSafeClient(base_url=server.url, api_key="k", retry=retry, timeout=300) as sdk:
        answers = [
            sdk.system_one(state=["Where is it?", Image(photo)], questions={"it": Box(instructions="The red part")})
            for _ in range(2)
        ]
    first, again = (result.boxes["it"] for result in answers)
    assert first == again
    edges = first.box
    assert all(0 <= value <= 1 for value in edges.model_dump().values())
    assert edges.left <= edges.right and edges.top <= edges.bottom
    assert first.confidence is not None and 0 <= first.confidence <= 1
    # The box's generation: each generated id counts (the warm-up is openjev's own).
    assert answers[0].usage.output_tokens > 4
