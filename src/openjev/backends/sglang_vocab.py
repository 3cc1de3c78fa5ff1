"""SGLang's vocabulary bound: 0.5.19 never checks `input_ids` against it, and one bad id kills its
Python frontend, so openjev learns the model's `vocab_size` (its `config.json`, as SGLang reads it)
and refuses out-of-range ids itself."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from openjev.backends.base import BackendError, GenerationCall, ReadoutCall


def check_vocabulary(call: ReadoutCall | GenerationCall, vocab_size: int) -> None:
    """Refuse ids the model does not have before SGLang sees them (they crash its Python frontend)."""
    named = call.label_token_ids if isinstance(call, ReadoutCall) else call.stop_token_ids
    for name, ids in (("input", call.input_ids), ("label" if isinstance(call, ReadoutCall) else "stop", named)):
        if ids and (min(ids) < 0 or max(ids) >= vocab_size):
            bad = next(i for i in ids if not 0 <= i < vocab_size)
            raise BackendError(
                f"{name} token id {bad} is outside the model's vocabulary of {vocab_size} ids "
                "(the tokenizer does not match SGLang's model); not sent"
            )


def vocab_size_from_config(config: Any) -> int | None:
    """`vocab_size` as SGLang reads it: the text config's (`hf_text_config.vocab_size`)."""
    if not isinstance(config, dict):
        return None
    text = config.get("text_config")
    value = text.get("vocab_size") if isinstance(text, dict) else None
    value = value if value is not None else config.get("vocab_size")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def model_file(model_path: str, name: str, revision: str | None) -> Path | None:
    """One file of the model SGLang serves: from a local directory, else the Hugging Face cache SGLang
    filled (offline), else the hub (one small file); None when none of them has it."""
    local = Path(model_path) / name
    if local.is_file():
        return local
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    # Not a hub name, no network, no such repository or file: the caller reports the fact as unknown.
    with contextlib.suppress(Exception):
        cached = try_to_load_from_cache(model_path, name, revision=revision)
        if isinstance(cached, str):
            return Path(cached)
        return Path(hf_hub_download(model_path, name, revision=revision))
    return None


def model_json(model_path: str, name: str, revision: str | None) -> dict[str, Any] | None:
    """A JSON object file of the model (`model_file`); None when it is missing or not an object."""
    path = model_file(model_path, name, revision)
    if path is None:
        return None
    with contextlib.suppress(OSError, ValueError):
        value = json.loads(path.read_text())
        return value if isinstance(value, dict) else None
    return None


def model_vocab_size(model_path: str, revision: str | None) -> int | None:
    """The model's vocabulary size from its `config.json` (`model_json`)."""
    return vocab_size_from_config(model_json(model_path, "config.json", revision))
