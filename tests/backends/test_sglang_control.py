"""openjev against a running fake SGLang 0.5.19: broken answers are 502s, control traffic never waits
behind readouts, and each frontend's abort really stops the work (the tests fail without it)."""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

import httpx
import pytest

from tests.conftest import RunningOpenJev, ServeOpenJev, eventually
from tests.fake_sglang import FakeSGLang
from tests.fake_sglang.batch import rids_of

NOUL = {"type": "noul", "instructions": "Is this urgent?"}


def body(count: int) -> dict[str, Any]:
    return {"model": "jev-latest", "state": "The lift is stuck.", "questions": {f"q{i}": NOUL for i in range(count)}}


def first_entry(change: Any) -> Any:
    def mangle(answer: dict[str, Any]) -> dict[str, Any]:
        answer["meta_info"]["output_token_ids_logprobs"][0][0][0] = change
        return answer

    return mangle


def meta(key: str, value: Any) -> Any:
    def mangle(answer: dict[str, Any]) -> dict[str, Any]:
        answer["meta_info"][key] = value
        return answer

    return mangle


BROKEN = {
    "meta_info list": lambda answer: {**answer, "meta_info": []},
    "meta_info string": lambda answer: {**answer, "meta_info": "x"},
    "cached_tokens string": meta("cached_tokens", "abc"),
    "cached_tokens list": meta("cached_tokens", [1]),
    "prompt_tokens negative": meta("prompt_tokens", -3),
    "logprob 50": first_entry(50.0),
    "logprob 1e308": first_entry(1e308),
    "logprob -1e308": first_entry(-1e308),
    "logprob null (NaN)": first_entry(None),
}


def connect(serve_openjev: ServeOpenJev, fake: FakeSGLang, tokenizer: Any, *args: str) -> RunningOpenJev:
    return serve_openjev("--connect", fake.url, "--tokenizer", str(tokenizer), *args)


def test_broken_backend_answers_are_502(serve_openjev: ServeOpenJev, qwen_tokenizer_dir: Any) -> None:
    with FakeSGLang() as fake:
        server = connect(serve_openjev, fake, qwen_tokenizer_dir)
        for name, mangle in BROKEN.items():
            fake.mangle = mangle
            response = httpx.post(f"{server.url}/v1/systemone", json=body(1), timeout=30)
            assert response.status_code == 502, (name, response.status_code, response.text)
            assert response.json()["detail"]["error_type"] == "backend_error", name
        assert fake.violations == []


def test_health_is_not_queued_behind_readouts(serve_openjev: ServeOpenJev, qwen_tokenizer_dir: Any) -> None:
    with FakeSGLang() as fake:
        # Eight requests' warm-ups fill the one readout pool (eight connections) for three seconds.
        server = connect(serve_openjev, fake, qwen_tokenizer_dir, "--max-concurrent-branches", "8")
        fake.generate_delay = 3
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            states = [{**body(1), "state": f"The lift {i} is stuck."} for i in range(8)]
            busy = [pool.submit(httpx.post, f"{server.url}/v1/systemone", json=state, timeout=30) for state in states]
            assert eventually(lambda: fake.in_flight == 8, 10)
            started = time.monotonic()
            health = httpx.get(f"{server.url}/health", timeout=10)
            assert health.status_code == 200, health.text
            assert time.monotonic() - started < 1.5
            assert all(future.result().status_code == 200 for future in busy)
        assert fake.violations == []


@pytest.mark.parametrize("rust", [False, True], ids=["python-abort_request", "rust-connection-close"])
def test_a_cancelled_request_aborts_every_readout(
    serve_openjev: ServeOpenJev, qwen_tokenizer_dir: Any, rust: bool
) -> None:
    # The fake's Python frontend notices a closed connection only after SGLang's 4 s wait timeout, so
    # only /abort_request stops it in time; its Rust frontend has no such route and notices at once.
    # Each variant fails when its abort is removed from the backend.
    with FakeSGLang(rust_frontend=rust) as fake:
        server = connect(serve_openjev, fake, qwen_tokenizer_dir, "--max-concurrent-branches", "8")
        # Asked before, the prefix is cached (the fake says its pool size): the eight
        # branches go out at once, as one batched call, which the abort must stop whole.
        assert httpx.post(f"{server.url}/v1/systemone", json=body(8), timeout=30).status_code == 200
        fake.delay_from_call, fake.generate_delay = len(fake.generate_posts) + 1, 30
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{server.url}/v1/systemone", json=body(8), timeout=1)
        cancelled = time.monotonic()
        assert eventually(lambda: fake.in_flight == 0, 3), f"work still running: {fake.in_flight}"
        assert time.monotonic() - cancelled < 3
        delayed = fake.generate_posts[fake.delay_from_call - 1 :]
        readouts = {rid for call in delayed for rid in rids_of(call["body"])}
        assert [len(rids_of(call["body"])) for call in delayed] == [8]
        assert set(fake.aborted) == readouts
        posted = {call["body"]["rid"] for call in fake.requests if call["path"] == "/abort_request"}
        if rust:
            assert set(fake.disconnected) == readouts
        else:
            assert posted == readouts and fake.disconnected == []
        assert fake.violations == []
