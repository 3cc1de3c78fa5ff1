"""The end-of-session check never passes silently in CI: no SGLang interpreter there is a failure."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from tests.fake_sglang.payloads import COMMAND_LOG, PAYLOAD_LOG
from tests.sglang_contract import plugin


@pytest.mark.parametrize(("ci", "failed"), [({"CI": "true"}, True), ({}, False)])
def test_missing_interpreter_fails_only_in_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ci: dict[str, str], failed: bool
) -> None:
    payloads, commands = tmp_path / "p.jsonl", tmp_path / "c.jsonl"
    payloads.write_text('{"body": {}}\n')
    commands.touch()
    for name in ("CI", "OPENJEV_REQUIRE_SGLANG_CONTRACT", "OPENJEV_SGLANG_CONTRACT_PYTHON"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {PAYLOAD_LOG: str(payloads), COMMAND_LOG: str(commands), **ci}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(plugin, "DEFAULT_PYTHON", tmp_path / "absent" / "python")
    monkeypatch.setattr(plugin, "_result", {})
    session = types.SimpleNamespace(exitstatus=pytest.ExitCode.OK)
    plugin.pytest_sessionfinish(session, 0)  # type: ignore[arg-type]
    assert (session.exitstatus == pytest.ExitCode.TESTS_FAILED) is failed
    assert plugin._result["skipped"] is True
