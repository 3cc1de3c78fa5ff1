"""An evaluation's readouts as one batched `/generate` (SGLang's list form), against the fake SGLang whose
scheduler batches what arrives during a step: one call and one step for 64 questions, the same answers
as one call per readout, content-free readouts in the same call, chunks of the slot count, a failed
batch aborted whole; the backend's own batch equal to its single readouts on both frontends; the
fake's reading of the list form; and the slots a batch holds."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from openjev.affinity import common_prefix_length
from openjev.backends.base import ReadoutCall
from openjev.backends.sglang import SGLangBackend
from openjev.backends.slots import BackendSlots
from tests.backends.test_sglang_limits import with_backend
from tests.conftest import ServeOpenJev
from tests.fake_sglang import FakeSGLang
from tests.fake_sglang.batch import rids_of

DOCUMENT = " ".join(f"Clause {i}: the supplier delivers part {i} within {i + 3} days." for i in range(60))
QUESTIONS = {
    f"q{i}": {"type": "noul", "instructions": f"Does clause {i} set a deadline under a week?"}
    if i % 2
    else {"type": "choice", "instructions": f"Who acts in clause {i}?", "criteria": {"supplier": None, "buyer": None}}
    for i in range(64)
}
SCORE = {"type": "score", "instructions": "How strict is the contract?", "criteria": ["lax", "usual", "strict"]}


def ask(url: str, questions: dict[str, Any], state: str = DOCUMENT) -> dict[str, Any]:
    response = httpx.post(f"{url}/v1/systemone", json={"model": "jev-latest", "state": state, "questions": questions},
                          timeout=60)  # fmt: skip
    assert response.status_code == 200, response.text
    return response.json()["answers"]


def sizes(fake: FakeSGLang, since: int) -> list[int]:
    """The readouts each `/generate` after the first `since` carried."""
    return [len(rids_of(post["body"])) for post in fake.generate_posts[since:]]


def test_64_questions_are_one_call_in_one_step_with_the_answers_of_one_call_each(
    serve_openjev: ServeOpenJev, qwen_tokenizer_dir: Any
) -> None:
    with FakeSGLang(step_seconds=0.05) as fake:
        servers = {
            slots: serve_openjev(
                "--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir), "--max-concurrent-branches", str(slots)
            )
            for slots in (64, 16, 1)
        }
        answers, calls = {}, {}
        for slots, server in servers.items():
            before, steps = len(fake.generate_posts), len(fake.scheduler.step_sizes)
            answers[slots] = ask(server.url, QUESTIONS)
            calls[slots] = sizes(fake, before)
            if slots == 64:
                # The warm-up alone, then every branch in one call, all in the step after the warm-up's.
                assert calls[64] == [1, 64]
                assert fake.scheduler.step_sizes[steps:] == [1, 64]
                batch = fake.generate_posts[-1]["body"]
                assert len(set(batch["rid"])) == 64 and all(batch["token_ids_logprob"])
        # Fewer slots than readouts: chunks of that many (one slot: one plain call per readout).
        assert calls[16] == [1, 16, 16, 16, 16] and calls[1] == [1] * 65
        assert answers[64] == answers[16] == answers[1]
        assert fake.violations == []


def test_content_free_readouts_go_in_the_same_call_and_a_failed_batch_is_aborted_whole(
    serve_openjev: ServeOpenJev, qwen_tokenizer_dir: Any
) -> None:
    with FakeSGLang() as fake:
        server = serve_openjev("--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir))
        questions = {"strict": SCORE, "q1": QUESTIONS["q1"], "q2": QUESTIONS["q2"]}
        before = len(fake.generate_posts)
        ask(server.url, questions, "A short contract.")
        # The warm-up, then three branches and the score question's content-free readout in one call.
        assert sizes(fake, before) == [1, 4]
        prompts = fake.generate_posts[-1]["body"]["input_ids"]
        shared = common_prefix_length(prompts[0], prompts[1])  # the request's state, which "N/A" replaces
        assert common_prefix_length(prompts[2], prompts[0]) == shared > common_prefix_length(prompts[3], prompts[0])
        fake.fail_on_call = fake._calls + 2  # the next request's batch (after its warm-up)
        response = httpx.post(f"{server.url}/v1/systemone", json={"model": "jev-latest", "state": "Another one.",
                                                                  "questions": questions}, timeout=30)  # fmt: skip
        assert response.status_code == 502 and response.json()["detail"]["error_type"] == "backend_error"
        failed = set(rids_of(fake.generate_posts[-1]["body"]))
        posted = {call["body"]["rid"] for call in fake.requests if call["path"] == "/abort_request"}
        assert len(failed) == 3 and posted == failed
        assert fake.violations == []


def test_a_server_that_refuses_the_list_form_gets_one_call_per_readout(
    serve_openjev: ServeOpenJev, qwen_tokenizer_dir: Any
) -> None:
    # sgl-model-gateway 0.3.2 answers the list form 422 (its rid is one string) and forwards single calls.
    with FakeSGLang(list_form=False) as fake:
        gateway = serve_openjev("--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir))
        questions = {name: QUESTIONS[name] for name in ("q0", "q1", "q2")}
        before = len(fake.generate_posts)
        first = ask(gateway.url, questions)
        # The warm-up, the refused batch, then each readout alone; later requests never try the list form.
        assert sizes(fake, before) == [1, 3, 1, 1, 1]
        before = len(fake.generate_posts)
        assert ask(gateway.url, questions) == first and sizes(fake, before) == [1, 1, 1]
        fake.list_form = True
        direct = serve_openjev("--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir))
        before = len(fake.generate_posts)
        assert ask(direct.url, questions) == first and sizes(fake, before) == [1, 3]
        assert "refuses /generate's list form" in gateway.log()
        assert fake.violations == []


@pytest.mark.parametrize("rust", [False, True], ids=["python", "rust"])
def test_a_batch_answers_as_its_single_readouts_and_one_readout_stays_a_plain_call(rust: bool) -> None:
    calls = [ReadoutCall(f"{i:032x}", [100, 200, 300 + i], (19 + i, 20, 21)[: 1 + i % 3]) for i in range(5)]

    async def both(backend: SGLangBackend) -> tuple[Any, Any, Any]:
        together = await backend.readout_batch(calls)
        alone = [await backend.readout(ReadoutCall(f"{c.rid}a", c.input_ids, c.label_token_ids)) for c in calls]
        [one] = await backend.readout_batch(calls[:1])
        return together, alone, one

    with FakeSGLang(rust_frontend=rust) as fake:
        together, alone, one = with_backend(fake, both)
        assert [r.logprobs for r in together] == [r.logprobs for r in alone] and one.logprobs == alone[0].logprobs
        assert [len(r.logprobs) for r in together] == [1, 2, 3, 1, 2]
        bodies = [post["body"] for post in fake.generate_posts[1:]]
        assert bodies[0]["rid"] == [call.rid for call in calls] and fake.scheduler.step_sizes[1] == 5
        assert isinstance(bodies[-1]["rid"], str) and bodies[-1]["input_ids"] == [100, 200, 300]
        assert fake.violations == []


def post(fake: FakeSGLang, **body: Any) -> httpx.Response:
    readout = {"sampling_params": {"max_new_tokens": 1, "temperature": 0}, "return_logprob": True,
               "logprob_start_len": -1}  # fmt: skip
    return httpx.post(f"{fake.url}/generate", json={**readout, **body}, timeout=10)


def test_the_fake_reads_the_list_form_as_sglang_does() -> None:
    with FakeSGLang() as fake:
        answered = post(fake, rid=["a", "b"], input_ids=[[1, 2, 3], [1, 2, 4]], token_ids_logprob=[[5], [6, 7]])
        assert answered.status_code == 200
        assert [answer["meta_info"]["id"] for answer in answered.json()] == ["a", "b"]
        assert [len(answer["meta_info"]["output_token_ids_logprobs"][0]) for answer in answered.json()] == [1, 2]
        assert post(fake, rid=["c"], input_ids=[[1], [2]], token_ids_logprob=[[5], [6]]).status_code == 400
        assert post(fake, rid=["d", "d"], input_ids=[[1], [2]], token_ids_logprob=[[5], [6]]).status_code == 400
        # One refused request fails the call, and none of it runs.
        steps = fake.scheduler.steps
        refused = post(fake, rid=["e", "f"], input_ids=[[1], [2]], token_ids_logprob=[[5], [999_999]])
        assert refused.status_code == 400 and fake.scheduler.steps == steps
        fake.violations.clear()  # the refusals above are what openjev must never cause
        # openjev's contract: every request its own rid, to abort it by.
        assert post(fake, rid="g", input_ids=[[1], [2]], token_ids_logprob=[[5], [6]]).status_code == 500
        assert fake.violations and "rids must be a list" in fake.violations[0]
        fake.violations.clear()


def test_slots_count_readouts_and_batches_never_wait_on_each_other() -> None:
    async def scenario() -> list[str]:
        slots, order = BackendSlots(4), []

        async def batch(name: str, count: int, hold: float) -> None:
            async with slots.held(count):
                order.append(name)
                await asyncio.sleep(hold)

        async def single(name: str) -> None:
            async with slots:
                order.append(name)
                await asyncio.sleep(0.05)

        with pytest.raises(ValueError):
            async with slots.held(5):
                pass
        await asyncio.wait_for(
            asyncio.gather(batch("a", 3, 0.1), single("s1"), batch("b", 3, 0.1), single("s2"), batch("c", 4, 0)), 5
        )
        # A cancelled taker gives back what it took: all four are free again.
        waiting = asyncio.create_task(batch("d", 4, 0))
        async with slots.held(2):
            await asyncio.sleep(0.01)
            waiting.cancel()
        await asyncio.wait_for(batch("e", 4, 0), 1)
        return order

    order = asyncio.run(scenario())
    assert order[0] == "a" and set(order) == {"a", "b", "c", "s1", "s2", "e"}
