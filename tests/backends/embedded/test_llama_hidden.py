"""Hidden states read with the label logprobs on `LlamaCppBackend` (the real packaged test model's GGUF).

The hidden state is llama.cpp's `result_norm` row at the prompt's last token, read through the eval
callback in the decode that computes the logits: checked here against llama.cpp's own embeddings mode
(which computes the same tensor for every token), and for the properties a head relies on: asked for
only where a readout asks, the same vector whether the prompt is evaluated whole, over a resident
prefix, as one of several branches or answered from its resident entry, and the logprobs unchanged.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pytest

from openjev.backends.base import LabelLogprobs, ReadoutCall
from openjev.backends.embedded import LlamaCppBackend
from openjev.backends.embedded.llama_runtime import Piece
from openjev.backends.embedded.model_source import ResolvedModel
from tests.backends.embedded.conftest import TEST_MODEL, backends_on
from tests.backends.embedded.test_backend import QUESTIONS, chat_prefix, label_ids, question_suffix
from tests.backends.embedded.test_llama_backend import SHAPE_TOLERANCE

pytestmark = pytest.mark.embedded

#: Cosine distance between the hidden states of one prompt computed in different batch shapes (8-bit
#: activations fall differently per block, as for `SHAPE_TOLERANCE`); a wrong row or position is a
#: different token's state, measured here at 0.2 or more.
SHAPE_COSINE = 0.02


@pytest.fixture(scope="module")
def tokenizer(gguf_model: ResolvedModel):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(gguf_model.path / "tokenizer.json"))


@pytest.fixture
def make_llama(gguf_model: ResolvedModel) -> Iterator[Callable[[], LlamaCppBackend]]:
    """Fresh started llama.cpp backends (nothing resident), closed after the test."""
    yield from backends_on(TEST_MODEL, LlamaCppBackend)


def read(backend: LlamaCppBackend, ids: list[int], labels: Sequence[int], hidden: bool = True) -> LabelLogprobs:
    call = ReadoutCall(uuid.uuid4().hex, ids, labels, hidden_state=hidden)
    return asyncio.run(backend.readout(call))


def cosine_distance(a: np.ndarray, b: np.ndarray) -> float:
    return 1.0 - float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_the_hidden_state_is_the_final_norm_llama_cpp_embeds(make_llama: Callable, tokenizer) -> None:
    backend = make_llama()
    assert backend.hidden_states.available and backend.hidden_states.layer == "final"
    ids = chat_prefix(tokenizer, uuid.uuid4().hex, turns=2) + question_suffix(tokenizer, QUESTIONS[0])
    labels = label_ids(tokenizer, [" A", " B", " C"])
    plain = read(backend, ids, labels, hidden=False)
    assert plain.hidden_state is None  # not asked: none
    found = read(make_llama(), ids, labels)
    state = found.hidden_state
    assert state is not None and state.dtype == np.float32 and state.shape == (backend.runtime.shape.hidden_size,)
    assert np.isfinite(state).all()
    assert found.logprobs == pytest.approx(plain.logprobs, abs=1e-6)  # the same decode's logits
    # llama.cpp's embeddings mode on a context of its own: the same tensor, every token an output.
    runtime = backend.runtime
    ll, ffi = runtime._ll, runtime._ffi
    ll.llama_set_embeddings(runtime._ctx, True)
    try:
        runtime.drop(200)
        runtime.run([Piece(200, 0, tuple(ids))])
        pointer = ll.llama_get_embeddings_ith(runtime._ctx, len(ids) - 1)
        embedded = np.frombuffer(ffi.buffer(pointer, 4 * len(state)), dtype=np.float32).copy()
    finally:
        ll.llama_set_embeddings(runtime._ctx, False)
        runtime.drop(200)
    assert cosine_distance(state, embedded) < SHAPE_COSINE


def test_the_same_state_over_a_prefix_in_branches_and_from_the_resident_entry(make_llama: Callable, tokenizer) -> None:
    labels = label_ids(tokenizer, [" A", " B", " C"])
    prefix = chat_prefix(tokenizer, uuid.uuid4().hex, turns=4)
    prompts = [prefix + question_suffix(tokenizer, question) for question in QUESTIONS]
    whole = [read(make_llama(), prompt, labels).hidden_state for prompt in prompts]
    reusing = make_llama()
    read(reusing, prefix, labels, hidden=False)

    async def branches() -> list[LabelLogprobs]:
        calls = [ReadoutCall(f"b{i}", p, labels, hidden_state=True) for i, p in enumerate(prompts)]
        return await asyncio.gather(*(reusing.readout(call) for call in calls))

    batched = asyncio.run(branches())
    assert all(found.cached_tokens == len(prefix) for found in batched)
    for found, alone in zip(batched, whole, strict=True):
        assert found.hidden_state is not None and cosine_distance(found.hidden_state, alone) < SHAPE_COSINE
    # Distinct prompts, distinct states: each branch got its own row.
    assert cosine_distance(whole[0], whole[1]) > 10 * SHAPE_COSINE
    again = read(reusing, prompts[1], labels)
    assert again.cached_tokens == len(prompts[1])  # its resident entry, no decode
    assert np.array_equal(again.hidden_state, batched[1].hidden_state)


def test_a_prompt_resident_without_its_state_is_evaluated_again_for_it(make_llama: Callable, tokenizer) -> None:
    backend = make_llama()
    labels = label_ids(tokenizer, [" A", " B", " C"])
    ids = chat_prefix(tokenizer, uuid.uuid4().hex, turns=2) + question_suffix(tokenizer, QUESTIONS[2])
    plain = read(backend, ids, labels, hidden=False)
    found = read(backend, ids, labels)
    assert found.cached_tokens == len(ids) - 1  # the last token evaluated again
    assert found.hidden_state is not None
    assert found.logprobs == pytest.approx(plain.logprobs, abs=SHAPE_TOLERANCE)
    assert cosine_distance(found.hidden_state, read(make_llama(), ids, labels).hidden_state) < SHAPE_COSINE
    # Now resident with its state: answered from the entry, the same vector.
    again = read(backend, ids, labels)
    assert again.cached_tokens == len(ids) and np.array_equal(again.hidden_state, found.hidden_state)
