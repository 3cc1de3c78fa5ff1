"""The SGLang backend never sends what SGLang 0.5.19 refuses or crashes on, and never trusts what it
answers: prompt length below the scheduler's limit, ids inside the vocabulary, malformed answers
reported as backend errors (HTTP 502)."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.responses import JSONResponse

from openjev.backends.base import BackendError, BackendUnavailable, ReadoutCall
from openjev.backends.sglang import SGLangBackend
from openjev.backends.sglang_answers import parse_label_logprobs
from openjev.backends.sglang_facts import admissible_budget
from openjev.config import Settings
from openjev.engine import Engine
from openjev.prompting.tokenizer import ChatTokenizer
from openjev.request.schema import SystemOneRequest
from tests.fake_sglang import VOCAB_SIZE, FakeSGLang
from tests.fake_sglang.rules import judge


def with_backend(fake: FakeSGLang, action: Callable[[SGLangBackend], Awaitable[Any]], **options: Any) -> Any:
    """Start a backend on `fake`, run `action` with it, close it: one event loop for all three."""

    async def session() -> Any:
        backend = SGLangBackend(fake.url, **options)
        try:
            await backend.start()
            return await action(backend)
        finally:
            await backend.aclose()

    return asyncio.run(session())


def readout(input_ids: list[int], labels: tuple[int, ...] = (19, 20)) -> Callable[[SGLangBackend], Awaitable[Any]]:
    async def call(backend: SGLangBackend) -> Any:
        return backend, await backend.readout(ReadoutCall(f"r{len(input_ids)}", input_ids, labels))

    return call


async def nothing(backend: SGLangBackend) -> None:
    return None


@pytest.mark.parametrize(
    ("rust", "context", "kv", "budget"),
    [(False, 100, 1_000_000, 94), (True, 100, 1_000_000, 94), (False, 100, 50, 44), (True, 100, 50, 44)],
)
def test_context_length_is_the_scheduler_limit(rust: bool, context: int, kv: int, budget: int) -> None:
    # Python frontend: /server_info's max_req_input_len; Rust: derived from max_model_len and the KV pool.
    assert admissible_budget(context, kv) == budget
    with FakeSGLang(rust_frontend=rust, context_length=context, max_total_num_tokens=kv) as fake:
        backend, answer = with_backend(fake, readout([7] * (budget - 1)))
        assert backend.context_length == budget
        # The longest prompt the engine admits (budget - 1 tokens plus one output) is served...
        assert answer.prompt_tokens == budget - 1
        assert fake.violations == []
        # ...and one token more is what SGLang 0.5.19 refuses (a crash on the Python frontend).
        outcome = judge(
            {"input_ids": [7] * budget, "sampling_params": {"max_new_tokens": 1}},
            rust=rust,
            context_length=context,
            max_total_num_tokens=kv,
        )
        assert outcome is not None and outcome.crash is not rust


def test_ready_only_after_a_real_generation() -> None:
    # /health is 200 at once (Rust frontend); the first generation fails: openjev waits for one to succeed.
    with FakeSGLang(rust_frontend=True, fail_on_call=1, fail_status=503) as fake:
        with_backend(fake, nothing, startup_timeout=10)
        assert len(fake.generate_calls) == 2 and fake.violations == []


def test_no_context_length_means_not_ready() -> None:
    expected = pytest.raises(BackendUnavailable, match="no usable context length")
    with FakeSGLang(report_limits=False) as fake, expected:
        with_backend(fake, nothing, startup_timeout=1)


class SpeculativeSGLang(FakeSGLang):
    """The fake as SGLang 0.5.19's Python frontend reports a server launched with speculative decoding."""

    async def _server_info(self, request: Any) -> Any:
        response = await super()._server_info(request)
        return JSONResponse({**json.loads(response.body), "speculative_algorithm": "NEXTN"})


def test_a_connected_sglang_with_speculative_decoding_is_refused_naming_it() -> None:
    expected = pytest.raises(BackendUnavailable, match="speculative_algorithm='NEXTN'")
    with SpeculativeSGLang() as fake, expected:
        with_backend(fake, nothing, startup_timeout=1)


@pytest.mark.parametrize("bad", [[5, VOCAB_SIZE, 7], [-1, 5]])
def test_out_of_vocabulary_input_ids_never_reach_sglang(bad: list[int]) -> None:
    with FakeSGLang() as fake:

        async def check(backend: SGLangBackend) -> None:
            assert backend.vocab_size == VOCAB_SIZE  # from config.json in /model_info's model_path
            calls = len(fake.generate_calls)
            with pytest.raises(BackendError, match="outside the model's vocabulary"):
                await readout(bad)(backend)
            assert len(fake.generate_calls) == calls

        with_backend(fake, check)
        assert fake.violations == []


def test_out_of_vocabulary_label_ids_never_reach_sglang() -> None:
    with FakeSGLang() as fake:
        with pytest.raises(BackendError, match="label token id"):
            with_backend(fake, readout([5, 6], (19, VOCAB_SIZE + 3)))
        assert fake.violations == []


def test_unknown_vocabulary_size_means_not_ready() -> None:
    expected = pytest.raises(BackendUnavailable, match="OPENJEV_BACKEND_VOCAB_SIZE")
    with FakeSGLang(model_path="/nonexistent/model") as fake, expected:
        with_backend(fake, nothing, startup_timeout=1)


def test_a_configured_vocabulary_size_stands_in_for_an_unreadable_config() -> None:
    with FakeSGLang(model_path="/nonexistent/model") as fake:

        async def check(backend: SGLangBackend) -> None:
            assert backend.vocab_size == 1000
            with pytest.raises(BackendError, match="outside the model's vocabulary of 1000 ids"):
                await readout([5, 1000])(backend)

        with_backend(fake, check, vocab_size=1000)
        assert fake.violations == []


CALL = ReadoutCall("r", [1, 2, 3], [19, 20])
GOOD: dict[str, Any] = {
    "meta_info": {"output_token_ids_logprobs": [[[-0.5, 19, None], [-1.5, 20, None]]], "prompt_tokens": 3}
}


def meta(**changes: Any) -> dict[str, Any]:
    return {"meta_info": {**GOOD["meta_info"], **changes}}


def position(*entries: Any) -> dict[str, Any]:
    return meta(output_token_ids_logprobs=[list(entries)])


MALFORMED = {
    "meta_info list": {"meta_info": []},
    "meta_info string": {"meta_info": "x"},
    "body list": [GOOD],
    "cached_tokens string": meta(cached_tokens="abc"),
    "cached_tokens list": meta(cached_tokens=[1]),
    "cached_tokens negative": meta(cached_tokens=-1),
    "prompt_tokens negative": meta(prompt_tokens=-3),
    "prompt_tokens float": meta(prompt_tokens=2.5),
    "logprob positive": position([50.0, 19, None], [-1.0, 20, None]),
    "logprob 1e308": position([1e308, 19, None], [-1.0, 20, None]),
    "logprob -1e308": position([-1e308, 19, None], [-1.0, 20, None]),
    "logprob NaN": position([math.nan, 19, None], [-1.0, 20, None]),
    "logprob null": position([None, 19, None], [-1.0, 20, None]),
    "logprob string": position(["-1", 19, None], [-1.0, 20, None]),
    "logprob bool": position([False, 19, None], [-1.0, 20, None]),
    "label missing": position([-1.0, 19, None]),
    "label id string": position([-1.0, "19", None], [-1.0, 20, None]),
    "entry dict": position({"a": 1}, [-1.0, 20, None]),
    "no position": meta(output_token_ids_logprobs=[]),
    "aborted": meta(finish_reason={"type": "abort", "message": "x"}),
}


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_answers_are_backend_errors(body: Any) -> None:
    with pytest.raises(BackendError):
        parse_label_logprobs(body, CALL)


def test_well_formed_answers_parse() -> None:
    assert parse_label_logprobs(GOOD, CALL).logprobs == (-0.5, -1.5)
    float32_min = position([-3.4028234663852886e38, 19, None], [0.0, 20, None])
    assert parse_label_logprobs(float32_min, CALL).logprobs == (-3.4028234663852886e38, 0.0)
    assert parse_label_logprobs(meta(cached_tokens=2), CALL).cached_tokens == 2


@pytest.mark.parametrize(("vocab_size", "vouched"), [(1000, False), (VOCAB_SIZE, True)])
def test_the_engine_vouches_for_its_ids_only_when_its_tokenizer_fits_the_model(
    qwen_tokenizer_dir: Path, vocab_size: int, vouched: bool
) -> None:
    chat = ChatTokenizer(qwen_tokenizer_dir)
    request = SystemOneRequest.model_validate(
        {"model": "jev-latest", "state": "héllo wörld", "questions": {"q": {"type": "noul", "instructions": "Ok?"}}}
    )

    async def check(backend: SGLangBackend) -> None:
        engine = Engine(Settings(), chat, backend)
        assert engine.reader.ids_in_vocabulary is vouched
        calls = len(fake.generate_calls)
        if vouched:
            await engine.evaluate(engine.prepare(request))
            assert len(fake.generate_calls) == calls + 2
        else:  # Qwen's ids go past 1000: refused here, never sent
            with pytest.raises(BackendError, match="outside the model's vocabulary of 1000 ids"):
                await engine.evaluate(engine.prepare(request))
            assert len(fake.generate_calls) == calls

    with FakeSGLang(model_path="/nonexistent/model") as fake:
        with_backend(fake, check, vocab_size=vocab_size)
        assert fake.violations == []
