"""Fixtures of the API tests: openjev on a fake SGLang (`stack`, text only; `vision_stack`, seeing images),
with the `openai` client (`client`), plain HTTP (`http`) and the TypeSafe SDK (`sdk`) pointed at it."""

from __future__ import annotations

import httpx
import openai
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


@pytest.fixture(scope="module")
def stack(qwen_tokenizer_dir, tmp_path_factory):
    with running_stack(FakeSGLang(), qwen_tokenizer_dir, tmp_path_factory.mktemp("logs")) as stack:
        yield stack


@pytest.fixture(scope="module")
def client(stack):
    server, _ = stack
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def http(stack):
    server, _ = stack
    with httpx.Client(base_url=server.url, timeout=30) as http:
        yield http
