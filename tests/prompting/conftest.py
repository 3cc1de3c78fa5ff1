"""Shared fixtures of the prompting tests."""

from __future__ import annotations

import pytest

from openjev.prompting.tokenizer import ChatTokenizer


@pytest.fixture(scope="module")
def embedded_chat() -> ChatTokenizer:
    """The embedded 0.5B model's own tokenizer and chat template (Qwen2.5's)."""
    pytest.importorskip("torch")
    from openjev.backends.embedded.model_source import resolve_model

    return ChatTokenizer(resolve_model("packaged:qwen2.5-coder-0.5b").path)
