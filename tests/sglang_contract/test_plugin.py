"""The end-of-session check never passes silently: without the interpreter it fails, and in CI it
fails unless it judged at least its floors of payloads and launch commands."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from tests.fake_sglang.payloads import COMMAND_LOG, PAYLOAD_LOG
from tests.sglang_contract import pinned, plugin


def finish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, payloads: int, commands: int, **env: str) -> bool:
    """Run the session-end hook on logs of that many lines, without an SGLang environment (and none
    to be built: uv is a command that fails); whether it failed the session."""
    payload_log, command_log = tmp_path / "p.jsonl", tmp_path / "c.jsonl"
    payload_log.write_text('{"body": {}}\n' * payloads)
    command_log.write_text('["--model-path", "m"]\n' * commands)
    for name in ("CI", "OPENJEV_REQUIRE_SGLANG_CONTRACT", "OPENJEV_SGLANG_CONTRACT_PYTHON"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {PAYLOAD_LOG: str(payload_log), COMMAND_LOG: str(command_log), "UV": "false", **env}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(pinned, "ENVIRONMENT", tmp_path / "absent")
    monkeypatch.setattr(plugin, "_result", {"directory": tmp_path})
    session = types.SimpleNamespace(exitstatus=pytest.ExitCode.OK)
    plugin.pytest_sessionfinish(session, 0)  # type: ignore[arg-type]
    return session.exitstatus == pytest.ExitCode.TESTS_FAILED


def test_nothing_recorded_outside_ci_is_nothing_to_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not finish(tmp_path, monkeypatch, 0, 0)
    assert plugin._result == {"directory": tmp_path}


@pytest.mark.parametrize("ci", [{}, {"CI": "true"}])
def test_without_the_interpreter_it_fails_naming_the_command_that_builds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ci: dict[str, str]
) -> None:
    assert finish(tmp_path, monkeypatch, 3, 1, **ci)
    assert any(pinned.BUILD_COMMAND in error for error in plugin._result["errors"])
    assert (plugin._result["payloads"], plugin._result["commands"]) == (3, 1)


@pytest.mark.parametrize(("payloads", "commands"), [(0, 0), (0, plugin.MIN_COMMANDS), (plugin.MIN_PAYLOADS, 0)])
@pytest.mark.parametrize("variable", ["CI", "OPENJEV_REQUIRE_SGLANG_CONTRACT"])
def test_in_ci_too_few_judged_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, payloads: int, commands: int, variable: str
) -> None:
    assert finish(tmp_path, monkeypatch, payloads, commands, **{variable: "1"})
    floors = [error for error in plugin._result["errors"] if "fewer than" in error]
    assert len(floors) == (payloads < plugin.MIN_PAYLOADS) + (commands < plugin.MIN_COMMANDS)


def test_the_floors_are_met_or_named() -> None:
    assert plugin.floor_errors(plugin.MIN_PAYLOADS, plugin.MIN_COMMANDS) == []
    assert plugin.floor_errors(plugin.MIN_PAYLOADS - 1, plugin.MIN_COMMANDS) == [
        f"judged {plugin.MIN_PAYLOADS - 1} payloads, fewer than the {plugin.MIN_PAYLOADS} a CI run must "
        "(the recording broke?)"
    ]
