"""openjev on a real SGLang: its CPU engine serving the 0.5B test model, both frontends, both modes.

Four SGLang starts cover it all (each about a minute or two on a 2-core machine):
1. Python frontend, supervised, on each pinned release (0.5.19, the production pin, and 0.5.23, whose
   own `/v1/systemone` benchmarks/systemone_side_by_side.py measures against openjev): readiness only
   once SGLang is ready, its log forwarded; a real answer equal to the embedded backend's on the same
   weights; `cached_tokens` on a repeat; the
   thinking tier through both calls (generation, then the readout on the cached prefix); a prompt
   exactly at the length limit answered, one token more refused with 422; a client that leaves
   aborts its readout, and SGLang is free at once; the hidden state at the answer position equal to the
   torch runtime's (`hidden_states.py`); a second openjev `--connect`s to the same SGLang;
   then SGLang is killed and openjev exits non-zero, leaving no SGLang process behind.
2. Rust frontend, supervised (0.5.19, as the rest of the file): the same answer, `--connect` too; on
   SIGTERM openjev stops taking requests, then stops SGLang, then exits 0.
3. Python frontend, supervised, `OPENJEV_DATA_PARALLEL_SIZE=2` (`--dp-size 2`, each rank on its own
   cores): the same answer, and every branch finds the warm-up's prefix in its rank's cache.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.backends.test_supervised import exit_code, process_gone
from tests.conftest import RunningOpenJev, ServeOpenJev, eventually, wait_for
from tests.sglang_live.environment import cpu_ranks_binding
from tests.sglang_live.hidden_states import check_hidden_state

pytestmark = [pytest.mark.sglang_live, pytest.mark.timeout(900)]

#: SGLang's context (OPENJEV_MAX_LONG_CONTEXT_TOKENS is its `--context-length`).
MAX_INPUT_TOKENS = 1024
#: SGLang's scheduler admits prompts shorter than min(context - 1, KV pool - 1) - 5 tokens.
BRANCH_LIMIT = MAX_INPUT_TOKENS - 6
START_TIMEOUT = 600
STATE = "Hello, my parcel never arrived and the tracking page has not changed for two weeks. Can you help?"
QUESTIONS = {
    "spam": {"type": "noul", "instructions": "Is this message spam?"},
    "topic": {
        "type": "choice",
        "instructions": "What is the message about?",
        "criteria": {"billing": "Money, invoices, refunds.", "shipping": "Delivery of a parcel.", "other": "Else."},
    },
}


def request(state: str, questions: dict | None = None) -> dict:
    return {"model": "jev-latest", "state": state, "questions": questions or QUESTIONS}


def answers(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()["answers"]


def ask(server: RunningOpenJev, state: str = "", questions: dict | None = None) -> dict:
    return answers(httpx.post(f"{server.url}/v1/systemone", json=request(state or STATE, questions), timeout=300))


#: How far SGLang's answer may be from the embedded backend's on the same weights, by the embedded
#: backend's dtype (its /health says which; SGLang runs float32 here). Both float32: the same sums in
#: other orders (SGLang prefills in 128-token chunks with its torch_native attention and its own
#: RMSNorm and rotary code, the embedded backend in one pass with transformers'), relative errors of
#: ~1e-7 a step, ~1e-5 on a probability; a repeat on SGLang alone, chunked differently, moved one by
#: 1.4e-6. bfloat16 (auto on CPUs with native bf16 matmuls) keeps 8 mantissa bits: ~4e-3 relative a
#: step, up to ~1e-2 on a probability. int8 (OPENJEV_EMBEDDED_PRECISION=int8: int8 weights per
#: channel, inputs per row) moved this request's probabilities and two others' by up to 0.035, 0.048 and 0.042 from the
#: embedded backend's own float32 on the 0.5B model; 0.1 leaves headroom, a broken path moves them by more.
TOLERANCE = {"float32": 1e-3, "bfloat16": 1e-2, "int8": 0.1}


def max_difference(left: dict, right: dict) -> float:
    assert (
        left.keys() == right.keys() and left["topic"]["probabilities"].keys() == right["topic"]["probabilities"].keys()
    )
    differences = [abs(left["spam"]["noul"] - right["spam"]["noul"])]
    differences += [
        abs(p - right["topic"]["probabilities"][option]) for option, p in left["topic"]["probabilities"].items()
    ]
    return max(differences)


def assert_close(left: dict, right: dict, tolerance: float) -> None:
    """The same readout from two backends: every probability within `tolerance`."""
    difference = max_difference(left, right)
    print(f"live: largest probability difference {difference:.2e} (tolerance {tolerance:g})")
    assert difference < tolerance, (left, right)


def assert_like_embedded(answer: dict, embedded: tuple[dict, str]) -> None:
    reference, dtype = embedded
    assert_close(answer, reference, TOLERANCE[dtype])


def group_gone(group: int) -> bool:
    """No process of SGLang's group (the launcher, its scheduler and detokenizer) is left."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return False


def sglang_started(server: RunningOpenJev) -> tuple[int, int]:
    """The supervised SGLang's pid and port, from openjev's own log line."""
    found = re.search(r"SGLang started \(pid (\d+), port (\d+)\)", server.log())
    assert found, server.log()
    return int(found.group(1)), int(found.group(2))


def serve_supervised(
    serve_openjev: ServeOpenJev, sglang_python: Path, model: Path, environment: dict[str, str], frontend: str
) -> RunningOpenJev:
    server = serve_openjev(
        "--sglang-python", str(sglang_python), "--frontend", frontend, "--model", str(model),
        "--tokenizer", str(model), "--served-model-name", "qwen-0.5b",
        "--max-long-context-tokens", str(MAX_INPUT_TOKENS),
        env=environment, ready=False, timeout=60,
    )  # fmt: skip
    # SGLang loads for a minute or more: openjev is alive but not ready until SGLang really answers.
    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 503
    wait_for(f"{server.url}/health", timeout=START_TIMEOUT, process=server.process)
    assert "[sglang] " in server.log() and "The server is fired up and ready to roll!" in server.log()
    return server


@pytest.fixture(scope="module")
def embedded_answer(tmp_path_factory: pytest.TempPathFactory, sglang_model_dir: Path) -> tuple[dict, str]:
    """The embedded backend's answer on the same weights, the reference both frontends must match,
    and the dtype it ran in."""
    from tests.conftest import launch_openjev, stop_openjev

    server = launch_openjev(
        "--local-model", str(sglang_model_dir.joinpath("model.safetensors").resolve().parent),
        log_dir=tmp_path_factory.mktemp("embedded"), timeout=300,
    )  # fmt: skip
    try:
        return ask(server), httpx.get(f"{server.url}/health").json()["backend"]["dtype"]
    finally:
        stop_openjev(server)


def refusal(server: RunningOpenJev, words: int) -> tuple[str, int]:
    """What the 422 for a state of `words` times " a" (and the `spam` question) names, and its count:
    the state's tokens when it alone leaves no room, else the branch's."""
    state = "a" + " a" * (words - 1)
    response = httpx.post(f"{server.url}/v1/systemone", json=request(state, {"spam": QUESTIONS["spam"]}))
    assert response.status_code == 422, response.text
    (issue,) = response.json()["detail"]
    return issue["loc"][-1], issue["ctx"]["tokens"]


def check_exact_length_limit(server: RunningOpenJev) -> None:
    assert httpx.get(f"{server.url}/v1/limits").json()["max_input_tokens"] == BRANCH_LIMIT
    words = BRANCH_LIMIT + 20
    (where, prefix), (_, prefix_one_more) = refusal(server, words), refusal(server, words + 1)
    assert where == "state" and prefix_one_more == prefix + 1  # one " a" is one token
    # A state 10 tokens under the limit fits, but the question's own tokens take the branch over.
    shorter = prefix - (BRANCH_LIMIT - 10)
    where, branch = refusal(server, words - shorter)
    assert where == "spam"
    question = branch - (prefix - shorter)  # suffix + 1 output token
    at_limit = words - (prefix - (BRANCH_LIMIT - question))
    spam = ask(server, "a" + " a" * (at_limit - 1), {"spam": QUESTIONS["spam"]})["spam"]
    # Its branch prompt is BRANCH_LIMIT - 1 tokens: the longest SGLang's scheduler admits.
    assert 0 <= spam["noul"] <= 1
    assert refusal(server, at_limit + 1) == ("spam", BRANCH_LIMIT + 1)


def check_abort_frees_sglang(server: RunningOpenJev) -> None:
    """A client that leaves mid-prefill: openjev aborts the readout, so the next request does not
    wait for the abandoned prefill (chunked, so an abort takes effect between chunks)."""
    long_state = lambda word: " ".join([word] * 900)  # noqa: E731
    started = time.monotonic()
    ask(server, long_state("b"))
    full = time.monotonic() - started
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.url}/v1/systemone", json=request(long_state("c")), timeout=min(2.0, full / 4))
    started = time.monotonic()
    ask(server, "Short: is this spam?")
    after_abort = time.monotonic() - started
    print(f"live abort: a 900-word request took {full:.1f}s; the next, after an abandoned one, {after_abort:.1f}s")
    assert after_abort < full / 2, (after_abort, full)
    assert eventually(lambda: httpx.get(f"{server.url}/health").json()["in_flight"] == 0, 30)


THINK_ALL = {"OPENJEV_THINK_MARGIN": "1000", "OPENJEV_THINK_MAX_SHARE": "1", "OPENJEV_THINK_BUDGET_TOKENS": "8"}
#: The first pass's readouts: the noul and the choice, one view each (OPENJEV_OPTION_SHIFTS=1); each view
#: thinks (8 tokens at most) and is read again.
VIEWS = 2


def check_thinking(server: RunningOpenJev) -> None:
    """Both questions think (8 tokens at most), then are read on the radix prefix that call 1 left."""
    plain = httpx.post(f"{server.url}/v1/systemone", json=request(STATE), timeout=300)
    think = httpx.post(f"{server.url}/v1/systemone", json={**request(STATE), "model": "openjev-think"}, timeout=600)
    assert think.status_code == 200, think.text
    reasoning = int(think.headers["x-openjev-reasoning-tokens"])
    assert think.headers["x-openjev-escalated"] == "2" and 0 < reasoning <= 8 * VIEWS
    # Billed: the two answers and the reasoning; the backend read the first pass's two readouts (no
    # warm-up: the plain request left the prefix in SGLang's cache) and each call 2.
    assert think.json()["usage"]["output_tokens"] == 2 + reasoning
    assert int(think.headers["x-openjev-backend-output-tokens"]) == VIEWS + reasoning + VIEWS
    prefix, cached = int(think.headers["x-openjev-prefix-tokens"]), int(think.headers["x-openjev-cached-tokens"])
    extra = cached - int(plain.headers["x-openjev-cached-tokens"])
    print(f"live thinking: {reasoning} reasoning tokens; the two calls per question reused {extra} cached tokens")
    # Each generation reuses the shared prefix, and each readout after it call 1's prompt and output.
    assert extra >= VIEWS * prefix + VIEWS * prefix + reasoning - VIEWS


def test_python_frontend_supervised_and_connected(
    serve_openjev: ServeOpenJev,
    sglang_release: tuple[str, Path],
    sglang_model_dir: Path,
    cpu_environment,
    embedded_answer,
) -> None:
    version, python = sglang_release
    environment = {**cpu_environment, "OPENJEV_SGLANG_VERSION": version}
    server = serve_supervised(serve_openjev, python, sglang_model_dir, environment, "python")
    pid, port = sglang_started(server)
    assert httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=30).json()["version"] == version
    first = httpx.post(f"{server.url}/v1/systemone", json=request(STATE), timeout=300)
    assert_like_embedded(answers(first), embedded_answer)
    repeat = httpx.post(f"{server.url}/v1/systemone", json=request(STATE), timeout=300)
    # Float32 on the CPU: the repeat reuses prefix KV computed in other chunks than its own, so sums
    # round differently (seen: 1.4e-6); a changed token would move these by far more than 1e-5.
    assert_close(answers(repeat), answers(first), 1e-5)
    # The Python frontend reports reuse: the whole prompt but the last token was in its radix cache.
    assert int(repeat.headers["x-openjev-cached-tokens"]) > 0
    check_hidden_state(server.url, port, sglang_model_dir, version)
    connected = serve_openjev(
        "--connect", f"http://127.0.0.1:{port}", "--tokenizer", str(sglang_model_dir), env=THINK_ALL
    )
    assert_close(ask(connected), first.json()["answers"], 1e-5)
    check_thinking(connected)
    check_exact_length_limit(server)
    check_abort_frees_sglang(server)
    os.kill(pid, signal.SIGKILL)
    assert exit_code(server, 60) == 1
    assert "SGLang exited unexpectedly" in server.log()
    assert eventually(lambda: process_gone(pid) and group_gone(pid), 30)


def test_rust_frontend_supervised_and_connected(
    serve_openjev: ServeOpenJev, sglang_python: Path, sglang_model_dir: Path, cpu_environment, embedded_answer
) -> None:
    server = serve_supervised(serve_openjev, sglang_python, sglang_model_dir, cpu_environment, "rust")
    pid, port = sglang_started(server)
    assert_like_embedded(ask(server), embedded_answer)
    connected = serve_openjev("--connect", f"http://127.0.0.1:{port}", "--tokenizer", str(sglang_model_dir))
    assert_like_embedded(ask(connected), embedded_answer)
    server.process.send_signal(signal.SIGTERM)
    assert exit_code(server, 60) == 0
    log = server.log()
    # Requests stop first (uvicorn's shutdown), then SGLang, and openjev exits once it is gone.
    assert log.index("Shutting down") < log.index("stopping SGLang") < log.index("SGLang stopped")
    assert eventually(lambda: group_gone(pid), 30)


def test_two_data_parallel_ranks_each_conversation_on_one(
    serve_openjev: ServeOpenJev, sglang_python: Path, sglang_model_dir: Path, cpu_environment, embedded_answer
) -> None:
    environment = {**cpu_environment, **cpu_ranks_binding(2), "OPENJEV_DATA_PARALLEL_SIZE": "2"}
    server = serve_supervised(serve_openjev, sglang_python, sglang_model_dir, environment, "python")
    assert "--dp-size 2" in server.log()
    assert httpx.get(f"{server.url}/v1/limits").json()["data_parallel_size"] == 2
    for state in (STATE, STATE + " It was a birthday present, and the party is on Saturday."):
        response = httpx.post(f"{server.url}/v1/systemone", json=request(state), timeout=300)
        if state == STATE:
            assert_like_embedded(answers(response), embedded_answer)
        # Pinned to one rank, each branch reuses the whole warm-up prefix; round robin over two ranks
        # would send one of the two branches to a rank that never saw it.
        prefix = int(response.headers["x-openjev-prefix-tokens"])
        assert int(response.headers["x-openjev-cached-tokens"]) >= len(QUESTIONS) * (prefix - 1), response.headers
    ranks = httpx.get(f"{server.url}/health").json()["data_parallel"]["ranks"]
    assert len(ranks) == 2 and all(rank["in_flight_calls"] == 0 for rank in ranks)
