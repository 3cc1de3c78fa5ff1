"""Data-parallel SGLang behind openjev: the rank check and per-rank caches of the fake, the settings and
launch command, and openjev `--connect`ed to a two-rank fake (rank count read from /server_info)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from openjev.backends.base import ReadoutCall
from openjev.backends.sglang_readouts import generate_payload
from openjev.backends.supervised import sglang_command
from openjev.config import Settings
from openjev.options import Frontend
from tests.conftest import ServeOpenJev
from tests.fake_sglang import FakeSGLang, payloads

READOUT = {"sampling_params": {"max_new_tokens": 1, "temperature": 0}, "return_logprob": True,
           "logprob_start_len": -1, "token_ids_logprob": [5]}  # fmt: skip
QUESTIONS = {
    "urgent": {"type": "noul", "instructions": "Is this urgent?"},
    "team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": None, "shipping": None}},
    "mood": {"type": "score", "instructions": "How upset is the customer?", "criteria": ["calm", "upset", "furious"]},
}


def generate(fake: FakeSGLang, rid: str, ids: list[int], **extra: object) -> httpx.Response:
    return httpx.post(f"{fake.url}/generate", json={"rid": rid, "input_ids": ids, **READOUT, **extra}, timeout=10)


# -- the fake: 0.5.19's rank check and one radix cache per rank ------------------------------------


def test_each_rank_has_its_own_cache_and_unpinned_calls_take_turns() -> None:
    prompt = list(range(1, 41))
    with FakeSGLang(dp_size=2) as fake:
        assert httpx.get(f"{fake.url}/server_info").json()["dp_size"] == 2
        assert generate(fake, "a", prompt, routed_dp_rank=1).status_code == 200
        answer = generate(fake, "b", prompt, routed_dp_rank=0).json()["meta_info"]
        # Another rank never saw the prompt: a broken affinity is lost cached tokens.
        assert answer["cached_tokens"] == 0 and answer["dp_rank"] == 0
        assert generate(fake, "c", prompt, routed_dp_rank=1).json()["meta_info"]["cached_tokens"] == 39
        # Unpinned: round robin (0.5.19's `auto`), so the same prompt alternates between the caches.
        assert [generate(fake, f"u{i}", prompt).json()["meta_info"]["dp_rank"] for i in range(4)] == [0, 1, 0, 1]
        # The deprecated alias pins too.
        assert generate(fake, "d", prompt, data_parallel_rank=1).json()["meta_info"]["dp_rank"] == 1
        assert fake.violations == []


@pytest.mark.parametrize(("dp_size", "rank", "refused"), [(2, 2, True), (2, -1, True), (1, 1, True), (1, 0, False)])
def test_out_of_range_ranks_are_refused_as_0_5_19_refuses_them(dp_size: int, rank: int, refused: bool) -> None:
    with FakeSGLang(dp_size=dp_size) as fake:
        response = generate(fake, "r", [1, 2, 3], routed_dp_rank=rank)
    if refused:
        assert response.status_code == 400
        assert response.json() == {"error": {"message": f"routed_dp_rank={rank} out of range [0, {dp_size})"}}
    else:  # one rank: a rank of 0 is ignored
        assert response.status_code == 200


# -- settings and the launch command ----------------------------------------------------------------


def test_one_rank_launches_and_sends_exactly_what_it_did_before(tmp_path: Path) -> None:
    base = Settings(sglang_python=tmp_path / "python")
    assert sglang_command(Settings(sglang_python=tmp_path / "python", data_parallel_size=1), 1, tmp_path) == (
        sglang_command(base, 1, tmp_path)
    )
    assert "--dp-size" not in sglang_command(base, 1, tmp_path)
    assert list(generate_payload(ReadoutCall("r", [1], [2]))) == [
        "rid", "input_ids", "sampling_params", "return_logprob", "logprob_start_len", "token_ids_logprob",
    ]  # fmt: skip
    assert generate_payload(ReadoutCall("r", [1], [2], routed_dp_rank=1))["routed_dp_rank"] == 1


def test_several_ranks_launch_with_dp_size_on_the_python_frontend(tmp_path: Path) -> None:
    settings = Settings(sglang_python=tmp_path / "python", data_parallel_size=4, frontend=Frontend.python)
    command = sglang_command(settings, 1, tmp_path)
    payloads.record_command(command[3:])
    assert command[command.index("--dp-size") + 1] == "4"
    # 0.5.19's Rust frontend never reaches the controller that honours routed_dp_rank.
    with pytest.raises(ValueError, match="OPENJEV_FRONTEND=python"):
        Settings(sglang_python=tmp_path / "python", data_parallel_size=2)
    for taken in ("--dp-size 2", "--dp 2", "--data-parallel-size=2"):
        with pytest.raises(ValueError, match="may not set --"):
            Settings(sglang_args=taken)


# -- openjev --connect to a two-rank SGLang ---------------------------------------------------------


def conversation(index: int, turns: int) -> dict:
    """A support chat that grows by one exchange per turn; its opening names it."""
    messages = [{"role": "user", "content": f"Ticket {index}: my order number {index * 7919} arrived broken, the "
                 "box was crushed and two of the three glasses inside are shattered. What can you do?"}]  # fmt: skip
    for turn in range(1, turns):
        messages += [
            {"role": "assistant", "content": f"Sorry to hear that. Step {turn}: can you send a photo?"},
            {"role": "user", "content": f"Here is photo number {turn}; it shows the damage clearly."},
        ]
    return {"model": "jev-latest", "state": messages, "questions": QUESTIONS}


def warm_ups(fake: FakeSGLang) -> list[dict]:
    """The fake's warm-up calls (one label id; not openjev's readiness probe) with their cached tokens."""
    return [call["body"] | {"cached": fake.cached_tokens[call["body"]["rid"]]} for call in fake.generate_calls
            if len(call["body"]["token_ids_logprob"]) == 1 and call["body"]["input_ids"] != [0]]  # fmt: skip


def test_connect_reads_the_rank_count_and_pins_each_conversation(
    serve_openjev: ServeOpenJev, qwen_tokenizer_dir: Path
) -> None:
    with FakeSGLang(dp_size=2) as fake:
        server = serve_openjev("--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir))
        with server.client() as client:
            assert client.get("/v1/limits").json()["data_parallel_size"] == 2
            for turns in (1, 2, 3):
                assert client.post("/v1/systemone", json=conversation(1, turns)).status_code == 200
            health = client.get("/health").json()["data_parallel"]
            exposition = client.get("/metrics").text
        ranks = {call["body"]["routed_dp_rank"] for call in fake.generate_calls[1:]}  # after the readiness call
        assert len(ranks) == 1 and ranks <= {0, 1}
        (rank,) = ranks
        # The first turn warms up; each later one, a few tokens more, skips it (`warm_prefixes.py`): its
        # branches find the previous turns' prefix in the same rank's cache.
        (first,) = warm_ups(fake)
        opening, calls = first["input_ids"], [call["body"] for call in fake.generate_calls]
        # After the readiness call and the first warm-up: every readout of the conversation.
        branches = [body["rid"] for body in calls[2:] if body["input_ids"][: len(opening)] == opening]
        assert len(branches) >= 3 * len(QUESTIONS)
        assert min(fake.cached_tokens[rid] for rid in branches) >= len(opening)
        assert health["size"] == 2 and health["ranks"][rank]["in_flight_calls"] == 0
        # Each turn's branches prefill its few new tokens themselves: less than half of these short prompts.
        assert health["ranks"][rank]["cached_share"] > 0.4 and health["ranks"][1 - rank]["cached_share"] is None
        assert f'openjev_rank_cached_tokens_total{{rank="{rank}"}}' in exposition
        assert fake.violations == []


def test_without_routing_a_two_rank_sglang_loses_cached_prefixes(
    serve_openjev: ServeOpenJev, qwen_tokenizer_dir: Path
) -> None:
    """OPENJEV_DATA_PARALLEL_SIZE=1 overrides /server_info: nothing is pinned, SGLang takes turns, and
    branches land on a rank that never saw their warm-up."""
    with FakeSGLang(dp_size=2) as fake:
        server = serve_openjev("--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir),
                               env={"OPENJEV_DATA_PARALLEL_SIZE": "1"})  # fmt: skip
        with server.client() as client:
            assert client.get("/v1/limits").json()["data_parallel_size"] == 1
            assert client.post("/v1/systemone", json=conversation(2, 1)).status_code == 200
        calls = fake.generate_calls[1:]
        assert all("routed_dp_rank" not in call["body"] for call in calls)
        (warm_up,) = warm_ups(fake)
        lost = [c for c in calls if fake.cached_tokens[c["body"]["rid"]] < len(warm_up["input_ids"])]
        assert len(lost) > 1  # the warm-up itself, and at least one branch on the other rank
