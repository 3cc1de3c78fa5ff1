"""The fake SGLang answers as 0.5.19 does on the points where an earlier fake diverged."""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

import httpx
import pytest

from tests.fake_sglang import VOCAB_SIZE, FakeSGLang

READOUT = {
    "rid": "r1", "input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 1, "temperature": 0},
    "return_logprob": True, "logprob_start_len": -1, "token_ids_logprob": [19, 20],
}  # fmt: skip


def generate(fake: FakeSGLang, **changes: Any) -> httpx.Response:
    return httpx.post(f"{fake.url}/generate", json={**READOUT, **changes}, timeout=30)


@pytest.mark.parametrize("rust", [False, True])
def test_out_of_vocabulary_input_crashes_python_and_is_a_400_on_rust(rust: bool) -> None:
    with FakeSGLang(rust_frontend=rust) as fake:
        response = generate(fake, input_ids=[1, VOCAB_SIZE])
        assert response.status_code == (400 if rust else 500)
        assert fake.violations and fake.violations[0].startswith("400" if rust else "crash")


@pytest.mark.parametrize("rust", [False, True])
def test_the_exact_long_prompt_rule(rust: bool) -> None:
    with FakeSGLang(rust_frontend=rust, context_length=100) as fake:
        assert generate(fake, input_ids=[1] * 93).status_code == 200 and fake.violations == []
        assert generate(fake, rid="r2", input_ids=[1] * 94).status_code == (400 if rust else 500)
        assert len(fake.violations) == 1


def test_unknown_sampling_key_python_plain_500_rust_json_400() -> None:
    bad = {"max_new_tokens": 1, "temperature": 0, "bogus": 1}
    with FakeSGLang() as python, FakeSGLang(rust_frontend=True) as rust:
        plain = generate(python, sampling_params=bad)
        assert plain.status_code == 500 and plain.headers["content-type"].startswith("text/plain")
        assert generate(rust, sampling_params=bad).json()["error"]["message"]
        assert python.violations and rust.violations


@pytest.mark.parametrize("key", ["stop_regex", "spaces_between_special_tokens", "stream_interval", "beam_width"])
def test_valid_sampling_keys_are_not_refused_as_unknown(key: str) -> None:
    with FakeSGLang() as fake:
        generate(fake, sampling_params={"max_new_tokens": 1, "temperature": 0, key: None})
        assert not any("unexpected keyword" in violation for violation in fake.violations)


def test_key_required_on_info_routes_when_set() -> None:
    with FakeSGLang(api_key="k") as fake:
        for path in ("/model_info", "/v1/models", "/server_info"):
            assert httpx.get(f"{fake.url}{path}").status_code == 401
            assert httpx.get(f"{fake.url}{path}", headers={"Authorization": "Bearer k"}).status_code == 200
        assert httpx.post(f"{fake.url}/flush_cache").status_code == 401
        assert httpx.get(f"{fake.url}/health").status_code == 200


def test_abort_matches_the_exact_in_flight_rid_only() -> None:
    with FakeSGLang(generate_delay=2) as fake, concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(generate, fake, rid="abcdef")
        deadline = time.monotonic() + 5
        while fake.in_flight == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        httpx.post(f"{fake.url}/abort_request", json={"rid": "abc"})
        assert fake.aborted == []
        httpx.post(f"{fake.url}/abort_request", json={"rid": "abcdef"})
        assert pending.result().json()["meta_info"]["finish_reason"]["type"] == "abort"
        assert fake.aborted == ["abcdef"]


def test_python_frontend_queues_generate_while_starting() -> None:
    with FakeSGLang(starting_seconds=1) as fake:
        assert httpx.get(f"{fake.url}/health").status_code == 503
        started = time.monotonic()
        assert generate(fake).status_code == 200
        assert time.monotonic() - started > 0.5
        # ...and still judges what it queues: a bad body is a violation while starting too.
    with FakeSGLang(starting_seconds=60) as fake:
        generate(fake, token_ids_logprob=[])
        assert fake.violations


def test_a_large_listen_backlog() -> None:
    # Bursts of connections must reach the fake, not be refused by the kernel (spurious 503s).
    assert FakeSGLang().uvicorn_config().backlog >= 1024
