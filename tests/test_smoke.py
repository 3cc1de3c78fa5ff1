"""`openjev smoke` against real openjev servers: one that answers sensibly, one starting, broken ones."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from openjev.answering.debias import CONTENT_FREE_STATE
from openjev.backends.supervised import free_port
from openjev.smoke import CHECKS, SUPPORT_TICKET, run_smoke
from tests.conftest import ServeOpenJev
from tests.fake_sglang import FakeSGLang, Logprobs

ROOT = Path(__file__).resolve().parents[1]


def judging_logprobs(tokenizer_dir: Path, *, sensible: bool) -> Logprobs:
    """Label logprobs of a model that reads the prompt: sensible ones favour "Yes" and the option about
    payments; the others favour "No" and the last option. Over the content-free state, none."""
    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))

    def logprobs(input_ids: Sequence[int], token_ids: Sequence[int]) -> list[float]:
        prompt = tokenizer.decode(list(input_ids), skip_special_tokens=False)
        question = prompt.rsplit("<|im_start|>user", 1)[-1]
        labels = [tokenizer.decode([token_id]) for token_id in token_ids]
        if prompt.startswith(f"<|im_start|>user\n{CONTENT_FREE_STATE}<|im_end|>"):
            return [-1.0] * len(labels)  # no state to judge: no preference
        if sorted(labels) == ["No", "Yes"]:
            favourite = "Yes" if sensible else "No"
        else:
            about_payments = [label for label in labels if re.search(rf"^{label}: .*payment", question, re.M | re.I)]
            favourite = (about_payments or [None])[0] if sensible else labels[-1]
        return [-0.05 if label == favourite else -4.0 for label in labels]

    return logprobs


def smoke_cli(url: str, *args: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    report_path = tmp_path / "smoke-result.json"
    environment = {name: value for name, value in os.environ.items() if name != "OPENJEV_API_KEY"}
    result = subprocess.run(
        [sys.executable, "-m", "openjev", "smoke", url, "--json", str(report_path), *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    return result, report


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in report["checks"]}


def test_the_example_is_the_repository_example() -> None:
    assert json.loads((ROOT / "examples" / "request.json").read_text()) == SUPPORT_TICKET


def test_smoke_passes_against_a_sensible_openjev(
    serve_openjev: ServeOpenJev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path, tmp_path: Path
) -> None:
    fake_sglang.logprobs = judging_logprobs(qwen_tokenizer_dir, sensible=True)
    server = serve_openjev(
        "--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env={"OPENJEV_API_KEY": "smoke-key"}
    )
    result, report = smoke_cli(server.url, "--api-key", "smoke-key", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert report is not None and report["ok"] is True
    checks = by_name(report)
    assert list(checks) == [name for name, _ in CHECKS]
    assert {check["status"] for name, check in checks.items() if name != "images"} == {"passed"}, checks
    assert checks["images"]["status"] == "skipped"  # the fake model reads text only
    assert report["startup"] == {**report["startup"], "ready": True, "attempts": 1, "http_status": 200}
    example = checks["example"]
    assert example["message"].startswith("refund 0.9") and "department billing" in example["message"]
    assert example["latency_seconds"] > 0 and example["http_status"] == 200
    # The Python frontend reports cache hits: the startup probe sent the same request before.
    assert example["cached_tokens"] > 0 and example["prefix_tokens"] > 0
    assert checks["choice_256_rejected"]["http_status"] == 422
    assert checks["questions_201_rejected"]["http_status"] == 422
    assert "zstd" in checks["sdk"]["message"]
    decisions = checks["decisions"]
    assert decisions["message"].startswith("parsed by openai's Decision; refund 0.9"), decisions
    assert "department billing" in decisions["message"] and decisions["http_status"] == 200
    assert checks["auth"]["http_status"] == 401
    assert "PASS" in result.stdout and "example" in result.stdout


def test_smoke_asks_about_two_pictures_where_images_are_accepted(
    serve_openjev: ServeOpenJev, qwen_tokenizer_dir: Path
) -> None:
    with FakeSGLang(vision=True, tokenizer_path=str(qwen_tokenizer_dir)) as fake:
        server = serve_openjev("--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir))
        images = by_name(run_smoke(server.url, startup_deadline=30).to_dict())["images"]
    assert images["status"] == "passed" and "red picture" in images["message"], images
    assert sum("image_data" in call["body"] for call in fake.generate_calls) >= 4  # two requests, two calls each
    assert fake.violations == []


def test_smoke_waits_for_startup_and_reports_missing_cache_counts_as_null(
    serve_openjev: ServeOpenJev, qwen_tokenizer_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SGLang comes up 2 s after openjev (a cold start); its Rust frontend reports no cached_tokens.
    fake = FakeSGLang(rust_frontend=True, logprobs=judging_logprobs(qwen_tokenizer_dir, sensible=True))
    server = serve_openjev("--connect", fake.url, "--tokenizer", str(qwen_tokenizer_dir), ready=False)
    monkeypatch.setitem(sys.modules, "typesafe_sdk", None)  # not installed: skipped, not failed
    backend_start = threading.Timer(2.0, fake.start)
    backend_start.start()
    try:
        report = run_smoke(server.url, startup_deadline=30)
    finally:
        backend_start.join()
        fake.stop()
    assert report.ok, report.summary()
    assert report.startup.wait_seconds > 1.5 and report.startup.attempts > 2
    checks = {check.name: check for check in report.checks}
    assert checks["example"].cached_tokens is None and checks["example"].prefix_tokens is not None
    assert json.loads(report.to_json())["checks"][0]["cached_tokens"] is None
    assert checks["sdk"].status == "skipped" and "not installed" in checks["sdk"].message
    assert checks["auth"].status == "skipped"


def test_smoke_fails_clearly_on_wrong_answers_and_on_a_failing_backend(
    serve_openjev: ServeOpenJev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path, tmp_path: Path
) -> None:
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir))
    fake_sglang.logprobs = judging_logprobs(qwen_tokenizer_dir, sensible=False)
    result, report = smoke_cli(server.url, tmp_path=tmp_path)
    assert result.returncode == 1
    assert report is not None and report["ok"] is False
    checks = by_name(report)
    assert checks["example"]["status"] == "failed"
    assert "semantic sanity: refund = 0.0" in checks["example"]["message"]
    assert checks["sdk"]["status"] == "failed" and checks["score_10"]["status"] == "passed"
    assert "FAIL" in result.stdout and "semantic sanity" in result.stdout

    def broken(input_ids: Sequence[int], token_ids: Sequence[int]) -> list[float]:
        raise RuntimeError("the GPU fell off the bus")

    fake_sglang.logprobs = broken
    failing = run_smoke(server.url, startup_deadline=10)
    assert not failing.ok
    assert failing.startup.ready and failing.startup.http_status == 502
    outcome = {check.name: check for check in failing.checks}
    assert outcome["example"].status == "failed" and outcome["example"].http_status == 502
    # The backend's own words stay in openjev's log; the client is told the request id.
    assert outcome["example"].message.startswith("expected 200, got HTTP 502 backend_error: the backend failed")
    assert "request id" in outcome["example"].message
    assert outcome["questions_201_rejected"].status == "passed"  # validation needs no backend


def test_smoke_gives_up_on_a_server_that_never_answers(tmp_path: Path) -> None:
    result, report = smoke_cli(f"http://127.0.0.1:{free_port()}", "--startup-deadline", "1", tmp_path=tmp_path)
    assert result.returncode == 1
    assert report is not None and report["ok"] is False and report["checks"] == []
    assert report["startup"]["ready"] is False and report["startup"]["attempts"] >= 2
    assert "no answer within 1s: ConnectError" in report["startup"]["error"]
    assert "NOT READY" in result.stdout


@pytest.mark.embedded
@pytest.mark.timeout(960)  # the server's start may convert the model first (it waits up to 900 s)
def test_smoke_passes_against_the_embedded_backend(serve_openjev: ServeOpenJev) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    server = serve_openjev(timeout=900)
    report = run_smoke(server.url, startup_deadline=60)
    assert report.ok, report.summary()
