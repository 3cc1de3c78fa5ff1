"""The routes in-process (FastAPI's TestClient runs the lifespan): readiness, start-up failure,
admission, model names and the error mapping, on an instant in-process backend."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from openjev.api import create_app
from openjev.api.errors import STATUS, HttpError, status_of
from openjev.backends.base import Backend, BackendError, BackendTimeout, BackendUnavailable, LabelLogprobs, ReadoutCall
from openjev.config import Settings
from openjev.errors import ModelNotFound, NotReady, OpenJevError, Overloaded, RequestRejected
from openjev.examples import support_ticket
from tests.fake_sglang import hashed_logprobs


class InstantBackend(Backend):
    """Answers every readout at once with the fake SGLang's deterministic logprobs."""

    kind = "instant"

    def __init__(self, *, start_gate: threading.Event | None = None, start_error: Exception | None = None) -> None:
        self.start_gate = start_gate
        self.start_error = start_error
        self.calls: list[ReadoutCall] = []

    async def start(self) -> None:
        if self.start_gate is not None:
            await asyncio.to_thread(self.start_gate.wait)
        if self.start_error is not None:
            raise self.start_error

    async def readout(self, call: ReadoutCall) -> LabelLogprobs:
        self.calls.append(call)
        return LabelLogprobs(tuple(hashed_logprobs(call.input_ids, call.label_token_ids)), len(call.input_ids), None)


def settings_for(tokenizer_dir: Path, **overrides: object) -> Settings:
    return Settings(tokenizer=tokenizer_dir, **overrides)  # type: ignore[arg-type]


@pytest.fixture
def ready_client(qwen_tokenizer_dir: Path) -> Iterator[tuple[TestClient, InstantBackend]]:
    backend = InstantBackend()
    with TestClient(create_app(settings_for(qwen_tokenizer_dir), backend)) as client:
        assert _eventually_ready(client)
        yield client, backend


def _eventually_ready(client: TestClient, attempts: int = 200) -> bool:
    for _ in range(attempts):
        if client.get("/health").status_code == 200:
            return True
        threading.Event().wait(0.02)
    return False


def test_example_is_answered_with_one_backend_call_per_readout_plus_warm_up(ready_client) -> None:
    client, backend = ready_client
    # The warm-up and one readout per question: no content-free readout by default.
    first = client.post("/v1/systemone", json=support_ticket())
    assert first.status_code == 200 and first.headers["x-openjev-backend-output-tokens"] == "4" == str(
        len(backend.calls)
    )
    assert first.json()["usage"]["output_tokens"] == 3  # billed: one answer per question
    backend.calls.clear()
    response = client.post("/v1/systemone", json=support_ticket())
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    assert {name: answer["type"] for name, answer in answers.items()} == {
        "refund": "noul",
        "department": "choice",
        "urgency": "score",
    }
    assert len(backend.calls) == 4 and response.headers["x-openjev-backend-output-tokens"] == "4"
    assert response.json()["usage"]["output_tokens"] == 3
    prefix = backend.calls[0].input_ids
    assert all(list(call.input_ids[: len(prefix)]) == list(prefix) for call in backend.calls[1:])
    assert response.headers["x-openjev-prefix-tokens"] == str(len(prefix))
    assert "x-openjev-cached-tokens" not in response.headers  # the backend reports none


def test_not_ready_answers_503_with_retry_after_and_liveness_stays_up(qwen_tokenizer_dir: Path) -> None:
    gate = threading.Event()
    with TestClient(create_app(settings_for(qwen_tokenizer_dir), InstantBackend(start_gate=gate))) as client:
        assert client.get("/health/live").status_code == 200
        health = client.get("/health")
        assert health.status_code == 503 and health.json()["status"] == "starting"
        refused = client.post("/v1/systemone", json=support_ticket())
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert refused.json()["detail"]["error_type"] == "backend_unavailable"
        limits = client.get("/v1/limits").json()
        assert limits["max_input_tokens"] == 32768 and limits["max_total_input_tokens"] == 65536
        # The model's context is not known yet: neither is what the long-context header reaches.
        assert limits["max_input_tokens_long_context"] is None
        gate.set()
        assert _eventually_ready(client)


def test_startup_failure_is_reported_and_handed_to_on_fatal(qwen_tokenizer_dir: Path) -> None:
    fatal: list[BaseException] = []
    backend = InstantBackend(start_error=BackendError("weights missing in /srv/secret"))
    with TestClient(create_app(settings_for(qwen_tokenizer_dir), backend, on_fatal=fatal.append)) as client:
        for _ in range(200):
            if fatal:
                break
            threading.Event().wait(0.02)
        health = client.get("/health").json()
    assert [str(error) for error in fatal] == ["weights missing in /srv/secret"]
    # The reason is logged (with its local path); /health, open to anyone, says only that it failed.
    assert health["status"] == "failed" and "server log" in health["error"]
    assert "/srv/secret" not in json.dumps(health)


def test_admission_refuses_past_the_limit(qwen_tokenizer_dir: Path) -> None:
    app = create_app(settings_for(qwen_tokenizer_dir, max_concurrent_requests=1), InstantBackend())
    with TestClient(app) as client:
        assert _eventually_ready(client)
        with app.state.service.admit():
            refused = client.post("/v1/systemone", json=support_ticket())
            assert client.get("/health").json()["in_flight"] == 1
        assert refused.status_code == 529
        assert (refused.headers["retry-after"], refused.headers["retry-after-ms"]) == ("1", "1000")
        assert client.post("/v1/systemone", json=support_ticket()).status_code == 200


def test_model_names(ready_client) -> None:
    client, _ = ready_client
    names = [entry["name"] for entry in client.get("/v1/models").json()["models"]]
    assert names == ["jev-latest", "Qwen/Qwen3.6-35B-A3B", "gpt-6-luna", "openjev-think"]
    wrong = client.post("/v1/systemone", json={**support_ticket(), "model": "gpt-5"})
    assert wrong.status_code == 404 and wrong.json()["detail"]["error_type"] == "model_not_found"


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (RequestRejected([]), 422),
        (ModelNotFound("m"), 404),
        (NotReady("n"), 503),
        (Overloaded("o"), 529),
        (BackendError("b"), 502),
        (BackendUnavailable("u"), 503),
        (BackendTimeout("t"), 504),
        (HttpError(413, "request_too_large", "big"), 413),
        (OpenJevError("anything else"), 500),
    ],
)
def test_every_error_class_has_one_status(error: OpenJevError, status: int) -> None:
    assert status_of(error) == status


def test_status_table_covers_every_core_error_class() -> None:
    assert set(STATUS) == {
        RequestRejected,
        ModelNotFound,
        NotReady,
        Overloaded,
        BackendError,
        BackendUnavailable,
        BackendTimeout,
    }


def test_limits_name_the_calibration_file_in_force(qwen_tokenizer_dir: Path, tmp_path: Path) -> None:
    calibration = tmp_path / "support-calibration.json"
    calibration.write_text(json.dumps({"format": "openjev-calibration/1", "temperatures": {"choice": {"3-4": 1.5}}}))
    app = create_app(settings_for(qwen_tokenizer_dir, calibration_file=calibration), InstantBackend())
    with TestClient(app) as client:
        assert _eventually_ready(client)
        limits = client.get("/v1/limits").json()
        assert limits["calibration_file"] == "support-calibration.json"
        assert limits["answer_settings"] == {
            "answer_cue": "plain", "option_shifts": 1, "rotation_average": "probability", "rotation_skip_above": 0.5,
            "option_keys": False, "option_order": "given", "temperature": 1.0,
            "score_temperature": None, "confidence": "typesafe",
            "calibration_sha256": hashlib.sha256(calibration.read_bytes()).hexdigest(),
            "answer_cue_noul": "plain", "answer_cue_choice": "plain", "answer_cue_score": "plain",
            "score_labels": "letters", "score_reverse": False, "contextual_calibration": "",
            "worked_examples": "block",
            "think_margin": 0.5, "think_max_share": 0.2, "think_window": 1000, "think_budget_tokens": None,
        }  # fmt: skip
    other = {
        "answer_cue": "json", "option_shifts": 4, "rotation_average": "log", "rotation_skip_above": 1.0,
        "temperature": 0.5, "confidence": "entropy", "option_order": "canonical",
        "answer_cue_noul": "plain", "score_labels": "digits", "score_reverse": True, "worked_examples": "lines",
        "contextual_calibration": "score,noul", "think_margin": 2.0, "think_max_share": 1.0, "think_budget_tokens": 8,
    }  # fmt: skip
    with TestClient(create_app(settings_for(qwen_tokenizer_dir, **other), InstantBackend())) as client:
        assert _eventually_ready(client)
        limits = client.get("/v1/limits").json()
        assert limits["calibration_file"] is None
        assert limits["answer_settings"] == {
            "answer_cue": "json", "option_shifts": 4, "rotation_average": "log", "rotation_skip_above": 1.0,
            "option_keys": False, "option_order": "canonical", "temperature": 0.5,
            "score_temperature": None, "confidence": "entropy", "calibration_sha256": None,
            "answer_cue_noul": "plain", "answer_cue_choice": "json", "answer_cue_score": "json",
            "score_labels": "digits", "score_reverse": True, "contextual_calibration": "noul,score",
            "worked_examples": "lines",
            "think_margin": 2.0, "think_max_share": 1.0, "think_window": 1000, "think_budget_tokens": 8,
        }  # fmt: skip


def test_the_door_lets_every_documented_route_through(qwen_tokenizer_dir: Path) -> None:
    """Each path and method of the OpenAPI document reaches its route, whichever router declares it."""
    app = create_app(settings_for(qwen_tokenizer_dir), InstantBackend())
    with TestClient(app) as client:
        for path, methods in app.openapi()["paths"].items():
            concrete = path.replace("{task_id}", "absent").replace("{identifier}", "absent")
            for method in methods:
                response = client.request(method.upper(), concrete)
                assert response.status_code != 405, (method, path)
                assert response.status_code != 404 or "task" in path, (method, path, response.text)
