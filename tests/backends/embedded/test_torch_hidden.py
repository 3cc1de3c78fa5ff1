"""Hidden states read with the label logprobs on the torch runtime (`EmbeddedBackend`, the real packaged
test model in float32).

The hidden state is the decoder's output after its final norm at the prompt's last token: the vector
the output head reads. Checked against that definition (the head applied to it gives the returned
logprobs; transformers' own whole-prompt forward, no cache, gives the same vector), and for what a
head relies on: returned only where a readout asks, the same vector whether the prompt is run whole,
over a cached prefix, as one of several branches, or answered again from the cache; an entry a
generation stored without one is not taken for one.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import numpy as np
import pytest

from openjev.backends.base import GenerationCall, LabelLogprobs, ReadoutCall
from openjev.backends.embedded import EmbeddedBackend
from tests.backends.embedded.test_backend import QUESTIONS, chat_prefix, label_ids, question_suffix

pytestmark = pytest.mark.embedded

#: The largest cosine distance between float32 runs of one prompt split differently (whole, over a
#: prefix, packed with other branches); the state one position earlier must be over 100 times as far.
COSINE = 1e-4


def read(backend: EmbeddedBackend, ids: list[int], labels: Sequence[int], hidden: bool = True) -> LabelLogprobs:
    return asyncio.run(backend.readout(ReadoutCall(uuid.uuid4().hex, ids, labels, hidden_state=hidden)))


def cosine_distance(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)  # float32 rounds a cosine this close to 1 to 1.0
    return 1.0 - float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_the_hidden_state_is_what_the_output_head_reads(make_backend, tokenizer) -> None:
    import torch

    backend = make_backend(dtype="float32")
    assert backend.hidden_states.public() == {"available": True, "layer": "final", "enable": None}
    assert asyncio.run(backend.health()).detail["hidden_states"] == "final"
    ids = chat_prefix(tokenizer, uuid.uuid4().hex, turns=2) + question_suffix(tokenizer, QUESTIONS[0])
    labels = label_ids(tokenizer, [" A", " B", " C"])
    plain = read(backend, ids, labels, hidden=False)
    assert plain.hidden_state is None  # not asked: none
    found = read(make_backend(dtype="float32"), ids, labels)
    state = found.hidden_state
    lm = backend._lm
    assert state is not None and state.dtype == np.float32 and state.shape == (lm.config.hidden_size,)
    assert found.logprobs == pytest.approx(plain.logprobs, abs=1e-5)
    with torch.inference_mode():
        head = torch.log_softmax(lm.get_output_embeddings()(torch.from_numpy(state)).float(), dim=-1)
        whole = lm.get_decoder()(input_ids=torch.tensor([ids])).last_hidden_state[0, -1].float().numpy()
        before_last = lm.get_decoder()(input_ids=torch.tensor([ids[:-1]])).last_hidden_state[0, -1].float().numpy()
    assert head[labels].tolist() == pytest.approx(list(found.logprobs), abs=1e-5)
    assert cosine_distance(state, whole) < COSINE
    # Another position's state is far: the check can tell a wrong row.
    assert cosine_distance(state, before_last) > 100 * COSINE


def test_the_same_state_over_a_prefix_in_a_batch_and_from_the_cache(make_backend, tokenizer) -> None:
    labels = label_ids(tokenizer, [" A", " B", " C"])
    prefix = chat_prefix(tokenizer, uuid.uuid4().hex, turns=3)
    branches = [prefix + question_suffix(tokenizer, question) for question in QUESTIONS]
    whole = [read(make_backend(dtype="float32", prefix_cache_bytes=0), ids, labels).hidden_state for ids in branches]

    backend = make_backend(dtype="float32")
    read(backend, prefix, labels, hidden=False)  # the warm-up

    async def together() -> list[LabelLogprobs]:
        calls = [ReadoutCall(uuid.uuid4().hex, ids, labels, hidden_state=True) for ids in branches]
        return list(await asyncio.gather(*(backend.readout(call) for call in calls)))

    batched = asyncio.run(together())
    assert asyncio.run(backend.health()).detail["batched_readouts"] == len(branches)
    assert [answer.cached_tokens for answer in batched] == [len(prefix)] * len(branches)
    for answer, reference in zip(batched, whole, strict=True):
        assert cosine_distance(answer.hidden_state, reference) < COSINE
    # Asked again: answered from the cached entries, with their states.
    again = read(backend, branches[1], labels)
    assert again.cached_tokens == len(branches[1])
    assert np.array_equal(again.hidden_state, batched[1].hidden_state)
    # A generation stores its prompt and output without a state: a readout of exactly that asks the
    # last token again over the longest shorter prefix (the warm-up's).
    generated = asyncio.run(backend.generate(GenerationCall(uuid.uuid4().hex, prefix, 2, ())))
    spoken = prefix + list(generated.output_ids[:1])
    assert read(backend, spoken, labels, hidden=False).cached_tokens == len(spoken)  # the generation's entry
    found = read(backend, spoken, labels)
    fresh = read(make_backend(dtype="float32", prefix_cache_bytes=0), spoken, labels)
    assert found.cached_tokens == len(prefix)
    assert cosine_distance(found.hidden_state, fresh.hidden_state) < COSINE
    assert found.logprobs == pytest.approx(fresh.logprobs, abs=1e-4)
