"""Failure behaviour over real HTTP: overload, timeouts, dead or failing backends, disconnects, auth."""

import concurrent.futures
import socket
import time

import httpx
import pytest
import typesafe_sdk
from typesafe_sdk import Noul, RetryPolicy, TypeSafeClient

from tests.conftest import eventually
from tests.fake_sglang import FakeSGLang

NOUL = {"type": "noul", "instructions": "Is this urgent?"}
CHOICE = {"type": "choice", "criteria": {"a": None, "b": None, "c": None}}


def body(questions, state="The server room is flooding."):
    return {"model": "jev-latest", "state": state, "questions": questions}


def error_of(response, status, error_type):
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert detail["error_type"] == error_type and detail["message"]
    return detail


@pytest.fixture
def connect(serve_openjev, qwen_tokenizer_dir):
    def start(fake, *extra, env=None, ready=True):
        return serve_openjev(
            "--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir), *extra, env=env, ready=ready
        )

    return start


def test_overload_gets_529_with_retry_after_and_nothing_queues(connect, fake_sglang):
    server = connect(fake_sglang, "--max-concurrent-requests", "2")
    fake_sglang.generate_delay = 1.0
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(httpx.post, f"{server.url}/v1/systemone", json=body({"q": NOUL}), timeout=30)]
        futures.append(pool.submit(httpx.post, f"{server.url}/v1/systemone", json=body({"q": NOUL}), timeout=30))
        assert eventually(lambda: fake_sglang.in_flight == 2)
        refused = httpx.post(f"{server.url}/v1/systemone", json=body({"q": NOUL}), timeout=30)
        statuses = sorted(future.result().status_code for future in futures)
    assert statuses == [200, 200]
    error_of(refused, 529, "overloaded")
    assert refused.headers["retry-after"] == "1" and refused.headers["retry-after-ms"] == "1000"
    # The SDK honours Retry-After and retries a 529 on its own.
    fake_sglang.generate_delay = 0
    with TypeSafeClient(base_url=server.url, api_key="k", retry=RetryPolicy(max_retries=0)) as sdk:
        assert 0 <= sdk.system_one(state="x", questions={"q": Noul(instructions="?")}).nouls["q"].noul <= 1


def test_backend_timeout_is_504_and_the_call_is_aborted(connect, fake_sglang):
    server = connect(fake_sglang, "--request-timeout", "1")
    fake_sglang.generate_delay = 10
    started = time.monotonic()
    response = httpx.post(f"{server.url}/v1/systemone", json=body({"q": NOUL}), timeout=30)
    assert time.monotonic() - started < 5
    error_of(response, 504, "backend_timeout")
    assert eventually(lambda: fake_sglang.in_flight == 0)
    assert fake_sglang.aborted, "the timed-out call must be aborted in SGLang"


def test_a_failing_batch_is_aborted_whole_and_cancels_the_next(connect, fake_sglang):
    # Two slots: the four branches go out as two batched calls of two, the second once the first's
    # slots are free.
    server = connect(fake_sglang, "--max-concurrent-branches", "2")
    before = len(fake_sglang.generate_posts)
    fake_sglang.fail_on_call = fake_sglang._calls + 2  # the first batch after the warm-up
    fake_sglang.fail_status = 500
    response = httpx.post(f"{server.url}/v1/systemone", json=body({f"q{i}": NOUL for i in range(4)}), timeout=30)
    error_of(response, 502, "backend_error")
    assert eventually(lambda: fake_sglang.in_flight == 0)
    # The warm-up, then the failed batch; the other never went out.
    warm_up, failed = (post["body"]["rid"] for post in fake_sglang.generate_posts[before:])
    assert isinstance(warm_up, str) and len(failed) == 2
    # SGLang may still run the rest of a batch one of whose readouts failed: every rid is aborted (and
    # the other batch's, if its cancellation caught it on its way out).
    posted = [call["body"]["rid"] for call in fake_sglang.requests if call["path"] == "/abort_request"]
    assert set(failed) <= set(posted) and len(posted) in (2, 4)


def test_client_disconnect_aborts_everything_in_flight(connect, fake_sglang):
    server = connect(fake_sglang)
    fake_sglang.generate_delay = 10
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.url}/v1/systemone", json=body({"q": NOUL}), timeout=0.5)
    assert eventually(lambda: fake_sglang.in_flight == 0, timeout=5)
    assert len(fake_sglang.aborted) == 1
    assert httpx.get(f"{server.url}/health").json()["in_flight"] == 0


def test_backend_errors_and_outages(connect, fake_sglang):
    server = connect(fake_sglang)
    fake_sglang.fail_on_call = fake_sglang._calls + 1
    fake_sglang.fail_status = 400
    error_of(httpx.post(f"{server.url}/v1/systemone", json=body({"q": NOUL})), 502, "backend_error")
    fake_sglang.fail_on_call = fake_sglang._calls + 1
    fake_sglang.fail_status = 503
    refused = httpx.post(f"{server.url}/v1/systemone", json=body({"q": NOUL}))
    error_of(refused, 503, "backend_unavailable")
    assert refused.headers["retry-after"]
    fake_sglang.stop()
    gone = httpx.post(f"{server.url}/v1/systemone", json=body({"q": NOUL}))
    error_of(gone, 503, "backend_unavailable")
    assert gone.headers["retry-after"]
    health = httpx.get(f"{server.url}/health")
    assert health.status_code == 503 and health.json()["ready"] is False


def test_not_ready_backend_gets_503_until_it_is(connect, serve_openjev, qwen_tokenizer_dir):
    # Starting until the test says otherwise, however long openjev itself takes to come up.
    with FakeSGLang(starting_seconds=3600) as fake:
        server = connect(fake, ready=False)
        health = httpx.get(f"{server.url}/health")
        assert health.status_code == 503 and health.headers["retry-after"]
        assert health.json()["status"] == "starting"
        waiting = httpx.post(f"{server.url}/v1/systemone", json=body({"q": NOUL}))
        error_of(waiting, 503, "backend_unavailable")
        assert waiting.headers["retry-after"]
        assert httpx.get(f"{server.url}/health/live").status_code == 200
        fake.finish_starting()
        assert eventually(lambda: httpx.get(f"{server.url}/health").status_code == 200, timeout=15)
        assert httpx.post(f"{server.url}/v1/systemone", json=body({"q": NOUL})).status_code == 200
        # No readout reached the fake while it was starting, except readiness probes it refused.
        assert fake.violations == []


def test_rust_frontend_reports_no_cached_tokens_and_aborts_by_disconnect(connect):
    with FakeSGLang(rust_frontend=True) as fake:
        server = connect(fake)
        response = httpx.post(f"{server.url}/v1/systemone", json=body({"q": NOUL, "c": CHOICE}))
        assert response.status_code == 200
        assert "x-openjev-cached-tokens" not in response.headers
        assert int(response.headers["x-openjev-prefix-tokens"]) > 0
        fake.generate_delay = 10
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{server.url}/v1/systemone", json=body({"q": NOUL}), timeout=0.5)
        # No /abort_request route: closing the connection is the abort.
        assert eventually(lambda: fake.in_flight == 0, timeout=15)
        assert fake.violations == []


def test_token_budgets_are_422_naming_limit_and_count(connect, fake_sglang):
    server = connect(fake_sglang, "--max-input-tokens", "120", "--max-total-input-tokens", "400")
    long_question = {"type": "noul", "instructions": "word " * 200}
    response = httpx.post(f"{server.url}/v1/systemone", json=body({"long": long_question, "short": NOUL}))
    assert response.status_code == 422
    (issue,) = response.json()["detail"]
    assert issue["loc"] == ["body", "questions", "long"]
    assert "OPENJEV_MAX_INPUT_TOKENS" in issue["msg"] and issue["ctx"]["limit"] == 120
    many = httpx.post(f"{server.url}/v1/systemone", json=body({f"q{i}": NOUL for i in range(20)}))
    assert many.status_code == 422
    (total,) = many.json()["detail"]
    assert total["loc"] == ["body", "questions"] and "OPENJEV_MAX_TOTAL_INPUT_TOKENS=400" in total["msg"]
    assert total["ctx"]["tokens"] > 400
    assert httpx.get(f"{server.url}/v1/limits").json()["max_input_tokens"] == 120
    assert all(len(call["body"]["input_ids"]) <= 120 for call in fake_sglang.generate_calls)


def test_a_state_far_over_the_budget_is_refused_before_it_is_fully_tokenized(connect, fake_sglang):
    server = connect(fake_sglang, "--max-input-tokens", "120")
    words = " ".join(f"w{i}" for i in range(100_000))  # about 200,000 tokens
    calls_before = len(fake_sglang.generate_calls)
    response = httpx.post(f"{server.url}/v1/systemone", json=body({"q": NOUL}, state=words), timeout=60)
    assert response.status_code == 422
    (issue,) = response.json()["detail"]
    assert issue["loc"] == ["body", "state"] and issue["type"] == "context_length_exceeded"
    assert "at least" in issue["msg"] and "OPENJEV_MAX_INPUT_TOKENS" in issue["msg"]
    # Counted only as far as the first encoding round: past the limit, far short of the whole state.
    assert 120 < issue["ctx"]["tokens"] < 50_000 and issue["ctx"]["limit"] == 120
    assert len(fake_sglang.generate_calls) == calls_before


def test_a_question_or_request_far_over_budget_is_refused_before_it_is_fully_tokenized(connect, fake_sglang):
    server = connect(fake_sglang, "--max-input-tokens", "120", "--max-total-input-tokens", "400")
    words = " ".join(f"w{i}" for i in range(100_000))  # about 200,000 tokens
    calls_before = len(fake_sglang.generate_calls)
    long_question = body({"long": {"type": "noul", "instructions": words}})
    (issue,) = httpx.post(f"{server.url}/v1/systemone", json=long_question, timeout=60).json()["detail"]
    assert issue["loc"] == ["body", "questions", "long"] and "at least" in issue["msg"]
    assert 120 < issue["ctx"]["tokens"] < 50_000 and issue["ctx"]["limit"] == 120
    # A state that fits one branch, with more question prompts than the request total holds.
    state = " ".join(f"w{i}" for i in range(30))
    many = body({f"q{i}": NOUL for i in range(60)}, state=state)
    (total,) = httpx.post(f"{server.url}/v1/systemone", json=many, timeout=60).json()["detail"]
    assert total["loc"] == ["body", "questions"] and "OPENJEV_MAX_TOTAL_INPUT_TOKENS=400" in total["msg"]
    assert total["ctx"]["tokens"] > 400
    assert len(fake_sglang.generate_calls) == calls_before


def test_backend_context_length_caps_the_branch_budget(connect):
    with FakeSGLang(context_length=100) as fake:
        server = connect(fake)
        # SGLang 0.5.19 refuses prompts of context length - 6 tokens or more (its max_req_input_len).
        assert httpx.get(f"{server.url}/v1/limits").json()["max_input_tokens"] == 94
        response = httpx.post(f"{server.url}/v1/systemone", json=body({"q": NOUL}, state="many words " * 60))
        assert response.status_code == 422
        (issue,) = response.json()["detail"]
        assert issue["loc"] == ["body", "state"] and "context length" in issue["msg"]
        assert issue["ctx"]["tokens"] > 92 and "at least" not in issue["msg"]  # counted in full: exact
        assert fake.violations == []


def test_auth_on(connect, fake_sglang):
    server = connect(fake_sglang, env={"OPENJEV_API_KEY": "s3cret"})
    request = body({"q": NOUL})
    missing = httpx.post(f"{server.url}/v1/systemone", json=request)
    assert error_of(missing, 401, "authentication_error")["message"] == "missing API key"
    wrong = httpx.post(f"{server.url}/v1/systemone", json=request, headers={"Authorization": "Bearer nope"})
    error_of(wrong, 401, "authentication_error")
    right = httpx.post(f"{server.url}/v1/systemone", json=request, headers={"Authorization": "Bearer s3cret"})
    assert right.status_code == 200
    assert httpx.get(f"{server.url}/v1/models").status_code == 401
    assert httpx.get(f"{server.url}/health").status_code == 200  # probes need no key
    no_retry = RetryPolicy(max_retries=0)
    with (
        TypeSafeClient(base_url=server.url, api_key="wrong", retry=no_retry) as sdk,
        pytest.raises(typesafe_sdk.TypeSafeAuthenticationError),
    ):
        sdk.system_one(state="x", questions={"q": Noul(instructions="?")})


def test_auth_off_ignores_authorization_header(connect, fake_sglang):
    server = connect(fake_sglang)
    response = httpx.post(f"{server.url}/v1/systemone", json=body({"q": NOUL}), headers={"Authorization": "Bearer x"})
    assert response.status_code == 200


def test_backend_api_key_is_sent_as_bearer(connect):
    with FakeSGLang(api_key="backend-key") as fake:
        server = connect(fake, env={"OPENJEV_BACKEND_API_KEY": "backend-key"})
        assert httpx.post(f"{server.url}/v1/systemone", json=body({"q": NOUL})).status_code == 200


def test_unreachable_backend_keeps_answering_503(connect):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dead = FakeSGLang(port=port)  # never started: connection refused
    server = connect(dead, ready=False)
    assert httpx.get(f"{server.url}/health").status_code == 503
    error_of(httpx.post(f"{server.url}/v1/systemone", json=body({"q": NOUL})), 503, "backend_unavailable")


#: Scores divided by their content-free readout (off by default): the readouts these budget tests are about.
CALIBRATED_SCORES = ("--contextual-calibration", "score")


def test_content_free_readouts_never_count_against_the_callers_budget(connect, fake_sglang):
    score = {"type": "score", "instructions": "How urgent?", "criteria": ["Routine", "Urgent", "Emergency"]}
    measure = connect(fake_sglang, *CALIBRATED_SCORES)
    before = len(fake_sglang.generate_calls)
    assert httpx.post(f"{measure.url}/v1/systemone", json=body({"s": score}), timeout=30).status_code == 200
    calls = fake_sglang.generate_calls[before:]
    assert len(calls) == 3  # the warm-up, the branch, its content-free readout
    # The caller's text: the branch's prompt, the input once and the question as sent.
    sent = len(calls[1]["body"]["input_ids"])
    fits = connect(fake_sglang, *CALIBRATED_SCORES, "--max-total-input-tokens", str(sent))
    before = len(fake_sglang.generate_calls)
    assert httpx.post(f"{fits.url}/v1/systemone", json=body({"s": score}), timeout=30).status_code == 200
    assert len(fake_sglang.generate_calls) - before == 3  # the content-free readout made, not charged
    server = connect(fake_sglang, *CALIBRATED_SCORES, "--max-total-input-tokens", str(sent - 1))
    response = httpx.post(f"{server.url}/v1/systemone", json=body({"s": score}), timeout=30)
    assert response.status_code == 422, response.text
    (issue,) = response.json()["detail"]
    assert issue["loc"] == ["body", "questions"] and issue["ctx"] == {"limit": sent - 1, "tokens": sent}
    assert "1 question of" in issue["msg"] and "readout" not in issue["msg"]


def test_a_content_free_readout_longer_than_its_branch_is_openjevs_capacity_not_the_callers(connect, fake_sglang):
    score = {"type": "score", "instructions": "How urgent?", "criteria": ["Routine", "Urgent", "Emergency"]}
    measure = connect(fake_sglang, *CALIBRATED_SCORES)
    before = len(fake_sglang.generate_calls)
    assert httpx.post(f"{measure.url}/v1/systemone", json=body({"s": score}, "x"), timeout=30).status_code == 200
    _, branch, readout = (len(call["body"]["input_ids"]) for call in fake_sglang.generate_calls[before:])
    assert readout > branch  # the content-free state "N/A" takes more tokens than the state "x"
    # The branch alone fits the per-question limit; its content-free readout, openjev's own, is served.
    server = connect(fake_sglang, *CALIBRATED_SCORES, "--max-input-tokens", str(branch + 1))
    before = len(fake_sglang.generate_calls)
    assert httpx.post(f"{server.url}/v1/systemone", json=body({"s": score}, "x"), timeout=30).status_code == 200
    sent = [len(call["body"]["input_ids"]) for call in fake_sglang.generate_calls[before:]]
    assert sorted(sent)[1:] == [branch, readout]  # the warm-up, the branch, the content-free readout
    # A model whose context holds the branch and not the readout (SGLang's limit is 6 below it): a 529.
    with FakeSGLang(context_length=branch + 1 + 6) as fake:
        server = connect(fake, *CALIBRATED_SCORES)
        before = len(fake.generate_calls)
        response = httpx.post(f"{server.url}/v1/systemone", json=body({"s": score}, "x"), timeout=30)
        assert response.status_code == 529, response.text
        assert response.headers["retry-after"] and "content-free" in response.text
        assert len(fake.generate_calls) == before
