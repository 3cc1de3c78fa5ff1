"""A fake SGLang 0.5.19 for tests: `server.FakeSGLang`, with what 0.5.19 admits in `rules`."""

from tests.fake_sglang.model import Logprobs, hashed_logprobs
from tests.fake_sglang.rules import VOCAB_SIZE
from tests.fake_sglang.server import FakeSGLang

__all__ = ["VOCAB_SIZE", "FakeSGLang", "Logprobs", "hashed_logprobs"]
