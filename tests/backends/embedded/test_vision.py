"""The embedded backend's vision path on tiny random-weight Qwen2.5-VL and Qwen3-VL checkpoints.

The checkpoints are built at test time (`tiny_vision.py`: seeded weights, the Qwen tokenizer, a
preprocessor_config.json), so nothing comes from a hub; they prove plumbing, never accuracy: the vision
tokens and bounds come from the checkpoint, an image takes exactly the processor's grid, answers are
deterministic, another image moves the label logprobs and never reuses the first one's cache, and a
readout over a reused prefix (alone, batched, or after a generation) equals a full forward, which itself
equals transformers' own forward of the processor's inputs. Everything runs in float32, where the two
paths agree to ~1e-6.
"""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from openjev.backends.base import BackendError, GenerationCall, ImageInput, LabelLogprobs, ReadoutCall
from openjev.backends.embedded import EmbeddedBackend
from openjev.backends.embedded.conversion import ModelSourceError
from openjev.backends.embedded.model_source import resolve_model
from tests.backends.embedded.conftest import backends_on
from tests.backends.embedded.tiny_vision import (
    FAMILIES,
    FAMILY_VISION,
    IMAGE_PAD,
    MAX_PIXELS,
    MIN_PIXELS,
    VISION_END,
    VISION_START,
    build_tiny_vision,
    png_image,
)

pytestmark = pytest.mark.embedded

#: float32 prefix + suffix against one prefill, as the text path's fp32 test pins it.
FP32_TOLERANCE = 1e-3
IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"


@pytest.fixture(scope="session", params=FAMILIES)
def tiny_vision_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, qwen_tokenizer_dir: Path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return build_tiny_vision(tmp_path_factory.mktemp(request.param), qwen_tokenizer_dir, request.param)


@pytest.fixture
def make(tiny_vision_dir: Path) -> Iterator[Callable[..., EmbeddedBackend]]:
    """Fresh started float32 backends on the tiny checkpoint (own prefix cache), closed after the test."""
    yield from backends_on(str(tiny_vision_dir), dtype="float32", threads=1)


@pytest.fixture
def vision_tokenizer(tiny_vision_dir: Path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tiny_vision_dir / "tokenizer.json"))


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False).ids


def labels(tokenizer) -> list[int]:
    ids = [encode(tokenizer, word) for word in (" Yes", " No", " red", " blue")]
    assert all(len(i) == 1 for i in ids)
    return [i[0] for i in ids]


def readout(backend: EmbeddedBackend, ids: list[int], label_ids: list[int], *images: ImageInput) -> LabelLogprobs:
    call = ReadoutCall(rid=uuid.uuid4().hex, input_ids=ids, label_token_ids=label_ids, images=images)
    return asyncio.run(backend.readout(call))


def prefix(tokenizer, marker: str) -> list[int]:
    """A user turn with one image, unique per `marker` so no other test's cache holds it."""
    return encode(tokenizer, f"<|im_start|>user\nPhoto {marker}: {IMAGE} What is shown?")


def suffix(tokenizer, question: str) -> list[int]:
    return encode(tokenizer, f"\nQuestion: {question}<|im_end|>\n<|im_start|>assistant\n")


def assert_close(got: LabelLogprobs, want: LabelLogprobs) -> None:
    assert max(abs(a - b) for a, b in zip(got.logprobs, want.logprobs, strict=True)) < FP32_TOLERANCE
    assert got.prompt_tokens == want.prompt_tokens


def test_vision_spec_is_the_checkpoints(make, tiny_vision_dir: Path, vision_tokenizer) -> None:
    assert [vision_tokenizer.token_to_id(t) for t in ("<|vision_start|>", "<|image_pad|>", "<|vision_end|>")] == [
        VISION_START,
        IMAGE_PAD,
        VISION_END,
    ]
    spec = make().vision
    assert spec is not None
    assert (spec.vision_start, spec.image_pad, spec.vision_end) == (
        "<|vision_start|>",
        "<|image_pad|>",
        "<|vision_end|>",
    )
    family = json.loads((tiny_vision_dir / "config.json").read_text())["model_type"]
    assert (spec.patch_size, spec.merge_size) == (FAMILY_VISION[family]["patch_size"], 2)
    assert (spec.min_pixels, spec.max_pixels) == (MIN_PIXELS, MAX_PIXELS)


def test_text_only_checkpoint_sees_nothing(backend: EmbeddedBackend, tokenizer) -> None:
    assert backend.vision is None
    with pytest.raises(BackendError, match="reads text only"):
        readout(backend, prefix(tokenizer, "text-only"), labels(tokenizer), png_image(1, 56, 56))


def test_an_image_takes_the_processors_grid(make, tiny_vision_dir: Path, vision_tokenizer) -> None:
    from transformers import AutoImageProcessor

    processor = AutoImageProcessor.from_pretrained(str(tiny_vision_dir))
    backend = make()
    # Within the bounds, off the patch multiples, past max_pixels, under min_pixels, and very oblong.
    for size in [(112, 56), (60, 90), (300, 300), (20, 20), (33, 500)]:
        image = png_image(7, *size)
        grid = processor(images=[pil(image)], return_tensors="pt")["image_grid_thw"]
        positions = int(grid.prod()) // processor.merge_size**2
        ids = prefix(vision_tokenizer, f"grid-{size}")
        assert readout(backend, ids, labels(vision_tokenizer), image).prompt_tokens == len(ids) - 1 + positions
        assert backend.vision.image_tokens(*size) == positions


@pytest.mark.parametrize("images", [2, 0])
def test_a_readout_equals_transformers_own_forward(make, tiny_vision_dir: Path, vision_tokenizer, images: int) -> None:
    if images:
        ids = prefix(vision_tokenizer, "reference") + suffix(vision_tokenizer, f"And {IMAGE}?")
        shown = (png_image(1, 112, 56), png_image(2, 60, 90))
    else:
        ids, shown = suffix(vision_tokenizer, "Text only: is it red?"), ()
    got = readout(make(prefix_cache_bytes=0), ids, labels(vision_tokenizer), *shown)
    want = reference(tiny_vision_dir, ids, labels(vision_tokenizer), shown)
    assert max(abs(a - b) for a, b in zip(got.logprobs, want, strict=True)) < FP32_TOLERANCE


def test_a_vision_directory_needs_its_image_processor(tiny_vision_dir: Path, tmp_path: Path) -> None:
    assert resolve_model(str(tiny_vision_dir)).path == tiny_vision_dir.resolve()
    copy = tmp_path / "no-processor"
    shutil.copytree(tiny_vision_dir, copy, ignore=shutil.ignore_patterns("preprocessor_config.json"))
    with pytest.raises(ModelSourceError, match=r"preprocessor_config\.json"):
        resolve_model(str(copy))


def test_answers_are_deterministic(make, vision_tokenizer) -> None:
    ids, image = prefix(vision_tokenizer, "same") + suffix(vision_tokenizer, "Is it red?"), png_image(3, 112, 56)
    first = readout(make(prefix_cache_bytes=0), ids, labels(vision_tokenizer), image)
    again = readout(make(prefix_cache_bytes=0), ids, labels(vision_tokenizer), image)
    assert first == again


def test_another_image_changes_the_logprobs_and_never_reuses(make, vision_tokenizer) -> None:
    backend = make()
    ids = prefix(vision_tokenizer, "another") + suffix(vision_tokenizer, "Is it red?")
    first = readout(backend, ids, labels(vision_tokenizer), png_image(4, 112, 56))
    other = readout(backend, ids, labels(vision_tokenizer), png_image(5, 112, 56))
    assert other.cached_tokens == 0
    assert max(abs(a - b) for a, b in zip(first.logprobs, other.logprobs, strict=True)) > 0.01
    assert readout(backend, ids, labels(vision_tokenizer), png_image(4, 112, 56)).cached_tokens == first.prompt_tokens


def test_a_reused_prefix_equals_a_full_forward(make, vision_tokenizer) -> None:
    cached, full = make(), make(prefix_cache_bytes=0)
    state, image = prefix(vision_tokenizer, "reuse"), png_image(6, 112, 56)
    warm = readout(cached, state, labels(vision_tokenizer), image)
    text = state + suffix(vision_tokenizer, "Is it red?")
    with_image = state + suffix(vision_tokenizer, f"Compare {IMAGE}: same?")
    got = readout(cached, text, labels(vision_tokenizer), image)
    assert got.cached_tokens == warm.prompt_tokens
    assert_close(got, readout(full, text, labels(vision_tokenizer), image))
    got = readout(cached, with_image, labels(vision_tokenizer), image, png_image(7, 60, 90))
    assert got.cached_tokens == warm.prompt_tokens
    assert_close(got, readout(full, with_image, labels(vision_tokenizer), image, png_image(7, 60, 90)))


def test_batched_branches_equal_full_forwards(make, vision_tokenizer) -> None:
    cached, full = make(), make(prefix_cache_bytes=0)
    state, image = prefix(vision_tokenizer, "batch"), png_image(8, 112, 56)
    warm = readout(cached, state, labels(vision_tokenizer), image)
    branches = [
        (state + suffix(vision_tokenizer, "Is it red?"), (image,)),
        (state + suffix(vision_tokenizer, f"Same as {IMAGE}?"), (image, png_image(9, 60, 90))),
        (state + suffix(vision_tokenizer, f"Same as {IMAGE}? Or blue?"), (image, png_image(10, 56, 112))),
        (state + suffix(vision_tokenizer, "Blue?"), (image,)),
    ]

    async def together() -> list[LabelLogprobs]:
        calls = [
            ReadoutCall(uuid.uuid4().hex, ids, labels(vision_tokenizer), images=images) for ids, images in branches
        ]
        return await asyncio.gather(*(cached.readout(call) for call in calls))

    answers = asyncio.run(together())
    assert asyncio.run(cached.health()).detail["batched_readouts"] >= 2
    for (ids, images), got in zip(branches, answers, strict=True):
        assert got.cached_tokens == warm.prompt_tokens
        assert_close(got, readout(full, ids, labels(vision_tokenizer), *images))


def test_generation_over_an_image_and_the_readout_after_it(make, vision_tokenizer) -> None:
    cached, full = make(), make(prefix_cache_bytes=0)
    ids, image = prefix(vision_tokenizer, "generate") + suffix(vision_tokenizer, "Describe it."), png_image(11, 112, 56)

    def generate(backend: EmbeddedBackend):
        call = GenerationCall(uuid.uuid4().hex, ids, max_new_tokens=4, stop_token_ids=[], images=(image,))
        return asyncio.run(backend.generate(call))

    readout(cached, prefix(vision_tokenizer, "generate"), labels(vision_tokenizer), image)
    generated = generate(cached)
    assert generated.output_ids == generate(full).output_ids
    assert generated.prompt_tokens == readout(full, ids, labels(vision_tokenizer), image).prompt_tokens
    after = ids + list(generated.output_ids) + encode(vision_tokenizer, "\nAnswer:")
    got = readout(cached, after, labels(vision_tokenizer), image)
    assert got.cached_tokens == generated.prompt_tokens + len(generated.output_ids) - 1
    assert_close(got, readout(full, after, labels(vision_tokenizer), image))


def test_pads_and_images_must_match(make, vision_tokenizer) -> None:
    backend = make()
    with pytest.raises(BackendError, match="1 image pads but 0 images"):
        readout(backend, prefix(vision_tokenizer, "no image"), labels(vision_tokenizer))
    with pytest.raises(BackendError, match="0 image pads but 1 images"):
        readout(backend, suffix(vision_tokenizer, "text"), labels(vision_tokenizer), png_image(1, 56, 56))


def pil(image: ImageInput):
    from PIL import Image

    return Image.open(io.BytesIO(image.data)).convert("RGB")


def reference(path: Path, ids: list[int], label_ids: list[int], images: tuple[ImageInput, ...]) -> list[float]:
    """transformers' own forward of the processor's inputs: each pad repeated to its grid, positions its own."""
    import torch
    from transformers import AutoImageProcessor, AutoModelForImageTextToText

    processor = AutoImageProcessor.from_pretrained(str(path))
    model = AutoModelForImageTextToText.from_pretrained(str(path), dtype=torch.float32).eval()
    inputs = processor(images=[pil(image) for image in images], return_tensors="pt") if images else {}
    counts = iter((inputs["image_grid_thw"].prod(-1) // processor.merge_size**2).tolist() if images else [])
    expanded = [t for token in ids for t in ([token] * next(counts) if token == IMAGE_PAD else [token])]
    input_ids = torch.tensor([expanded])
    with torch.inference_mode():
        logits = model(input_ids=input_ids, mm_token_type_ids=(input_ids == IMAGE_PAD).int(), **inputs).logits[0, -1]
    return torch.log_softmax(logits.float(), dim=-1)[label_ids].tolist()
