"""Fixtures of the image tests: openjev on a fake SGLang that sees images, and the SDK pointed at it."""

from __future__ import annotations

import pytest
from typesafe_sdk import RetryPolicy, TypeSafeClient

from tests.conftest import running_stack
from tests.fake_sglang import FakeSGLang


@pytest.fixture(scope="module")
def vision_stack(qwen_tokenizer_dir, tmp_path_factory):
    fake = FakeSGLang(vision=True, tokenizer_path=str(qwen_tokenizer_dir))
    with running_stack(fake, qwen_tokenizer_dir, tmp_path_factory.mktemp("logs")) as stack:
        yield stack


@pytest.fixture
def sdk(vision_stack):
    server, _ = vision_stack
    with TypeSafeClient(
        base_url=server.url, api_key="k", compression="zstd", retry=RetryPolicy(max_retries=0)
    ) as client:
        yield client
