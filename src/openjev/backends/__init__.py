"""Backends: where label logprobs come from. `build_backend` picks one from the settings.

- `sglang.SGLangBackend`: a running SGLang server (`--connect`);
- `supervised.SupervisedSGLangBackend`: an SGLang server openjev launches and stops (`--sglang-python`);
- `embedded.EmbeddedBackend` / `embedded.LlamaCppBackend`: a model in this process, on the CPU (the default),
  on torch or on llama.cpp.
"""

from __future__ import annotations

from collections.abc import Callable

from openjev.backends.base import Backend
from openjev.config import Settings


def build_backend(settings: Settings, on_fatal: Callable[[BaseException], None]) -> Backend:
    """The backend the settings ask for; `on_fatal` is told when a supervised SGLang dies."""
    if settings.connect and settings.sglang_python:
        raise ValueError("use either --connect or --sglang-python, not both")
    if settings.connect:
        from openjev.backends.sglang import SGLangBackend, client_options

        return SGLangBackend(settings.connect, **client_options(settings))
    if settings.sglang_python:
        from openjev.backends.supervised import SupervisedSGLangBackend

        return SupervisedSGLangBackend(settings, on_fatal=on_fatal)
    from openjev.backends.embedded import embedded_backend

    return embedded_backend(settings)
