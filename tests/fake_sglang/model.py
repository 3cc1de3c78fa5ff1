"""The fake's model: the directory `/model_info` reports (its config.json gives the vocabulary size) and
deterministic pseudo log-probabilities, a function of the prompt and the label id."""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

from tests.fake_sglang.rules import VOCAB_SIZE

Logprobs = Callable[[Sequence[int], Sequence[int]], list[float]]


@cache
def local_model_dir() -> str:
    """A model directory as `/model_info` reports one: its config.json gives the vocabulary size."""
    directory = Path(tempfile.mkdtemp(prefix="fake-sglang-model-"))
    (directory / "config.json").write_text(json.dumps({"vocab_size": VOCAB_SIZE, "model_type": "qwen3"}))
    return str(directory)


def hashed_logprobs(input_ids: Sequence[int], token_ids: Sequence[int]) -> list[float]:
    """Deterministic pseudo log-probabilities in [-11, -1], a function of the prompt and the id."""
    digest = hashlib.blake2b(repr(tuple(input_ids)).encode(), digest_size=8).digest()
    seed = int.from_bytes(digest, "little")
    return [-1.0 - ((seed ^ (token_id * 2654435761)) % 10007) / 1000.0 for token_id in token_ids]
