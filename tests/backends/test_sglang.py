"""How openjev uses its SGLang connection: tokenizer discovery and the process-wide call limit."""

import concurrent.futures

import httpx

from tests.fake_sglang import FakeSGLang

NOUL = {"type": "noul", "instructions": "Is this urgent?"}


def body(count):
    return {"model": "jev-latest", "state": "The lift is stuck.", "questions": {f"q{i}": NOUL for i in range(count)}}


def test_tokenizer_comes_from_sglang_model_info_when_local(serve_openjev, qwen_tokenizer_dir):
    with FakeSGLang(tokenizer_path=str(qwen_tokenizer_dir), served_model_name="my-model") as fake:
        server = serve_openjev("--connect", fake.url, "--served-model-name", "my-model")
        response = httpx.post(f"{server.url}/v1/systemone", json={**body(1), "model": "my-model"})
        assert response.status_code == 200, response.text
        assert response.json()["model"] == "my-model"
        assert fake.violations == []


def test_backend_calls_in_flight_never_exceed_the_branch_limit(serve_openjev, fake_sglang, qwen_tokenizer_dir):
    server = serve_openjev(
        "--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), "--max-concurrent-branches", "3"
    )
    fake_sglang.generate_delay = 0.2
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        responses = list(pool.map(lambda n: httpx.post(f"{server.url}/v1/systemone", json=body(n), timeout=60), [6, 5]))
    assert [response.status_code for response in responses] == [200, 200]
    assert fake_sglang.max_in_flight == 3
