"""The fake SGLang's vision mode (`FakeSGLang(vision=True)`): a Qwen3-VL-style model that sees.

What it serves as 0.5.19 does for such a model: `/model_info` says `has_image_understanding`, and its
model directory holds the files SGLang's processor reads (`config.json` with `vision_config` and the
vision token ids of the Qwen tokenizer the tests use; `preprocessor_config.json` with Qwen3-VL's patch
16, merge 2 and pixel bounds). A `/generate` body with `image_data` is read as 0.5.19's Qwen-VL
processor reads it (`sglang_vision.py` in openjev says where): one image per vision span of the
ids, each a base64 string or a path to a file on this machine (`load_image`), each pad expanded to
the image's positions, which `prompt_tokens` counts; the radix cache keys those positions by the
image (a pad value from its bytes), so the same image is a cache hit and another is not; and the
label logprobs depend on the image bytes, as a model's would.

openjev's contract, held as violations: `image_data` only to a model that sees, one PNG or JPEG per
pad (never a JPEG that ends with its end marker: 0.5.19 with a GPU decodes it there, and then tokenizes
the prompt again, `is_jpeg_with_cuda`), each pad inside a whole vision span, and never a pad without
an image.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from PIL import Image

from openjev.prompting.vision import VisionSpec
from tests.fake_sglang.rules import VOCAB_SIZE

#: The Qwen tokenizer's vision tokens (the tests' tokenizer has them as added special tokens).
VISION_START, IMAGE_PAD, VISION_END = 151652, 151655, 151653
#: Qwen3-VL's processor: patch 16, merge 2, at least 256x256 pixels, at most 4096x4096.
PREPROCESSOR = {
    "patch_size": 16,
    "merge_size": 2,
    "temporal_patch_size": 2,
    "size": {"shortest_edge": 65536, "longest_edge": 16777216},
    "image_processor_type": "Qwen2VLImageProcessorFast",
}
SPEC = VisionSpec("<|vision_start|>", "<|image_pad|>", "<|vision_end|>", 16, 2, 65536, 16777216)
#: SGLang's pad values sit above every vocabulary id (`schedule_batch.py`: 1_000_000 + hash % 2**30).
PAD_VALUE_BASE = 1_000_000


@cache
def vision_model_dir() -> str:
    """The model directory `/model_info` names in vision mode."""
    directory = Path(tempfile.mkdtemp(prefix="fake-sglang-vision-model-"))
    config = {
        "architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl", "vocab_size": VOCAB_SIZE,
        "image_token_id": IMAGE_PAD, "vision_start_token_id": VISION_START, "vision_end_token_id": VISION_END,
        "vision_config": {"patch_size": 16, "spatial_merge_size": 2},
    }  # fmt: skip
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR))
    return str(directory)


@dataclass(frozen=True)
class SeenPrompt:
    """A body's prompt as the model sees it."""

    #: Every pad expanded to its image's positions, each holding the image's pad value (the radix key).
    key: list[int]
    #: The same length with the pad id in those positions (what the length limits count).
    expanded: list[int]
    #: The sha256 of each image's bytes, in order.
    digests: tuple[str, ...]


def _image_bytes(entry: str) -> bytes | str:
    """The bytes an entry stands for, as 0.5.19's `load_image` and `get_image_bytes` read a string: one
    that starts with `file://` or `/` is read from this machine's files (a bare base64 JPEG, "/9j/...",
    too), a `data:` URL is the base64 after its comma, anything else is base64."""
    if entry.startswith(("file://", "/")):
        try:
            return Path(entry.removeprefix("file://")).read_bytes()
        except OSError as error:
            return f"an image_data path does not read: {error}"
    try:
        return base64.b64decode(entry.split(",", 1)[1] if entry.startswith("data:") else entry, validate=True)
    except (binascii.Error, ValueError):
        return "an image_data entry is not base64"


def _image(entry: Any) -> tuple[bytes, Image.Image] | str:
    if not isinstance(entry, str):
        return "an image_data entry is not a string (a path or base64)"
    data = _image_bytes(entry)
    if isinstance(data, str):
        return data
    if not data.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8")):
        return "an image_data entry is not a PNG or a JPEG"
    if data.startswith(b"\xff\xd8") and data.endswith(b"\xff\xd9"):
        return "a JPEG that ends with its end marker is decoded on the GPU and its prompt tokenized again"
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except OSError as error:
        return f"an image_data entry does not decode: {error}"
    return data, image


def _pads_in_spans(ids: list[int]) -> bool:
    return all(
        0 < i < len(ids) - 1 and ids[i - 1] == VISION_START and ids[i + 1] == VISION_END
        for i, token in enumerate(ids)
        if token == IMAGE_PAD
    )


def seen_prompt(body: dict[str, Any], vision: bool, limit: int) -> SeenPrompt | str:
    """The prompt as the model sees it, or the contract violation that keeps it from seeing it; `limit`:
    the scheduler's `max_req_input_len`, which the expanded prompt must stay under (openjev's budgets
    count every image position; the ids alone are checked by `rules.judge`)."""
    ids, images = body["input_ids"], body.get("image_data")
    pads = ids.count(IMAGE_PAD)
    if images is None:
        return "image pads without image_data" if pads and vision else SeenPrompt(ids, ids, ())
    if not vision:
        return "image_data sent to a model that reads text only"
    if not isinstance(images, list) or len(images) != pads or not _pads_in_spans(ids):
        return f"image_data must be one PNG per image pad, each pad in a vision span ({pads} pads)"
    key: list[int] = []
    expanded: list[int] = []
    digests = []
    loaded = iter([_image(entry) for entry in images])
    for token in ids:
        if token != IMAGE_PAD:
            key.append(token)
            expanded.append(token)
            continue
        found = next(loaded)
        if isinstance(found, str):
            return found
        data, image = found
        digest = hashlib.sha256(data).hexdigest()
        digests.append(digest)
        count = SPEC.image_tokens(image.height, image.width)
        key += [PAD_VALUE_BASE + int(digest[:8], 16) % 2**30] * count
        expanded += [IMAGE_PAD] * count
    if len(expanded) >= limit:
        return f"the prompt takes {len(expanded)} positions with its images, over the scheduler's {limit}"
    return SeenPrompt(key, expanded, tuple(digests))
