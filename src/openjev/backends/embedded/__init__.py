"""The embedded CPU backend: the model (`backend`), its prefix cache, and where its weights come from."""

from openjev.backends.embedded.backend import EmbeddedBackend

__all__ = ["EmbeddedBackend"]
