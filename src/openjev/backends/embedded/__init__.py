"""The embedded CPU backend: a model in this process, on torch (`backend`) or on llama.cpp (`llama_backend`),
its prefix cache, and where its weights come from; `embedded_backend` picks the runtime (`precision.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openjev.backends.embedded.backend import EmbeddedBackend
from openjev.backends.embedded.llama_backend import LlamaCppBackend

if TYPE_CHECKING:
    from openjev.backends.base import Backend
    from openjev.config import Settings

__all__ = ["EmbeddedBackend", "LlamaCppBackend", "embedded_backend"]


def embedded_backend(settings: Settings) -> Backend:
    """llama.cpp for the `gguf` precision, torch for the others."""
    from openjev.backends.embedded.precision import resolve_precision

    precision = resolve_precision(settings.embedded_precision, settings.local_model, llama_lib=settings.llama_lib)
    if precision == "gguf":
        return LlamaCppBackend.from_settings(settings)
    return EmbeddedBackend.from_settings(settings)
