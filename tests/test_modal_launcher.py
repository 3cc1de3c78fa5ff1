"""modal_app.py's launcher and its watchdog, with real processes: `python -m http.server` as the API inside
Modal's own serving loop (`call_server`), stopped by Modal, by a normal stop, or dying under it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

modal = pytest.importorskip("modal")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import modal_app  # noqa: E402
from openjev.backends.supervised import free_port  # noqa: E402

LAUNCHER_SCRIPT = """
import json, sys, time
sys.path.insert(0, {root!r})
import modal_app
from modal._container_entrypoint import call_server
from modal._runtime.user_code_event_loop import UserCodeEventLoop

launcher = modal_app.ApiLauncher({command!r}, {url!r}, fallback_exit_seconds=5)
launcher.start(timeout=20)  # @modal.enter
print(json.dumps({{"ready": launcher.process.pid}}), flush=True)
if {stop_normally}:
    print(json.dumps({{"stopped": launcher.stop(timeout=5)}}), flush=True)
    time.sleep(1.5)
    print(json.dumps({{"still_running": True}}), flush=True)
elif {modal_handler}:
    # Modal's own serving loop for @app.server (modal 1.6, _container_entrypoint.run_server): it
    # returns on SIGTERM, and the container then runs @modal.exit.
    with UserCodeEventLoop() as event_loop:
        call_server(event_loop)
    print(json.dumps({{"exit_hook": launcher.stop(timeout=5)}}), flush=True)
else:
    time.sleep(30)
"""


def run_launcher(
    *, stop_normally: bool, on_ready: Any = None, modal_handler: bool = True
) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    """Run LAUNCHER_SCRIPT with `python -m http.server` as the API; return its JSON events in order."""
    port = free_port()
    api = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    script = LAUNCHER_SCRIPT.format(
        root=str(ROOT),
        command=api,
        url=f"http://127.0.0.1:{port}/",
        stop_normally=stop_normally,
        modal_handler=modal_handler,
    )
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    lines = iter(process.stdout.readline, "")
    ready = next((json.loads(line) for line in lines if line.startswith("{")), {})
    assert "ready" in ready, process.communicate(timeout=10)
    if on_ready is not None:
        on_ready(ready["ready"], process.pid)
    stdout, stderr = process.communicate(timeout=20)
    events = [ready, *(json.loads(line) for line in stdout.splitlines() if line.startswith("{"))]
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr), events


def test_launcher_takes_the_container_down_when_the_api_dies() -> None:
    result, events = run_launcher(stop_normally=False, on_ready=lambda api, _: os.kill(api, signal.SIGKILL))
    assert "openjev exited with code -9; stopping the container" in result.stderr
    assert events[1:] == [{"exit_hook": -9}]
    assert result.returncode == 0


def test_modal_stopping_the_container_runs_the_exit_hook_once() -> None:
    # SIGTERM from Modal: its serving loop returns, @modal.exit stops the API; the watchdog stays quiet.
    def modal_stops_the_container(api: int, launcher: int) -> None:
        time.sleep(0.5)  # past @modal.enter: Modal's loop handles SIGTERM from here on
        os.kill(launcher, signal.SIGTERM)

    result, events = run_launcher(stop_normally=False, on_ready=modal_stops_the_container)
    assert events[1:] == [{"exit_hook": -15}]
    assert "stopping the container" not in result.stderr
    assert result.returncode == 0


def test_launcher_exits_at_once_without_modals_handler() -> None:
    # Outside Modal's serving loop SIGTERM has its default action (no exit hook, no commit): exit directly.
    result, events = run_launcher(stop_normally=False, modal_handler=False, on_ready=lambda api, _: os.kill(api, 9))
    assert "openjev exited with code -9; stopping the container" in result.stderr
    assert events[1:] == [] and result.returncode == 1


def test_launcher_stays_quiet_after_a_normal_stop() -> None:
    result, events = run_launcher(stop_normally=True)
    assert events[1:] == [{"stopped": -15}, {"still_running": True}]
    assert "stopping the container" not in result.stderr
    assert result.returncode == 0


def test_launcher_fails_startup_when_the_api_exits_early() -> None:
    launcher = modal_app.ApiLauncher(
        [sys.executable, "-c", "raise SystemExit(4)"], f"http://127.0.0.1:{free_port()}/", fallback_exit_seconds=1
    )
    with pytest.raises(RuntimeError, match="openjev exited with code 4 before it was ready"):
        launcher.start(timeout=20)
