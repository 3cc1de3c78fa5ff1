"""Hidden states with SGLang readouts, against the fake SGLang (0.5.19's `return_hidden_states` rules).

Only a readout that asks sends `return_hidden_states` ("last"; one entry per readout in the list form);
every other body stays the plain readout's. A server launched without the mode is known from its
`/server_info` and the backend refuses before sending; an answer without a well-formed state is a
BackendError. /health and /v1/limits say whether hidden states are served and name the flag if not.
"""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest

from openjev.backends.base import BackendError, HiddenStatesUnavailable, ReadoutCall
from openjev.backends.sglang import SGLangBackend
from openjev.backends.sglang_hidden import server_support
from tests.backends.test_sglang_limits import with_backend
from tests.conftest import ServeOpenJev
from tests.fake_sglang import FakeSGLang
from tests.fake_sglang.hidden import NOT_CONFIGURED, WIDTH, hidden_state

PROMPTS = [[11, 12, 13, 14], [11, 12, 13, 99, 98], [7, 7, 7]]


def calls(asked: list[bool]) -> list[ReadoutCall]:
    return [ReadoutCall(f"h{i}", PROMPTS[i], (19, 20), hidden_state=ask) for i, ask in enumerate(asked)]


def bodies(fake: FakeSGLang) -> list[dict[str, Any]]:
    return [post["body"] for post in fake.generate_posts]


def test_a_readout_that_asks_gets_the_state_and_only_it_sends_the_key() -> None:
    with FakeSGLang(hidden_states_mode="last") as fake:

        async def action(backend: SGLangBackend) -> Any:
            assert backend.hidden_states.available
            one = await backend.readout(calls([True])[0])
            plain = await backend.readout(calls([False])[0])
            return one, plain

        one, plain = with_backend(fake, action)
        assert one.hidden_state is not None and one.hidden_state.dtype == np.float32
        assert one.hidden_state.tolist() == pytest.approx(hidden_state(PROMPTS[0]), abs=1e-6)
        assert len(one.hidden_state) == WIDTH and plain.hidden_state is None
        assert one.logprobs == plain.logprobs
        asked, unasked = bodies(fake)[-2:]
        assert asked["return_hidden_states"] == "last" and "return_hidden_states" not in unasked
        assert fake.violations == []


def test_a_batch_asks_per_readout_in_the_list_form() -> None:
    with FakeSGLang(hidden_states_mode="last") as fake:

        async def action(backend: SGLangBackend) -> Any:
            mixed = await backend.readout_batch(calls([True, False, True]))
            plain = await backend.readout_batch(calls([False, False, False]))
            return mixed, plain

        mixed, plain = with_backend(fake, action)
        assert [found.hidden_state is None for found in mixed] == [False, True, False]
        for index in (0, 2):
            assert mixed[index].hidden_state.tolist() == pytest.approx(hidden_state(PROMPTS[index]), abs=1e-6)
        assert not np.allclose(mixed[0].hidden_state, mixed[2].hidden_state)
        assert [found.logprobs for found in mixed] == [found.logprobs for found in plain]
        asked, unasked = bodies(fake)[-2:]
        assert asked["return_hidden_states"] == ["last", False, "last"]
        assert "return_hidden_states" not in unasked
        assert fake.violations == []


@pytest.mark.parametrize("rust", [False, True])
def test_a_server_without_the_mode_is_refused_before_anything_is_sent(rust: bool) -> None:
    with FakeSGLang(rust_frontend=rust, hidden_states_mode=None if not rust else "last") as fake:

        async def action(backend: SGLangBackend) -> Any:
            support = backend.hidden_states
            sent = len(fake.generate_posts)
            with pytest.raises(HiddenStatesUnavailable, match="--return-hidden-states-mode last"):
                await backend.readout_batch(calls([False, True]))
            assert len(fake.generate_posts) == sent
            return support

        support = with_backend(fake, action)
        # The Rust frontend's /server_info lists no server args: never taken as allowing it.
        assert not support.available and "--return-hidden-states-mode last" in (support.enable or "")


def test_the_fake_refuses_a_request_asking_without_the_mode() -> None:
    with FakeSGLang() as fake:
        readout = {"rid": "x", "input_ids": [1, 2], "sampling_params": {"max_new_tokens": 1, "temperature": 0}}
        logprobs = {"return_logprob": True, "logprob_start_len": -1, "token_ids_logprob": [3]}
        body = {**readout, **logprobs, "return_hidden_states": "last"}
        response = httpx.post(f"{fake.url}/generate", json=body)
        assert response.status_code == 400 and response.json()["error"]["message"] == NOT_CONFIGURED
        fake.violations.clear()


@pytest.mark.parametrize("state", [None, [], ["x"], [[1.0, 2.0]]])
def test_an_answer_without_a_flat_finite_state_is_a_backend_error(state: Any) -> None:
    def mangle(answer: dict[str, Any]) -> dict[str, Any]:
        if "hidden_states" in answer["meta_info"]:
            answer["meta_info"]["hidden_states"] = state
        return answer

    with FakeSGLang(hidden_states_mode="last") as fake:
        fake.mangle = mangle

        async def action(backend: SGLangBackend) -> Any:
            with pytest.raises(BackendError, match="hidden state"):
                await backend.readout(calls([True])[0])

        with_backend(fake, action)


def test_health_and_limits_say_whether_hidden_states_are_served(
    serve_openjev: ServeOpenJev, qwen_tokenizer_dir: Any
) -> None:
    with FakeSGLang() as plain, FakeSGLang(hidden_states_mode="last") as allowing:
        for fake, available in ((plain, False), (allowing, True)):
            server = serve_openjev("--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir))
            limits = httpx.get(f"{server.url}/v1/limits", timeout=10).json()["hidden_states"]
            health = httpx.get(f"{server.url}/health", timeout=10).json()["hidden_states"]
            assert limits == health
            assert limits["available"] is available and limits["layer"] == "final"
            assert (limits["enable"] is None) is available
            if not available:
                assert "--return-hidden-states-mode last" in limits["enable"]


def test_a_release_whose_http_layer_refuses_last_is_taken_as_without_hidden_states() -> None:
    """0.5.23's Rust HTTP layer refuses `"return_hidden_states": "last"` (read on the live suite): from it
    on, hidden states are unavailable, the refusal naming the release that serves them."""
    assert server_support({"return_hidden_states_mode": "last", "version": "0.5.19"}).available
    refused = server_support({"return_hidden_states_mode": "last", "version": "0.5.23"})
    assert not refused.available and "0.5.19" in str(refused.enable) and '"last"' in str(refused.enable)
    assert not server_support({"return_hidden_states_mode": "last", "version": "0.6.0rc1"}).available
