"""SGLang's vocabulary bound: 0.5.19 never checks `input_ids` against it, and one bad id kills its
Python frontend, so openjev learns the model's `vocab_size` (its `config.json`, as SGLang reads it)
and refuses out-of-range ids itself."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
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


#: Seconds the one hub look-up of a model file may take: it is never retried (huggingface_hub retries a
#: failed look-up for about 25 s, which an offline start-up would spend on every file).
HUB_TIMEOUT = 5.0


def model_file(model_path: str, name: str, revision: str | None, local: Sequence[str | Path] = ()) -> Path | None:
    """One file of the model SGLang serves: from the first of the directories `model_path` and `local`
    on this machine that holds it, else the Hugging Face cache SGLang filled, else the hub (one small
    file, one try, none offline: HF_HUB_OFFLINE); None when none of them has it."""
    for directory in (model_path, *local):
        found = Path(directory) / name
        if found.is_file():
            return found
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_download, hf_hub_url, try_to_load_from_cache

    # Not a hub name, no network, no such repository or file: the caller reports the fact as unknown.
    with contextlib.suppress(Exception):
        cached = try_to_load_from_cache(model_path, name, revision=revision)
        if isinstance(cached, str):
            return Path(cached)
        if constants.HF_HUB_OFFLINE:
            return None
        get_hf_file_metadata(hf_hub_url(model_path, name, revision=revision), timeout=HUB_TIMEOUT)
        return Path(hf_hub_download(model_path, name, revision=revision))
    return None


def model_json(
    model_path: str, name: str, revision: str | None, local: Sequence[str | Path] = ()
) -> dict[str, Any] | None:
    """A JSON object file of the model (`model_file`); None when it is missing or not an object."""
    path = model_file(model_path, name, revision, local)
    if path is None:
        return None
    with contextlib.suppress(OSError, ValueError):
        value = json.loads(path.read_text())
        return value if isinstance(value, dict) else None
    return None


def model_vocab_size(model_path: str, revision: str | None) -> int | None:
    """The model's vocabulary size from its `config.json` (`model_json`)."""
    return vocab_size_from_config(model_json(model_path, "config.json", revision))
