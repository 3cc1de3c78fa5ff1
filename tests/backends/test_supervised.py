"""`openjev serve --sglang-python`: a real openjev process supervising the stand-in SGLang interpreter."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from openjev.backends.supervised import redacted, sglang_command, sglang_environment
from openjev.config import Settings
from openjev.examples import support_ticket
from openjev.options import SGLANG_FLAGS_SET_BY_OPENJEV, Frontend
from tests.conftest import RunningOpenJev, ServeOpenJev, eventually, wait_for
from tests.fake_sglang import payloads

STAND_IN = Path(__file__).resolve().parents[1] / "stand_in_sglang.py"
EXAMPLE = support_ticket()


def process_gone(pid: int) -> bool:
    """True when `pid` no longer runs (an unreaped zombie counts as gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return True
    except OSError:  # pragma: no cover - no /proc
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return fields[0] == "Z"


def exit_code(server: RunningOpenJev, timeout: float) -> int:
    try:
        return server.process.wait(timeout=timeout)
    except Exception as error:
        raise AssertionError(f"openjev still running after {timeout}s\n--- log ---\n{server.log()}") from error


class StandIn:
    """The stand-in interpreter's side of a test: its executable and what it recorded."""

    def __init__(self, directory: Path) -> None:
        self.python = directory / "sglang-env" / "bin" / "python"
        self.record_path = directory / "stand-in.json"
        self.python.parent.mkdir(parents=True)
        self.python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STAND_IN}" "$@"\n')
        self.python.chmod(self.python.stat().st_mode | stat.S_IEXEC)

    def violations(self) -> list[str]:
        path = Path(f"{self.record_path}.violations")
        return path.read_text().splitlines() if path.exists() else []

    def record(self) -> dict[str, Any]:
        assert eventually(self.record_path.exists, 10), "the stand-in SGLang never started"
        return json.loads(self.record_path.read_text())

    def flags(self) -> dict[str, str | None]:
        """`--flag value` pairs; a flag without a value (a switch) maps to None."""
        argv = self.record()["argv"]
        assert argv[:2] == ["-m", "sglang.launch_server"]
        flags: dict[str, str | None] = {}
        for index, part in enumerate(argv[2:], 2):
            if part.startswith("--"):
                value = argv[index + 1] if index + 1 < len(argv) else None
                flags[part] = None if value is None or value.startswith("--") else value
        return flags

    def url(self) -> str:
        return f"http://127.0.0.1:{self.flags()['--port']}"


@pytest.fixture
def stand_in(tmp_path: Path) -> Iterator[StandIn]:
    stand_in = StandIn(tmp_path)
    yield stand_in
    assert stand_in.violations() == [], f"requests that would break a real SGLang: {stand_in.violations()}"


@pytest.fixture
def supervised(serve_openjev: ServeOpenJev, stand_in: StandIn, qwen_tokenizer_dir: Path) -> Any:
    def start(*args: str, mode: str = "ready", env: dict[str, str] | None = None, **kwargs: Any) -> RunningOpenJev:
        # A scratch Hugging Face cache: the stand-in leaves the model's config.json there, as SGLang would.
        environment = {
            "STAND_IN_RECORD": str(stand_in.record_path), "STAND_IN_MODE": mode,
            "HF_HOME": str(stand_in.record_path.parent / "hf-home"), **(env or {}),
        }  # fmt: skip
        return serve_openjev(
            "--sglang-python", str(stand_in.python), "--tokenizer", str(qwen_tokenizer_dir), *args,
            env=environment, **kwargs,
        )  # fmt: skip

    return start


# -- the launch command, as a pure function ---------------------------------------------------------


def test_command_without_optional_flags(tmp_path: Path) -> None:
    settings = Settings(sglang_python=tmp_path / "python", frontend=Frontend.python)
    command = sglang_command(settings, 31234, tmp_path)
    payloads.record_command(command[3:])
    assert command[:3] == [str(tmp_path / "python"), "-m", "sglang.launch_server"]
    assert "--revision" not in command and "--api-key" not in command
    assert "--disable-radix-cache" not in command
    # The vision tower stays on: a `--language-model-only` SGLang refuses every image.
    assert not any("language-model-only" in flag for flag in command)
    assert "--skip-server-warmup" in command
    command.remove("--skip-server-warmup")
    flags = dict(zip(command[3::2], command[4::2], strict=True))
    assert flags["--model-path"] == "nvidia/Qwen3.6-35B-A3B-NVFP4"
    assert flags["--served-model-name"] == "Qwen/Qwen3.6-35B-A3B"
    assert sglang_environment(settings)["SGLANG_RUST_SERVER"] == "0"
    assert redacted(["x", "--api-key", "secret", "--port", "1"]) == ["x", "--api-key", "REDACTED", "--port", "1"]


def test_extra_sglang_args_are_appended_and_may_not_take_openjev_flags(tmp_path: Path) -> None:
    extra = "--device cpu --attention-backend torch_native --json-model-override-args '{\"a\": 1}'"
    settings = Settings(sglang_python=tmp_path / "python", sglang_args=extra)
    command = sglang_command(settings, 31234, tmp_path)
    payloads.record_command(command[3:])
    assert command[-6:] == [
        "--device",
        "cpu",
        "--attention-backend",
        "torch_native",
        "--json-model-override-args",
        '{"a": 1}',
    ]
    for taken in ("--port 9", "--context-length=8", "--context-len 8", "--api-key k", "--model x", "--skip-server"):
        with pytest.raises(ValueError, match="may not set --"):
            Settings(sglang_args=taken)
    with pytest.raises(ValueError, match="shell quoting"):
        Settings(sglang_args="--device 'cpu")


def test_every_flag_carrying_an_openjev_setting_is_protected(tmp_path: Path) -> None:
    settings = Settings(sglang_python=tmp_path / "python", revision="r", backend_api_key="k")
    own = {part for part in sglang_command(settings, 31234, tmp_path) if part.startswith("--")}
    # Only the tuning flag may be overridden by OPENJEV_SGLANG_ARGS.
    assert own - SGLANG_FLAGS_SET_BY_OPENJEV == {"--cuda-graph-backend-prefill"}


def test_sglang_runs_at_the_models_context_unless_the_operator_caps_long_contexts(tmp_path: Path) -> None:
    """The long-context header reaches the model's context by default: no `--context-length` below it."""
    assert "--context-length" not in sglang_command(Settings(sglang_python=tmp_path / "python"), 31234, tmp_path)
    capped = sglang_command(Settings(sglang_python=tmp_path / "python", max_long_context_tokens=65536), 1, tmp_path)
    assert capped[capped.index("--context-length") + 1] == "65536"


# -- flags, environment, logs -----------------------------------------------------------------------


def test_flags_environment_and_logs_reach_sglang(supervised: Any, stand_in: StandIn, qwen_tokenizer_dir: Path) -> None:
    server = supervised(
        "--model", "org/weights-NVFP4", "--revision", "abc123", "--served-model-name", "acme/model",
        "--max-long-context-tokens", "20000", "--frontend", "python",
        env={"OPENJEV_BACKEND_API_KEY": "backend-secret"},
    )  # fmt: skip
    flags = stand_in.flags()
    assert flags == {
        "--model-path": "org/weights-NVFP4",
        "--revision": "abc123",
        "--tokenizer-path": str(qwen_tokenizer_dir),
        "--served-model-name": "acme/model",
        "--host": "127.0.0.1",
        "--port": flags["--port"],
        "--context-length": "20000",
        "--skip-server-warmup": None,
        "--cuda-graph-backend-prefill": "breakable",
        "--api-key": "backend-secret",
    }
    assert stand_in.record()["env"] == {
        "SGLANG_RUST_SERVER": "0",
        "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "0",
        "PYTHONUNBUFFERED": "1",
    }
    # The Python frontend enforces the key: answering proves the API sends it.
    with server.client() as client:
        response = client.post("/v1/systemone", json=EXAMPLE)
        assert response.status_code == 200, response.text
        assert response.json()["model"] == "acme/model"
        # SGLang's scheduler refuses prompts of context length - 6 tokens or more (its max_req_input_len).
        assert client.get("/v1/limits").json()["max_input_tokens"] == 20000 - 6
    log = server.log()
    assert "[sglang] stand-in SGLang listening on" in log
    assert "[sglang] stand-in SGLang: a line on stderr" in log
    assert "--api-key REDACTED" in log and "backend-secret" not in log


# -- readiness --------------------------------------------------------------------------------------


def test_readiness_waits_for_sglang(supervised: Any, stand_in: StandIn) -> None:
    # Rust frontend: nothing listens until SGLang's scheduler is up; openjev answers 503 meanwhile.
    server = supervised(mode="slow", env={"STAND_IN_DELAY": "2"}, ready=False)
    assert stand_in.record()["env"]["SGLANG_RUST_SERVER"] == "1"  # the default frontend
    with server.client() as client:
        assert client.get("/health/live").status_code == 200
        health = client.get("/health")
        assert health.status_code == 503 and health.headers["retry-after"] == "1"
        assert health.json()["status"] == "starting"
        answer = client.post("/v1/systemone", json=EXAMPLE)
        assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
        assert answer.json()["detail"]["error_type"] == "backend_unavailable"

        wait_for(f"{server.url}/health", timeout=20, process=server.process)
        body = client.get("/health").json()
        assert body["ready"] is True and body["backend"]["kind"] == "sglang-supervised"
        assert body["startup_seconds"] >= 1.5
        assert client.post("/v1/systemone", json=EXAMPLE).status_code == 200


# -- supervision ------------------------------------------------------------------------------------


def test_crash_during_startup_exits_nonzero(supervised: Any) -> None:
    server = supervised(mode="crash", env={"STAND_IN_DELAY": "1"}, ready=False)
    assert exit_code(server, 15) == 1
    assert "SGLang exited with code 3 before it was ready" in server.log()


def test_another_sglang_release_than_the_setting_is_not_launched(supervised: Any, stand_in: StandIn) -> None:
    server = supervised(env={"STAND_IN_SGLANG_VERSION": "0.5.23"}, ready=False)
    assert exit_code(server, 15) == 1
    assert "runs sglang 0.5.23, but OPENJEV_SGLANG_VERSION is 0.5.19" in server.log()
    assert not stand_in.record_path.exists()  # never launched
    newer = supervised(env={"STAND_IN_SGLANG_VERSION": "0.5.23", "OPENJEV_SGLANG_VERSION": "0.5.23"})
    with newer.client() as client:
        assert client.post("/v1/systemone", json=EXAMPLE).status_code == 200


def test_sglang_dying_after_ready_stops_the_api(supervised: Any, stand_in: StandIn) -> None:
    server = supervised()
    pid = stand_in.record()["pid"]
    os.kill(pid, signal.SIGKILL)
    started = time.monotonic()
    assert exit_code(server, 10) == 1
    assert time.monotonic() - started < 5
    assert "SGLang exited unexpectedly with code -9" in server.log()


def test_sigterm_finishes_in_flight_work_then_stops_sglang(supervised: Any, stand_in: StandIn) -> None:
    server = supervised(env={"STAND_IN_GENERATE_DELAY": "1"})
    pid = stand_in.record()["pid"]
    with concurrent.futures.ThreadPoolExecutor(1) as pool, server.client() as client:
        pending = pool.submit(client.post, "/v1/systemone", json=EXAMPLE)
        assert eventually(lambda: httpx.get(f"{server.url}/health").json()["in_flight"] == 1, 5)
        server.process.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        with pytest.raises(httpx.ConnectError):  # no new work once shutdown began
            httpx.get(f"{server.url}/health/live")
        response = pending.result(timeout=20)
    assert response.status_code == 200, response.text
    assert exit_code(server, 15) == 0
    assert stand_in.record()["terminated_by"] == "SIGTERM"
    assert process_gone(pid)


def test_sigterm_kills_an_sglang_that_ignores_it(supervised: Any, stand_in: StandIn) -> None:
    server = supervised(mode="hang", env={"OPENJEV_SGLANG_SHUTDOWN_GRACE": "1"}, ready=False)
    pid = stand_in.record()["pid"]
    assert httpx.get(f"{server.url}/health").status_code == 503
    server.process.send_signal(signal.SIGTERM)
    assert exit_code(server, 15) == 0
    assert process_gone(pid)
    assert "SGLang did not exit within 1s of SIGTERM: killed" in server.log()


@pytest.mark.skipif(sys.platform != "linux", reason="parent-death signal is Linux-only")
def test_sglang_does_not_outlive_a_killed_api(supervised: Any, stand_in: StandIn) -> None:
    server = supervised()
    pid = stand_in.record()["pid"]
    server.process.kill()
    assert eventually(lambda: process_gone(pid), 5)
