"""Where the tokenizer and chat template come from, in order of preference.

1. An explicit local directory (OPENJEV_TOKENIZER / --tokenizer).
2. The backend's own local tokenizer directory (SGLang's `/model_info` `tokenizer_path`, or the
   embedded model's directory) when it exists on this machine.
3. Only the tokenizer files of OPENJEV_MODEL at OPENJEV_REVISION, downloaded from the Hugging Face
   hub (weights are never fetched here).
"""

from __future__ import annotations

import logging
from pathlib import Path

from openjev.prompting.tokenizer import TOKENIZER_FILES

log = logging.getLogger("openjev.prompting.tokenizer")

OPTIONAL_FILES = ("chat_template.jinja",)


def download_tokenizer(repo_id: str, revision: str | None) -> Path:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    log.info("downloading the tokenizer of %s@%s from the Hugging Face hub", repo_id, revision or "main")
    paths = [Path(hf_hub_download(repo_id, name, revision=revision)) for name in TOKENIZER_FILES]
    for name in OPTIONAL_FILES:
        try:
            hf_hub_download(repo_id, name, revision=revision)
        except EntryNotFoundError:
            continue
    return paths[0].parent


def resolve_tokenizer_dir(explicit: Path | None, backend_dir: Path | None, model: str, revision: str | None) -> Path:
    if explicit is not None:
        return explicit
    if backend_dir is not None and all((backend_dir / name).is_file() for name in TOKENIZER_FILES):
        return backend_dir
    return download_tokenizer(model, revision)
