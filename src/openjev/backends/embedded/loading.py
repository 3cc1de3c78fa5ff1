"""Loading the embedded backend's checkpoint: a causal LM, or an image-text-to-text model (`vision.py`).

`load_model(torch, path, dtype)` returns the model in eval mode, and the vision model around it when the
checkpoint has a `vision_config` (None for a text-only one). In bf16/fp16 the output head is moved to
fp32 (`float32_head`). `cache_kwarg(forward)` names the argument a forward takes the KV cache by, and
`context_length(path)` reads the longest sequence from config.json (a vision config keeps it in its
`text_config`).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openjev.backends.embedded.conversion import is_vision_checkpoint
from openjev.backends.embedded.vision import VisionModel, load_vision


def load_model(torch: Any, path: Path, dtype: str) -> tuple[Any, VisionModel | None]:
    from transformers import AutoModelForCausalLM

    vision = load_vision(torch, path, dtype, cache_kwarg) if is_vision_checkpoint(path) else None
    lm = vision.lm if vision else AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype))
    lm.eval()
    if dtype != "float32":
        float32_head(torch, lm)
    return lm, vision


def context_length(path: Path) -> int | None:
    config = json.loads((path / "config.json").read_text())
    return config.get("max_position_embeddings") or config.get("text_config", {}).get("max_position_embeddings")


def cache_kwarg(forward: Callable[..., Any]) -> str:
    """transformers 5.24 calls the forward argument `cache`; earlier 5.x releases `past_key_values`
    (deprecated since). Pass whichever this version's forward takes."""
    return "cache" if "cache" in inspect.signature(forward).parameters else "past_key_values"


def float32_head(torch: Any, lm: Any) -> None:
    """Compute the output head in float32 while the rest of the model stays in bf16/fp16.

    bf16 logits are rounded to steps of 0.125-0.25 at typical magnitudes, which quantizes the label
    probability ratios this service exists to report. With `logits_to_keep=1` the head is one
    matrix-vector product per call, so fp32 costs a few ms (and one fp32 copy of the head's weight).
    """
    head = lm.get_output_embeddings()
    # New Parameters rather than `head.float()`: a head tied to the input embeddings would take the
    # embeddings to fp32 with it.
    head.weight = torch.nn.Parameter(head.weight.detach().float(), requires_grad=False)
    if getattr(head, "bias", None) is not None:
        head.bias = torch.nn.Parameter(head.bias.detach().float(), requires_grad=False)
    head.register_forward_pre_hook(lambda _module, args: (args[0].float(), *args[1:]))
