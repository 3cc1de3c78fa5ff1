"""Every `/generate` body the fake receives, appended as one JSON line to `$OPENJEV_SGLANG_PAYLOAD_LOG`
(when set) so that SGLang 0.5.19's own request classes can check them at the end of the session
(`tests/sglang_contract`). Stand-ins in child processes inherit the variable and append too."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from typing import Any

ENV = "OPENJEV_SGLANG_PAYLOAD_LOG"
_lock = threading.Lock()
_seen: set[bytes] = set()


def record(body: Any) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    line = json.dumps(body, separators=(",", ":"), sort_keys=True)
    # Equal bodies but for the rid teach nothing new: one of them is enough (bounded file size).
    shape = dict(body, rid="") if isinstance(body, dict) else body
    digest = hashlib.blake2b(json.dumps(shape, sort_keys=True).encode(), digest_size=16).digest()
    with _lock:
        if digest in _seen:
            return
        _seen.add(digest)
        with open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")
