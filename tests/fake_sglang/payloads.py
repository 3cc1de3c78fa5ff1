"""What the tests make openjev send to SGLang, for the end-of-session check with SGLang 0.5.19's own
classes (`tests/sglang_contract`): every distinct `/generate` body with the fake's verdict on it,
appended as JSON lines to `$OPENJEV_SGLANG_PAYLOAD_LOG`, and every launch command to
`$OPENJEV_SGLANG_COMMAND_LOG`. Unset: nothing is recorded. Stand-ins in child processes inherit the
variables and append too (one short write per line)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

from tests.fake_sglang.rules import VOCAB_SIZE
from tests.fake_sglang.vision import IMAGE_PAD

PAYLOAD_LOG = "OPENJEV_SGLANG_PAYLOAD_LOG"
COMMAND_LOG = "OPENJEV_SGLANG_COMMAND_LOG"
_lock = threading.Lock()
_seen: set[bytes] = set()


def _append(variable: str, line: str) -> None:
    path = os.environ.get(variable)
    if not path:
        return
    digest = hashlib.blake2b(line.encode(), digest_size=16).digest()
    with _lock:
        if digest in _seen:
            return
        _seen.add(digest)
        with open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")


def _kept_image_files(body: Any) -> Any:
    """`body` with each `image_data` path (`file` transfer) pointing at a copy beside the log: openjev
    removes its own files when it stops, before the end-of-session check reads them. A batch's
    `image_data` holds one list per request."""
    images = body.get("image_data") if isinstance(body, dict) else None
    if not isinstance(images, list):
        return body
    folder = Path(os.environ[PAYLOAD_LOG]).parent / "images"

    def kept(entry: Any) -> Any:
        if isinstance(entry, list):
            return [kept(one) for one in entry]
        if isinstance(entry, str) and entry.startswith("/") and Path(entry).is_file():
            copy = folder / Path(entry).name
            if not copy.exists():
                folder.mkdir(exist_ok=True)
                shutil.copyfile(entry, copy)
            return str(copy)
        return entry

    return dict(body, image_data=kept(images))


def record_payload(
    body: Any,
    *,
    rust: bool,
    context_length: int,
    max_total_num_tokens: int,
    expect: str,
    dp_size: int = 1,
    hidden_states_mode: str | None = None,
) -> None:
    if not os.environ.get(PAYLOAD_LOG):
        return
    body = _kept_image_files(body)
    # Bodies equal but for the rids teach nothing new: one of them is kept (a bounded file). A batch keeps
    # its list of distinct rids.
    rids = body.get("rid") if isinstance(body, dict) else None
    kept = [f"r{rids.index(rid)}" for rid in rids] if isinstance(rids, list) else "r"  # repeats kept
    shape = dict(body, rid=kept) if rids else body
    record = {
        "body": shape, "frontend": "rust" if rust else "python", "context_length": context_length,
        "max_total_num_tokens": max_total_num_tokens, "vocab_size": VOCAB_SIZE, "expect": expect,
        "dp_size": dp_size,
        **({"return_hidden_states_mode": hidden_states_mode} if hidden_states_mode else {}),
        # The vision model's pad id, for the check of `image_data` against the ids.
        **({"image_pad_id": IMAGE_PAD} if isinstance(body, dict) and "image_data" in body else {}),
    }  # fmt: skip
    _append(PAYLOAD_LOG, json.dumps(record, separators=(",", ":"), sort_keys=True))


def record_command(argv: list[str]) -> None:
    """`argv` after `-m sglang.launch_server`."""
    _append(COMMAND_LOG, json.dumps(argv))
