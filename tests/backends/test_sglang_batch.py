"""An evaluation's readouts as one batched `/generate` (SGLang's list form), against the fake SGLang whose
scheduler batches what arrives during a step: one call and one step for 64 questions, the same answers
as one call per readout, content-free readouts in the same call and kept within their bytes, a
refused list form tried again after 2, 4, ... batches, a failed batch aborted whole; the backend's
own batch equal to its single readouts on both frontends; the fake's reading of the list form; and
the slots a batch holds."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from openjev.affinity import common_prefix_length
from openjev.answering.content_free import ENTRY_OVERHEAD, FLOAT_BYTES
from openjev.backends.base import ReadoutCall
from openjev.backends.sglang import SGLangBackend
from openjev.backends.slots import BackendSlots
from tests.backends.test_sglang_limits import with_backend
from tests.conftest import ServeOpenJev
from tests.fake_sglang import FakeSGLang
from tests.fake_sglang.batch import rids_of

DOCUMENT = " ".join(f"Clause {i}: the supplier delivers part {i} within {i + 3} days." for i in range(60))
#: The counts below are one readout per question: each choice read in one view, not two rotations.
#: One readout per question and no content-free readout for a choice: the batching is what is counted here.
ONE_VIEW = ("--option-shifts", "1", "--contextual-calibration", "score")
QUESTIONS = {
    f"q{i}": {"type": "noul", "instructions": f"Does clause {i} set a deadline under a week?"}
    if i % 2
    else {"type": "choice", "instructions": f"Who acts in clause {i}?", "criteria": {"supplier": None, "buyer": None}}
    for i in range(64)
}
SCORE = {"type": "score", "instructions": "How strict is the contract?", "criteria": ["lax", "usual", "strict"]}


def ask(url: str, questions: dict[str, Any], state: str = DOCUMENT) -> dict[str, Any]:
    response = httpx.post(
        f"{url}/v1/systemone", json={"model": "jev-latest", "state": state, "questions": questions}, timeout=60
    )
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
                "--connect",
                fake.url,
                "--tokenizer",
                str(qwen_tokenizer_dir),
                "--max-concurrent-branches",
                str(slots),
                *ONE_VIEW,
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
        server = serve_openjev("--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir), *ONE_VIEW)
        questions = {"strict": SCORE, "q1": QUESTIONS["q1"], "q2": QUESTIONS["q2"]}
        before = len(fake.generate_posts)
        ask(server.url, questions, "A short contract.")
        # The warm-up, then three branches and the score question's content-free readout in one call.
        assert sizes(fake, before) == [1, 4]
        prompts = fake.generate_posts[-1]["body"]["input_ids"]
        shared = common_prefix_length(prompts[0], prompts[1])  # the request's state, which "N/A" replaces
        assert common_prefix_length(prompts[2], prompts[0]) == shared > common_prefix_length(prompts[3], prompts[0])
        fake.fail_on_call = fake._calls + 2  # the next request's batch (after its warm-up)
        response = httpx.post(
            f"{server.url}/v1/systemone",
            json={"model": "jev-latest", "state": "Another one.", "questions": questions},
            timeout=30,
        )
        assert response.status_code == 502 and response.json()["detail"]["error_type"] == "backend_error"
        failed = set(rids_of(fake.generate_posts[-1]["body"]))
        posted = {call["body"]["rid"] for call in fake.requests if call["path"] == "/abort_request"}
        assert len(failed) == 3 and posted == failed
        assert fake.violations == []


def test_content_free_readouts_are_kept_within_openjev_content_free_cache_bytes(
    serve_openjev: ServeOpenJev, qwen_tokenizer_dir: Any
) -> None:
    # One view per question; an entry costs ENTRY_OVERHEAD + 8 bytes per label: 280 for three levels.
    other = {**SCORE, "instructions": "How fair is the contract?"}
    with FakeSGLang() as fake:
        for capacity, kept in ((ENTRY_OVERHEAD + 3 * FLOAT_BYTES, True), (ENTRY_OVERHEAD + 3 * FLOAT_BYTES - 1, False)):
            server = serve_openjev(
                "--connect",
                fake.url,
                "--tokenizer",
                str(qwen_tokenizer_dir),
                *ONE_VIEW,
                "--content-free-cache-bytes",
                str(capacity),
            )

            def batch(question: dict[str, Any], url: str = server.url) -> int:
                ask(url, {"q": question}, "A short contract.")
                return sizes(fake, len(fake.generate_posts) - 1)[0]

            assert batch(SCORE) == 2  # the branch and its content-free readout
            assert batch(SCORE) == (1 if kept else 2)  # kept when it fits, else read again
            assert batch(other) == 2
            assert batch(SCORE) == 2  # one entry's bytes: the other question's readout took its place
        assert fake.violations == []


def test_a_server_that_refuses_the_list_form_gets_one_call_per_readout_and_the_list_form_is_tried_again(
    serve_openjev: ServeOpenJev, qwen_tokenizer_dir: Any
) -> None:
    # sgl-model-gateway 0.3.2 answers the list form 422 (its rid is one string) and forwards single calls.
    with FakeSGLang(list_form=False) as fake:
        gateway = serve_openjev("--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir), *ONE_VIEW)
        questions = {name: QUESTIONS[name] for name in ("q0", "q1", "q2")}
        before = len(fake.generate_posts)
        first = ask(gateway.url, questions)
        # The warm-up, the refused batch, then each readout alone; the next two batches go out alone too.
        assert sizes(fake, before) == [1, 3, 1, 1, 1]

        def batches(expected: list[int]) -> None:
            before = len(fake.generate_posts)
            assert ask(gateway.url, questions) == first and sizes(fake, before) == expected

        batches([1, 1, 1])
        batches([1, 1, 1])
        # The list form is tried again and refused again, the second time in a row: the next 4 go alone.
        batches([3, 1, 1, 1])
        fake.list_form = True  # the gateway is replaced by a server that takes the list form
        for _ in range(4):
            batches([1, 1, 1])
        # Then the list form is tried again, and kept while it is taken.
        for _ in range(3):
            batches([3])
        # A success resets the count: a new refusal sends the next 2 alone, not 8.
        fake.list_form = False
        batches([3, 1, 1, 1])
        fake.list_form = True
        for expected in ([1, 1, 1], [1, 1, 1], [3]):
            batches(expected)
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
    readout = {
        "sampling_params": {"max_new_tokens": 1, "temperature": 0},
        "return_logprob": True,
        "logprob_start_len": -1,
    }
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


def test_a_batch_sends_chunks_of_the_free_slots_and_never_holds_one_idle() -> None:
    async def scenario() -> tuple[list[int], list[str], list[int]]:
        slots, chunks, order = BackendSlots(4), [], []
        release = asyncio.Event()

        async def long_call() -> None:
            async with slots:
                order.append("long")
                await release.wait()

        async def send(items):
            chunks.append(len(items))
            order.append(f"chunk{len(items)}")
            await asyncio.sleep(0.05)
            return [item * 10 for item in items]

        async def single() -> None:
            async with slots:
                order.append("single")

        held = asyncio.create_task(long_call())
        await asyncio.sleep(0)
        batch = asyncio.create_task(slots.in_chunks(list(range(7)), send))
        await asyncio.sleep(0.01)
        # 3 slots free: a chunk of 3 goes out at once; the rest waits holding nothing, so a single
        # readout that arrives now is served as soon as a slot is free, long call or not.
        await asyncio.wait_for(single(), 1)
        answers = await asyncio.wait_for(batch, 1)
        release.set()
        await held
        first, before = list(chunks), list(order)
        # Cancelled while waiting for a slot, a batch holds none afterwards: all four are free again.
        async with slots, slots, slots, slots:
            waiting = asyncio.create_task(slots.in_chunks([1, 2], send))
            await asyncio.sleep(0.01)
            waiting.cancel()
        chunks.clear()
        assert await asyncio.wait_for(slots.in_chunks([1, 2, 3, 4], send), 1) == [10, 20, 30, 40]
        assert chunks == [4]
        return first, before, answers

    chunks, order, answers = asyncio.run(scenario())
    assert answers == [item * 10 for item in range(7)]
    assert chunks[0] == 3 and sum(chunks) == 7
    # The single readout went out while the batch still had readouts to send.
    assert order.index("single") < len(order) - 1 and order[-1].startswith("chunk")
