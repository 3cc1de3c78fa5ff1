"""The thinking tier over real HTTP against the fake SGLang, with the real Qwen3 tokenizer and template:
both calls' payloads, the headers and usage, the share cap, and failure, timeout and disconnect."""

import time

import httpx
import pytest

from tests.conftest import eventually

NOUL = {"type": "noul", "instructions": "Is this urgent?"}
CHOICE = {"type": "choice", "criteria": {"a": None, "b": None, "c": None}}
# Every request awaits its warm-up, even over a prefix cached by the request before: the call counts
# below count it. A choice is read in one rotation, so each question is one readout (and one thought).
THINK_ALL = {"OPENJEV_THINK_MARGIN": "1000", "OPENJEV_THINK_MAX_SHARE": "1", "OPENJEV_THINK_BUDGET_TOKENS": "16",
             "OPENJEV_WARM_PREFIX_SHARE": "0", "OPENJEV_OPTION_SHIFTS": "1"}  # fmt: skip


def body(questions, model="openjev-think"):
    return {"model": model, "state": "The server room is flooding.", "questions": questions}


@pytest.fixture
def think_server(serve_openjev, qwen_tokenizer_dir, fake_sglang):
    def start(env=THINK_ALL, *extra):
        return serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), *extra, env=env)

    return start


def generations(fake):
    return [call["body"] for call in fake.generate_calls if call["body"]["sampling_params"]["max_new_tokens"] > 1]


def test_both_calls_on_the_cached_prefix_with_headers_and_usage(think_server, fake_sglang, qwen_tokenizer_dir):
    from tokenizers import Tokenizer

    close = Tokenizer.from_file(str(qwen_tokenizer_dir / "tokenizer.json")).token_to_id("</think>")
    server = think_server()
    fake_sglang.generation_length = 5  # every thought ends with the close after 5 ids
    one = httpx.post(f"{server.url}/v1/systemone", json=body({"u": NOUL, "t": CHOICE}, "jev-latest"), timeout=30)
    assert "x-openjev-escalated" not in one.headers and one.json()["usage"]["output_tokens"] == 2
    assert one.headers["x-openjev-backend-output-tokens"] == "3"  # the warm-up and the two readouts
    assert generations(fake_sglang) == []
    before = len(fake_sglang.generate_calls)
    response = httpx.post(f"{server.url}/v1/systemone", json=body({"u": NOUL, "t": CHOICE}), timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["model"] == "openjev-think"
    assert response.headers["x-openjev-escalated"] == "2" and response.headers["x-openjev-reasoning-tokens"] == "10"
    # Billed: one answer per question and the 10 generated ids; the backend also read the first pass's
    # 3 tokens and one per escalated question.
    assert response.json()["usage"]["output_tokens"] == 12
    assert response.headers["x-openjev-backend-output-tokens"] == "15"
    calls = [call["body"] for call in fake_sglang.generate_calls[before:]]
    thoughts = [call for call in calls if call["sampling_params"]["max_new_tokens"] > 1]
    assert len(thoughts) == 2
    for thought in thoughts:
        assert thought["sampling_params"] == {"max_new_tokens": 16, "temperature": 0, "stop_token_ids": thought[
            "sampling_params"]["stop_token_ids"]}  # fmt: skip
        assert thought["sampling_params"]["stop_token_ids"][0] == close
        # SGLang #34719: a generation carries a label list like every readout.
        assert thought["token_ids_logprob"] == [close] and thought["return_logprob"] is True
        assert thought["input_ids"][: len(calls[0]["input_ids"])] == calls[0]["input_ids"]  # the shared prefix
        later = calls[calls.index(thought) + 1 :]  # the first-pass branches start with it too
        reads = [c for c in later if c["input_ids"][: len(thought["input_ids"])] == thought["input_ids"]]
        assert len(reads) == 1
        generated = reads[0]["input_ids"][len(thought["input_ids"]) : len(thought["input_ids"]) + 5]
        assert generated[-1] == close  # the ids as generated, the close matched by the stop
        rid = reads[0]["rid"]
        assert fake_sglang.cached_tokens[rid] >= len(thought["input_ids"]) + 4  # call 2 reuses call 1's sequence
    assert fake_sglang.violations == []
    metrics = httpx.get(f"{server.url}/metrics").text
    assert "openjev_escalations_total 2.0" in metrics and "openjev_reasoning_tokens_total 10.0" in metrics


def test_a_budget_cut_gets_a_forced_close(think_server, fake_sglang, qwen_tokenizer_dir):
    from tokenizers import Tokenizer

    close = Tokenizer.from_file(str(qwen_tokenizer_dir / "tokenizer.json")).token_to_id("</think>")
    server = think_server()
    response = httpx.post(f"{server.url}/v1/systemone", json=body({"u": NOUL}), timeout=30)
    assert response.headers["x-openjev-reasoning-tokens"] == "16"
    thought = generations(fake_sglang)[-1]
    read = fake_sglang.generate_calls[-1]["body"]
    assert read["input_ids"][len(thought["input_ids"]) + 16] == close
    assert read["sampling_params"] == {"max_new_tokens": 1, "temperature": 0}


def test_the_share_cap_escalates_the_least_confident(think_server, fake_sglang):
    server = think_server({**THINK_ALL, "OPENJEV_THINK_MAX_SHARE": "0.25"})
    questions = {f"q{i}": NOUL for i in range(4)} | {"c": CHOICE}
    first = httpx.post(f"{server.url}/v1/systemone", json=body(questions, "jev-latest"), timeout=30).json()
    response = httpx.post(f"{server.url}/v1/systemone", json=body(questions), timeout=30)
    assert response.headers["x-openjev-escalated"] == "2"  # ceil(0.25 * 5)
    limits = httpx.get(f"{server.url}/v1/limits").json()["thinking"]
    assert limits == {"model": "openjev-think", "mode": "template", "margin_nats": 1000.0, "max_share": 0.25,
                      "window_questions": 1000, "budget_tokens": 16}  # fmt: skip
    from openjev.answering.escalation import margin

    margins = sorted((margin(answer), qid) for qid, answer in first["answers"].items())
    changed = {qid for qid, answer in response.json()["answers"].items() if answer != first["answers"][qid]}
    assert changed <= {qid for _, qid in margins[:2]} and changed


def test_a_failed_thought_keeps_the_first_pass_answer(think_server, fake_sglang):
    server = think_server()
    first = httpx.post(f"{server.url}/v1/systemone", json=body({"u": NOUL}, "jev-latest"), timeout=30).json()
    fake_sglang.fail_on_call = fake_sglang._calls + 3  # warm-up, branch, then the generation
    before = len(fake_sglang.generate_calls)
    response = httpx.post(f"{server.url}/v1/systemone", json=body({"u": NOUL}), timeout=30)
    assert response.status_code == 200 and response.json()["answers"] == first["answers"]
    assert int(response.headers["x-openjev-backend-input-tokens"]) == sent_since(fake_sglang, before)
    assert response.headers["x-openjev-escalated"] == "1" and response.headers["x-openjev-reasoning-tokens"] == "0"
    assert response.json()["usage"]["output_tokens"] == 1 and response.headers["x-openjev-backend-output-tokens"] == "2"
    assert "openjev_thinking_failures_total 1.0" in httpx.get(f"{server.url}/metrics").text


def test_thinking_counts_against_the_request_timeout_and_is_aborted(think_server, fake_sglang):
    server = think_server({**THINK_ALL, "OPENJEV_REQUEST_TIMEOUT": "1.5"})
    first = httpx.post(f"{server.url}/v1/systemone", json=body({"u": NOUL}, "jev-latest"), timeout=30).json()
    fake_sglang.generate_delay, fake_sglang.delay_from_call = 30, fake_sglang._calls + 3
    started = time.monotonic()
    response = httpx.post(f"{server.url}/v1/systemone", json=body({"u": NOUL}), timeout=30)
    assert time.monotonic() - started < 5
    assert response.status_code == 200 and response.json()["answers"] == first["answers"]
    assert eventually(lambda: fake_sglang.in_flight == 0, timeout=5)
    assert fake_sglang.aborted == [generations(fake_sglang)[-1]["rid"]]


def test_a_client_disconnect_aborts_the_generation(think_server, fake_sglang):
    server = think_server()
    fake_sglang.generate_delay, fake_sglang.delay_from_call = 30, fake_sglang._calls + 3
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.url}/v1/systemone", json=body({"u": NOUL}), timeout=1.0)
    assert eventually(lambda: fake_sglang.in_flight == 0, timeout=5)
    assert fake_sglang.aborted == [generations(fake_sglang)[-1]["rid"]]


def test_a_thought_whose_readout_fails_still_counts_its_generated_ids(think_server, fake_sglang):
    server = think_server()
    first = httpx.post(f"{server.url}/v1/systemone", json=body({"u": NOUL}, "jev-latest"), timeout=30).json()
    fake_sglang.fail_on_call = fake_sglang._calls + 4  # warm-up, branch, generation, then call 2
    before = len(fake_sglang.generate_calls)
    response = httpx.post(f"{server.url}/v1/systemone", json=body({"u": NOUL}), timeout=30)
    assert response.status_code == 200 and response.json()["answers"] == first["answers"]
    assert response.headers["x-openjev-reasoning-tokens"] == "16"
    # Billed: the answer and the 16 generated ids; the backend read the first pass's 2; no call 2 answered.
    assert response.json()["usage"]["output_tokens"] == 17
    assert response.headers["x-openjev-backend-output-tokens"] == "18"
    # Every prompt sent counts in openjev's own totals, the failed call 2's too.
    assert int(response.headers["x-openjev-backend-input-tokens"]) == sent_since(fake_sglang, before)
    metrics = httpx.get(f"{server.url}/metrics").text
    assert "openjev_reasoning_tokens_total 16.0" in metrics and "openjev_thinking_failures_total 1.0" in metrics


def sent_since(fake, before: int) -> int:
    return sum(len(call["body"]["input_ids"]) for call in fake.generate_calls[before:])


def test_escalations_past_the_total_budget_are_not_made(think_server, fake_sglang):
    questions = {f"q{i}": NOUL for i in range(4)}
    measure = think_server()
    before = len(fake_sglang.generate_calls)
    httpx.post(f"{measure.url}/v1/systemone", json=body(questions, "jev-latest"), timeout=30)
    prefix = len(fake_sglang.generate_calls[before]["body"]["input_ids"])
    # What the backend computes: the prefix once (the warm-up), then each branch's own tokens.
    first_pass = sent_since(fake_sglang, before) - len(questions) * prefix
    before = len(fake_sglang.generate_calls)
    full = httpx.post(f"{measure.url}/v1/systemone", json=body({"q": NOUL}), timeout=30)
    assert full.headers["x-openjev-escalations-over-budget"] == "0"
    # The budget cut's thought is its worst case: call 1's own tokens, then call 2's past call 1 (all 16
    # ids, the close and the cue): call 2's prompt less the shared prefix.
    one_escalation = len(fake_sglang.generate_calls[before + 3]["body"]["input_ids"]) - prefix
    limit = first_pass + 2 * one_escalation + one_escalation // 2
    server = think_server({**THINK_ALL, "OPENJEV_MAX_TOTAL_INPUT_TOKENS": str(limit)})
    before = len(fake_sglang.generate_calls)
    response = httpx.post(f"{server.url}/v1/systemone", json=body(questions), timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["x-openjev-escalated"] == "4"
    assert response.headers["x-openjev-escalations-over-budget"] == "2"
    thoughts = [
        call for call in fake_sglang.generate_calls[before:] if call["body"]["sampling_params"]["max_new_tokens"] > 1
    ]
    assert len(thoughts) == 2


@pytest.mark.embedded
def test_an_escalation_with_no_room_to_think_in_one_call_is_over_budget_not_failed(serve_openjev, fake_sglang):
    from openjev.backends.embedded.model_source import resolve_model

    # Qwen2.5's template has no thinking mode: call 1 asks for reasoning in words, so it is longer
    # than the question's branch, and a per-call limit that the branch just fits leaves it no room.
    tokenizer = str(resolve_model("packaged:qwen2.5-coder-0.5b").path)

    def think_server(env):
        return serve_openjev("--connect", fake_sglang.url, "--tokenizer", tokenizer, env=env)

    measure = think_server(THINK_ALL)
    before = len(fake_sglang.generate_calls)
    httpx.post(f"{measure.url}/v1/systemone", json=body({"u": NOUL}, "jev-latest"), timeout=30)
    branch = len(fake_sglang.generate_calls[before + 1]["body"]["input_ids"])
    server = think_server({**THINK_ALL, "OPENJEV_MAX_INPUT_TOKENS": str(branch + 1)})
    before = len(fake_sglang.generate_calls)
    response = httpx.post(f"{server.url}/v1/systemone", json=body({"u": NOUL}), timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["x-openjev-escalated"] == "1"
    assert response.headers["x-openjev-escalations-over-budget"] == "1"
    assert len(fake_sglang.generate_calls) - before == 2  # the warm-up and the branch: no thought
    assert "openjev_thinking_failures_total 0.0" in httpx.get(f"{server.url}/metrics").text
