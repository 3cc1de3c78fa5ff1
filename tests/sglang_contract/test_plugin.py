"""The end-of-session check never passes silently: without the interpreter it fails, and in CI it
fails unless it judged at least its floors of payloads and launch commands, and at least one accepted
payload carrying `image_data` and one carrying a `regex`."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from tests.fake_sglang.payloads import COMMAND_LOG, PAYLOAD_LOG
from tests.sglang_contract import pinned, plugin

IMAGE = {"body": {"input_ids": [1], "image_data": ["/tmp/a.png"]}, "expect": "ok"}
REGEX = {"body": {"input_ids": [1], "sampling_params": {"regex": "[0-9]+"}}, "expect": "ok"}
BOTH = {"body": {**IMAGE["body"], **REGEX["body"]}, "expect": "ok"}
ALL_KINDS = [IMAGE, REGEX]


def finish(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    payloads: int,
    commands: int,
    kinds: list[dict] = ALL_KINDS,
    **env: str,
) -> bool:
    """Run the session-end hook on logs of that many lines (the first ones the `kinds` records, the
    rest bare), without an SGLang environment (and none to be built: uv is a command that fails);
    whether it failed the session."""
    payload_log, command_log = tmp_path / "p.jsonl", tmp_path / "c.jsonl"
    lines = [json.dumps(record) for record in kinds[:payloads]]
    payload_log.write_text("".join(line + "\n" for line in lines) + '{"body": {}}\n' * (payloads - len(lines)))
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
    floors = [error for error in plugin._result["errors"] if "fewer than" in error or "judged no" in error]
    # With no payload there is none of either kind either.
    assert len(floors) == (payloads < plugin.MIN_PAYLOADS) + (commands < plugin.MIN_COMMANDS) + 2 * (payloads == 0)


@pytest.mark.parametrize(
    ("kinds", "missing"),
    [
        ([], ["image_data", "regex"]),
        ([IMAGE], ["regex"]),
        ([REGEX], ["image_data"]),
        ([{**BOTH, "expect": "refused"}], ["image_data", "regex"]),
        ([{**BOTH, "expect": "crash"}, IMAGE], ["regex"]),
        ([{"body": {"input_ids": [1], "sampling_params": {"regex": None}}, "expect": "ok"}, IMAGE], ["regex"]),
        ([BOTH], []),
        (ALL_KINDS, []),
    ],
)
def test_in_ci_a_kind_never_accepted_fails_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kinds: list[dict], missing: list[str]
) -> None:
    finish(tmp_path, monkeypatch, plugin.MIN_PAYLOADS, plugin.MIN_COMMANDS, kinds, CI="1")
    floors = [error for error in plugin._result["errors"] if "judged no" in error]
    assert len(floors) == len(missing)
    assert all(plugin.REQUIRED_KINDS[kind] in error for kind, error in zip(missing, floors, strict=True))


def test_outside_ci_a_missing_kind_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    finish(tmp_path, monkeypatch, 3, 1, [])
    assert not any("judged no" in error for error in plugin._result["errors"])
    assert plugin._result["kinds"] == {"image_data": 0, "regex": 0}


def test_the_floors_are_met_or_named() -> None:
    every_kind = {"image_data": 1, "regex": 1}
    assert plugin.floor_errors(plugin.MIN_PAYLOADS, plugin.MIN_COMMANDS, every_kind) == []
    assert plugin.floor_errors(plugin.MIN_PAYLOADS - 1, plugin.MIN_COMMANDS, every_kind) == [
        f"judged {plugin.MIN_PAYLOADS - 1} payloads, fewer than the {plugin.MIN_PAYLOADS} a CI run must "
        "(the recording broke?)"
    ]
    assert plugin.floor_errors(plugin.MIN_PAYLOADS, plugin.MIN_COMMANDS, {"image_data": 2, "regex": 0}) == [
        "judged no accepted payload carrying `sampling_params.regex` (a box question's constrained decoding); "
        "a CI run must judge at least one (the recording broke, or no test sends one any more?)"
    ]


def test_kinds_are_read_from_a_body() -> None:
    assert plugin.payload_kinds(BOTH["body"]) == {"image_data", "regex"}
    assert plugin.payload_kinds({"sampling_params": [{"max_new_tokens": 1}, {"regex": "a"}]}) == {"regex"}
    assert plugin.payload_kinds({"image_data": None, "sampling_params": {"regex": None}}) == set()
    assert plugin.payload_kinds([{"image_data": ["x"]}]) == set()
