"""Images on SGLang 0.5.19: whether the served model sees, its `VisionSpec`, and `image_data`.

Read from the 0.5.19 wheel (paths under `sglang/srt/`):
- `/model_info` says `has_image_understanding` (`entrypoints/http_server.py:775`); a server started
  with `--language-model-only` (listed in `/server_info`) refuses every request with images
  (`managers/tokenizer_manager.py:1003`), so it counts as text only. The spec then comes from the
  model's own files, as SGLang's processor reads them: `config.json` (`image_token_id`,
  `vision_start_token_id`, `vision_end_token_id`; `vision_config.patch_size` and
  `spatial_merge_size`), `preprocessor_config.json` (`patch_size`, `merge_size`, and the pixel bounds:
  `min_pixels`/`max_pixels`, or `size.shortest_edge`/`size.longest_edge` as Qwen3-VL writes them) and
  the tokenizer's added tokens for the three token strings. A model whose files do not say all of it
  is served as text only (images get the 422 that says so), never with a guessed token count. Its
  `model_type` gives the grounding scale of box coordinates (`vision.grounding_of`).
- `input_ids` with `image_data`: the processor decodes the ids to text, counts the vision spans
  `<|vision_start|>(<|image_pad|>)+<|vision_end|>` against the images (`multimodal/processors/
  base_processor.py` `load_mm_data`) and, with `SGLANG_MM_AVOID_RETOKENIZE` (on by default), keeps the
  caller's ids, expanding each pad to its image's count. `image_data` is one PNG per pad, in order,
  as base64 or as a path to a file (`sglang_images.py`). A JPEG may be decoded on the GPU into a
  tensor (`utils/common.py`, nvJPEG), which that path does not take (it falls back to decode and
  re-tokenize); openjev sends PNG only.
- What a repeated image costs each branch: the TokenizerManager runs the processor again (decode the
  PNG, resize, normalise, cut patches: CPU work per call; its preprocess cache is off for Qwen-VL,
  `auto_mm_preprocess_cache_size_mb = 0`), but the vision encoder does not run again: the scheduler
  embeds only images overlapping the tokens it must compute (`managers/mm_schedule.py`), and a branch's
  image in the cached shared prefix overlaps none; a miss is served from the embedding cache keyed by
  the image's hash (`SGLANG_VLM_CACHE_SIZE_MB`, 100 MB). The radix cache keys pad positions by that
  hash too, so the same image is a prefix hit and another image is not.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from openjev.backends.sglang_vocab import model_json
from openjev.prompting.vision import VisionSpec, grounding_of

log = logging.getLogger("openjev.sglang")


def _positive(*values: Any) -> int | None:
    return next((v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0), None)


def _token_strings(tokenizer: dict[str, Any] | None, ids: Sequence[int]) -> list[str] | None:
    """The added tokens' strings for `ids`, from a `tokenizer.json`."""
    added = {entry.get("id"): entry.get("content") for entry in (tokenizer or {}).get("added_tokens", [])}
    strings = [added.get(token_id) for token_id in ids]
    return strings if all(isinstance(text, str) for text in strings) else None  # type: ignore[return-value]


def vision_spec(
    config: dict[str, Any] | None, preprocessor: dict[str, Any] | None, tokenizer: dict[str, Any] | None
) -> VisionSpec | None:
    """The spec the model's files give (see the module docstring); None where they do not give all of it."""
    config, preprocessor = config or {}, preprocessor or {}
    vision = config.get("vision_config") if isinstance(config.get("vision_config"), dict) else {}
    size = preprocessor.get("size") if isinstance(preprocessor.get("size"), dict) else {}
    patch = _positive(preprocessor.get("patch_size"), vision.get("patch_size"))
    merge = _positive(preprocessor.get("merge_size"), vision.get("spatial_merge_size"))
    low = _positive(preprocessor.get("min_pixels"), size.get("shortest_edge"))
    high = _positive(preprocessor.get("max_pixels"), size.get("longest_edge"))
    ids = [_positive(config.get(name)) for name in ("vision_start_token_id", "image_token_id", "vision_end_token_id")]
    strings = _token_strings(tokenizer, ids) if all(ids) else None  # type: ignore[arg-type]
    if not (vision and patch and merge and low and high and strings):
        return None
    start, pad, end = strings
    return VisionSpec(start, pad, end, patch, merge, low, high, grounding_of(config.get("model_type")))


def read_vision(
    model_info: dict[str, Any], server_info: dict[str, Any], revision: str | None, tokenizer: Path | None = None
) -> VisionSpec | None:
    """The served model's spec, from `/model_info`, `/server_info` and the model's files (blocking reads):
    each file from this machine's directories first (the model's or SGLang's tokenizer's, then
    `tokenizer`, openjev's own tokenizer directory), before any hub look-up (`sglang_vocab.model_file`)."""
    if model_info.get("has_image_understanding") is not True or server_info.get("language_model_only"):
        return None
    model = model_info.get("model_path")
    if not isinstance(model, str) or not model:
        return None
    tokenizer_path = model_info.get("tokenizer_path")
    tokenizer_source = tokenizer_path if isinstance(tokenizer_path, str) and tokenizer_path else model
    mine = [tokenizer] if tokenizer is not None else []
    spec = vision_spec(
        model_json(model, "config.json", revision, [*mine, tokenizer_source]),
        model_json(model, "preprocessor_config.json", revision, [*mine, tokenizer_source]),
        model_json(tokenizer_source, "tokenizer.json", revision, [*mine, model]),
    )
    if spec is None:
        log.warning(
            "SGLang's model %s sees images, but its files do not give its vision tokens and "
            "processor bounds: serving it as text only",
            model,
        )
    return spec
