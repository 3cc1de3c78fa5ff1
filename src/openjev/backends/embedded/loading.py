"""Loading the embedded backend's checkpoint: a causal LM, or an image-text-to-text model (`vision.py`).

`load_model(torch, path, precision)` returns the model in eval mode, and the vision model around it when
the checkpoint has a `vision_config` (None for a text-only one), put in its precision (`precision.py`).
`cache_kwarg(forward)` names the argument a forward takes the KV cache by, and `context_length(path)`
reads the longest sequence from config.json (a vision config keeps it in its `text_config`).
`release_freed_memory()` hands a dropped model's memory back to the operating system; `load_on_thread` runs a
backend's load for a start() that may be cancelled.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import inspect
import json
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from openjev.backends.base import BackendError
from openjev.backends.embedded.conversion import is_vision_checkpoint
from openjev.backends.embedded.precision import apply_precision, load_dtype
from openjev.backends.embedded.vision import VisionModel, load_vision


def load_model(torch: Any, path: Path, precision: str) -> tuple[Any, VisionModel | None]:
    from transformers import AutoModelForCausalLM

    dtype = load_dtype(precision)
    vision = load_vision(torch, path, dtype, cache_kwarg) if is_vision_checkpoint(path) else None
    lm = vision.lm if vision else AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype, dtype))
    lm.eval()
    apply_precision(torch, lm, precision)
    return lm, vision


def context_length(path: Path) -> int | None:
    config = json.loads((path / "config.json").read_text())
    return config.get("max_position_embeddings") or config.get("text_config", {}).get("max_position_embeddings")


def cache_kwarg(forward: Callable[..., Any]) -> str:
    """transformers 5.24 calls the forward argument `cache`; earlier 5.x releases `past_key_values`
    (deprecated since). Pass whichever this version's forward takes."""
    return "cache" if "cache" in inspect.signature(forward).parameters else "past_key_values"


def release_freed_memory() -> None:
    """Collect, then return freed heap to the OS (glibc's `malloc_trim`). The model was loaded and run on
    the backend's own worker thread, whose malloc arena keeps a dropped model's pages: a process that
    closes and opens backends (the tests; 2-3 GB each in float32) grew past 20 GB without this."""
    gc.collect()
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


async def load_on_thread(load: Callable[[], None], name: str) -> None:
    """Run `load` on a daemon thread of its own, not a worker: a first start may convert or assemble the
    model for a minute, and stopping meanwhile must not wait for that. Failures become BackendError."""
    loaded: Future[None] = Future()
    threading.Thread(target=_fulfil, args=(loaded, load), name=name, daemon=True).start()
    try:
        await asyncio.wrap_future(loaded)
    except (BackendError, asyncio.CancelledError):
        raise
    except Exception as exc:
        raise BackendError(f"the embedded model could not be loaded: {exc}") from exc


def _fulfil(future: Future[None], work: Callable[[], None]) -> None:
    """Run `work` and settle `future`, unless the waiting start() was cancelled meanwhile."""
    try:
        work()
    except BaseException as exc:
        if not future.cancelled():
            future.set_exception(exc)
    else:
        if not future.cancelled():
            future.set_result(None)
