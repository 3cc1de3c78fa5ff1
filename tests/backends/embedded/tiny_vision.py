"""A tiny random-weight Qwen-VL checkpoint built at test time (no hub), and test images.

`build_tiny_vision(target, tokenizer_dir, family)` saves config, safetensors weights (seeded, so every
build is the same model), the Qwen tokenizer and chat template, and a preprocessor_config.json for the
checkpoint's own image processor. The vision token ids are the Qwen tokenizer's: `<|vision_start|>`
151652, `<|vision_end|>` 151653, `<|image_pad|>` 151655. Widths are 16-32, so a forward takes
milliseconds; the weights are drawn wider than the default (std 0.5) so an image or a position moves
the label logprobs well above float32 rounding. Such a model proves plumbing, never accuracy.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

from openjev.backends.base import ImageInput

VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = 151652, 151653, 151655, 151656
VOCAB = 151936
FAMILIES = ("qwen2_5_vl", "qwen3_vl", "qwen3_5")
#: The processor's pixel bounds, small so test images stay a few dozen positions.
MIN_PIXELS, MAX_PIXELS = 4 * 28 * 28, 64 * 32 * 32


#: Two layers 32 wide (heads of 16), and a vision tower of two blocks, for every family.
TEXT = {
    "vocab_size": VOCAB,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "max_position_embeddings": 8192,
    "initializer_range": 0.5,
    "tie_word_embeddings": True,
}
VISION = {
    "depth": 2,
    "hidden_size": 32,
    "num_heads": 2,
    "intermediate_size": 64,
    "out_hidden_size": 32,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "initializer_range": 0.5,
}
#: Per family: the text model's extra settings (rotary sections over its 16-wide heads), and the vision
#: tower's. Qwen3.5 interleaves gated-delta (linear attention) layers with full-attention ones.
MROPE = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
FAMILY_TEXT: dict[str, dict] = {
    "qwen2_5_vl": {"rope_parameters": MROPE},
    "qwen3_vl": {"head_dim": 16, "rope_parameters": MROPE | {"mrope_interleaved": True}},
    "qwen3_5": {
        "head_dim": 16,
        "rope_parameters": MROPE | {"mrope_interleaved": True, "partial_rotary_factor": 1.0},
        "layer_types": ["linear_attention", "full_attention"],
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 8,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 2,
    },
}
FAMILY_VISION: dict[str, dict] = {
    "qwen2_5_vl": {"patch_size": 14, "window_size": 56, "fullatt_block_indexes": [1]},
    "qwen3_vl": {"patch_size": 16, "num_position_embeddings": 256, "deepstack_visual_indexes": [0]},
    "qwen3_5": {"patch_size": 16, "num_position_embeddings": 256},
}


def _config(family: str):
    from transformers import Qwen2_5_VLConfig, Qwen3_5Config, Qwen3VLConfig

    config = {"qwen2_5_vl": Qwen2_5_VLConfig, "qwen3_vl": Qwen3VLConfig, "qwen3_5": Qwen3_5Config}[family]
    return config(
        text_config=TEXT | FAMILY_TEXT[family],
        vision_config=VISION | FAMILY_VISION[family],
        image_token_id=IMAGE_PAD,
        video_token_id=VIDEO_PAD,
        vision_start_token_id=VISION_START,
        vision_end_token_id=VISION_END,
        tie_word_embeddings=True,
        initializer_range=0.5,
    )


def build_tiny_vision(target: Path, tokenizer_dir: Path, family: str = "qwen2_5_vl") -> Path:
    import torch
    from transformers import AutoModelForImageTextToText

    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_config(_config(family), dtype=torch.float32)
    model.save_pretrained(target)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, target / name)
    processor = {
        "image_processor_type": "Qwen2VLImageProcessor",
        "patch_size": FAMILY_VISION[family]["patch_size"],
        "merge_size": 2,
        "temporal_patch_size": 2,
        "size": {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
    }
    (target / "preprocessor_config.json").write_text(json.dumps(processor, indent=2))
    return target


def png_image(seed: int, height: int, width: int) -> ImageInput:
    """A noise image of the given size, as the prompt side hands it over (PNG, sha256, size)."""
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    png = buffer.getvalue()
    return ImageInput(data=png, sha256=hashlib.sha256(png).hexdigest(), height=height, width=width)
