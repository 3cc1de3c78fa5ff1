"""`LlamaCppBackend` on the real packaged test model's GGUF (Qwen2.5-Coder-0.5B Q4_K_M, run as it is).

Mechanics first: the readout is a log-softmax over the vocabulary; prefix reuse, batched branches and a
full prefill agree; an identical prompt is answered from the resident entry; eviction keeps answers
right; generation (greedy, seeded, constrained, stop ids) and cancellation. Then agreement with the
torch backend in float32 on the same prompts: the GGUF's weights are the ones float32 dequantizes, so
the two differ only by llama.cpp's 8-bit activations and KV cells.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pytest

from openjev.backends.base import BackendError, BackendUnavailable, GenerationCall, ReadoutCall
from openjev.backends.embedded import LlamaCppBackend, llama_backend
from openjev.backends.embedded.model_source import ResolvedModel, resolve_gguf
from tests.backends.embedded.conftest import TEST_MODEL, backends_on
from tests.backends.embedded.test_backend import (
    QUESTIONS,
    cancel_a_running_prefill,
    chat_prefix,
    label_ids,
    question_suffix,
)

pytestmark = pytest.mark.embedded

#: Label logprobs of one prompt computed in different batch shapes (prefix then suffix, several
#: branches in one decode, all at once): llama.cpp quantizes activations to 8 bits per block, and the
#: blocks fall differently. Measured here on the 0.5B model: up to 0.06 logp; 0.3 leaves headroom for
#: other CPUs, while a wrong position or a missing prefix moves them by whole nats.
SHAPE_TOLERANCE = 0.3
#: Label probabilities (renormalised over the labels) against the torch backend in float32; measured
#: here up to 0.04 on these prompts.
FLOAT32_TOLERANCE = 0.1


@pytest.fixture(scope="session")
def llama(gguf_model: ResolvedModel) -> Iterator[LlamaCppBackend]:
    started = LlamaCppBackend(TEST_MODEL)
    asyncio.run(started.start())
    yield started
    asyncio.run(started.aclose())


@pytest.fixture
def make_llama(gguf_model: ResolvedModel) -> Iterator[Callable[[], LlamaCppBackend]]:
    """Fresh started llama.cpp backends (nothing resident), closed after the test."""
    yield from backends_on(TEST_MODEL, LlamaCppBackend)


def readout(backend, ids: list[int], labels: Sequence[int]):
    return asyncio.run(backend.readout(ReadoutCall(uuid.uuid4().hex, ids, labels)))


def generate(backend, ids: list[int], budget: int, stops: Sequence[int] = (), **kwargs):
    return asyncio.run(backend.generate(GenerationCall(uuid.uuid4().hex, ids, budget, list(stops), **kwargs)))


def worst(a: Sequence[float], b: Sequence[float]) -> float:
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


def test_the_model_directory_holds_the_gguf_its_config_and_tokenizer(gguf_model: ResolvedModel) -> None:
    assert gguf_model.gguf is not None and gguf_model.gguf.stat().st_size == 491_400_064
    assert {"config.json", "tokenizer.json", "tokenizer_config.json"} <= {p.name for p in gguf_model.path.iterdir()}
    assert gguf_model.name == "Qwen/Qwen2.5-Coder-0.5B-Instruct-AWQ"
    # Resolving again finds it: nothing is assembled or written twice.
    assert resolve_gguf(TEST_MODEL) == gguf_model


def test_health_context_and_lifecycle(gguf_model: ResolvedModel) -> None:
    fresh = LlamaCppBackend(TEST_MODEL)
    assert (fresh.context_length, fresh.model_name) == (None, None)
    with pytest.raises(BackendUnavailable):
        readout(fresh, [1, 2], [3])
    asyncio.run(fresh.start())
    health = asyncio.run(fresh.health())
    assert health.ready and health.detail["runtime"] == "llama.cpp" and health.detail["dtype"] == "gguf"
    assert fresh.context_length == 32768 and fresh.tokenizer_dir == gguf_model.path
    asyncio.run(fresh.aclose())
    assert not asyncio.run(fresh.health()).ready
    with pytest.raises(BackendUnavailable):
        readout(fresh, [1, 2], [3])


def test_readout_is_a_log_softmax_over_the_vocabulary(llama: LlamaCppBackend, tokenizer) -> None:
    ids = chat_prefix(tokenizer, uuid.uuid4().hex, turns=2) + question_suffix(tokenizer, QUESTIONS[0])
    labels = label_ids(tokenizer, ["A", "B", "C", " yes", " no"])
    vocab = llama.runtime.shape.vocab_size if llama.runtime else 0
    whole = readout(llama, ids, list(range(vocab)))
    everything = whole.logprobs
    top = max(everything)
    assert abs(top + math.log(sum(math.exp(lp - top) for lp in everything))) < 1e-4
    again = readout(llama, ids, labels[::-1])
    assert again.cached_tokens == len(ids)  # the same prompt: answered from its resident entry
    assert list(again.logprobs) == pytest.approx([everything[i] for i in labels[::-1]], abs=1e-6)
    # The most probable next token, fresh and from the resident entry alike (`x_diagnostics`).
    assert whole.top_token == again.top_token == everything.index(top)


def test_reuse_batching_and_a_full_prefill_agree(make_llama, tokenizer) -> None:
    labels = label_ids(tokenizer, [" A", " B", " C", " yes", " no"])
    prefix = chat_prefix(tokenizer, "llama-shapes", turns=6)
    prompts = [prefix + question_suffix(tokenizer, question) for question in QUESTIONS]
    reusing = make_llama()

    async def branches() -> list:
        warm = await reusing.readout(ReadoutCall("warm", prefix, labels))
        assert warm.cached_tokens == 0
        return await asyncio.gather(*(reusing.readout(ReadoutCall(f"b{i}", p, labels)) for i, p in enumerate(prompts)))

    together = asyncio.run(branches())
    assert [r.cached_tokens for r in together] == [len(prefix)] * len(QUESTIONS)
    assert asyncio.run(reusing.health()).detail["batched_readouts"] == len(QUESTIONS)
    differences = []
    for prompt, branch in zip(prompts, together, strict=True):
        full = readout(make_llama(), prompt, labels)  # a backend of its own: nothing resident
        assert full.cached_tokens == 0
        differences.append(worst(branch.logprobs, full.logprobs))
    print(f"llama.cpp: branches vs full prefills, largest difference {max(differences):.3f} logp")
    assert max(differences) <= SHAPE_TOLERANCE


def test_agrees_with_the_torch_backend_in_float32(llama: LlamaCppBackend, make_backend, tokenizer) -> None:
    reference = make_backend(dtype="float32")
    labels = label_ids(tokenizer, [" A", " B", " C"])
    differences = []
    for index, question in enumerate(QUESTIONS):
        ids = chat_prefix(tokenizer, f"agree-{index}", turns=3) + question_suffix(tokenizer, question)
        mine, theirs = (readout(backend, ids, labels).logprobs for backend in (llama, reference))
        differences.append(worst(_renormalised(mine), _renormalised(theirs)))
    print(f"llama.cpp vs torch float32: largest label-probability difference {max(differences):.3f}")
    assert max(differences) <= FLOAT32_TOLERANCE


def _renormalised(logprobs: Sequence[float]) -> list[float]:
    weights = [math.exp(lp) for lp in logprobs]
    return [w / sum(weights) for w in weights]


def test_eviction_keeps_answers_right(make_llama, tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_backend, "SEQUENCES", 3)
    small = make_llama()
    labels = label_ids(tokenizer, [" A", " B"])
    # No two share a first token, so none reuses another and the oldest go first.
    words = ["Apple", "Banana", "Cherry", "Damson", "Elder"]
    prompts = [tokenizer.encode(f"{word} order arrived broken. Refund? A: yes B: no\nAnswer:").ids for word in words]
    assert len({ids[0] for ids in prompts}) == len(prompts)
    first = [readout(small, ids, labels) for ids in prompts]
    assert small.sequences.evictions == 2 and len(small.sequences) == 3
    # The evicted ones run again, the resident ones are answered from their entries; all as they were.
    again = [readout(small, ids, labels) for ids in prompts]
    assert [r.cached_tokens for r in again[:2]] == [0, 0]
    assert all(worst(a.logprobs, b.logprobs) <= SHAPE_TOLERANCE for a, b in zip(again, first, strict=True))


def test_generation_greedy_seeded_stopped_and_resident_for_the_readout_after(llama: LlamaCppBackend, tokenizer) -> None:
    prefix = chat_prefix(tokenizer, uuid.uuid4().hex, turns=2)
    labels = label_ids(tokenizer, ["A", "B"])
    readout(llama, prefix, labels)
    prompt = prefix + question_suffix(tokenizer, "Is a refund asked for? A: yes B: no")
    first = generate(llama, prompt, 6)
    assert len(first.output_ids) == 6 and first.finish_reason == "length"
    assert (first.prompt_tokens, first.cached_tokens) == (len(prompt), len(prefix))
    # Greedy picks the argmax of the readout after the prompt.
    after_prompt = readout(llama, prompt, [first.output_ids[0], *labels]).logprobs
    assert after_prompt[0] >= max(after_prompt[1:])
    assert generate(llama, prompt, 6).output_ids == first.output_ids
    stop = first.output_ids[2]
    stopped = generate(llama, prompt, 6, [stop])
    assert stopped.output_ids == first.output_ids[: first.output_ids.index(stop) + 1]
    assert stopped.finish_reason == "stop"
    follow = prompt + list(first.output_ids) + tokenizer.encode("\nAnswer:").ids
    assert readout(llama, follow, labels).cached_tokens == len(prompt) + 5
    sampled = {generate(llama, prompt, 5, temperature=1.0, seed=seed).output_ids for seed in (7, 7, 8, 9)}
    assert 2 <= len(sampled) <= 3  # seed 7 twice gives one sequence


@dataclass(frozen=True)
class Digits:
    """A constraint: exactly `length` ids from `allowed`, then complete; reads their logprobs."""

    allowed: tuple[int, ...]
    length: int
    regex: str = "[0-9]+"

    def allowed_after(self, generated: Sequence[int]) -> Sequence[int]:
        return self.allowed if len(generated) < self.length else ()


def test_constrained_generation_stays_in_the_language(llama: LlamaCppBackend, tokenizer) -> None:
    digits = tuple(label_ids(tokenizer, list("0123456789")))
    prompt = chat_prefix(tokenizer, uuid.uuid4().hex, turns=1) + question_suffix(tokenizer, "Say a word.")
    call = GenerationCall("c", prompt, 10, [], constraint=Digits(digits, 3), read_ids=digits[:2])
    result = asyncio.run(llama.generate(call))
    assert len(result.output_ids) == 3 and set(result.output_ids) <= set(digits)
    assert result.finish_reason == "stop"  # complete
    # Read under the constrained distribution: over the ten digits, it sums to at most 1.
    assert len(result.read_logprobs) == 3
    assert all(sum(math.exp(lp) for lp in read) <= 1 + 1e-6 for read in result.read_logprobs)


def test_cancelling_stops_a_running_prefill_and_a_generation(llama: LlamaCppBackend, tokenizer) -> None:
    async def scenario() -> tuple[float, float, float]:
        stopped, whole, prompt = await cancel_a_running_prefill(llama, tokenizer)
        # llama.cpp's abort callback stopped the decode; nothing of the prompt stayed resident.
        assert llama.sequences.match(tuple(prompt), record=False).length < len(prompt) - 1
        story = chat_prefix(tokenizer, uuid.uuid4().hex, turns=1) + question_suffix(tokenizer, "Tell a long story.")
        task = asyncio.create_task(llama.generate(GenerationCall("long", story, 10_000, [])))
        await asyncio.sleep(1.0)
        cancelled_at = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return stopped, whole, time.monotonic() - cancelled_at

    stopped, whole, generation_stopped = asyncio.run(scenario())
    assert stopped < whole / 2 and generation_stopped < 5
    assert readout(llama, chat_prefix(tokenizer, uuid.uuid4().hex, turns=1), label_ids(tokenizer, ["A"])).prompt_tokens


def test_bad_calls_are_refused(llama: LlamaCppBackend) -> None:
    with pytest.raises(BackendError, match="outside"):
        readout(llama, [1, 2, 3], [10**7])
    with pytest.raises(BackendError, match="outside"):
        readout(llama, [1, 10**7], [3])
    with pytest.raises(BackendError, match="exceeds the context length"):
        readout(llama, [1] * 40_000, [3])
    with pytest.raises(BackendError, match="outside"):
        generate(llama, [1, 2, 3], 4, [10**7])
