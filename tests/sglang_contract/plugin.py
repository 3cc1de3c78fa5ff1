"""End-of-session check: everything the tests made openjev send to the fake SGLang, and every launch
command, judged by SGLang 0.5.19's own classes in one run of its interpreter (`validate.py`).

The interpreter is `.cache/sglang-0.5.19/bin/python` (built by `.ci/run`) or
`$OPENJEV_SGLANG_CONTRACT_PYTHON`. Without one the check is skipped with a note, except in CI (`CI`
or `OPENJEV_REQUIRE_SGLANG_CONTRACT` set), where that fails the run. A disagreement fails the run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fake_sglang.payloads import COMMAND_LOG, PAYLOAD_LOG

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = Path(__file__).with_name("validate.py")
DEFAULT_PYTHON = ROOT / ".cache" / "sglang-0.5.19" / "bin" / "python"
_TIMEOUT = 900
_result: dict[str, Any] = {}


def contract_python() -> Path | None:
    explicit = os.environ.get("OPENJEV_SGLANG_CONTRACT_PYTHON")
    path = Path(explicit) if explicit else DEFAULT_PYTHON
    return path if path.exists() else None


def required() -> bool:
    return any(
        os.environ.get(name, "").lower() not in ("", "0", "false") for name in ("CI", "OPENJEV_REQUIRE_SGLANG_CONTRACT")
    )


def pytest_configure(config: pytest.Config) -> None:
    if PAYLOAD_LOG in os.environ:  # a nested pytest run (tests of the test tooling) keeps the outer logs
        return
    directory = Path(tempfile.mkdtemp(prefix="openjev-sglang-contract-"))
    _result["directory"] = directory
    for variable, name in ((PAYLOAD_LOG, "payloads.jsonl"), (COMMAND_LOG, "commands.jsonl")):
        (directory / name).touch()
        os.environ[variable] = str(directory / name)


def validate(python: Path, payloads: Path, commands: Path) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run(
        [str(python), str(VALIDATOR), str(payloads), str(commands)],
        capture_output=True, text=True, timeout=_TIMEOUT, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return {"errors": [f"the SGLang 0.5.19 validator failed ({done.returncode}):\n{done.stderr[-4000:]}"]}
    return {**json.loads(done.stdout.splitlines()[-1]), "seconds": round(time.monotonic() - started, 1)}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    payloads, commands = (Path(os.environ.get(name, "")) for name in (PAYLOAD_LOG, COMMAND_LOG))
    if not payloads.is_file() or not (payloads.stat().st_size or commands.stat().st_size):
        return
    python = contract_python()
    if python is None:
        _result.update(skipped=True)
        if required():
            _result.update(errors=[f"no SGLang 0.5.19 interpreter at {DEFAULT_PYTHON} (build it as .ci/run does)"])
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return
    _result.update(validate(python, payloads, commands))
    if _result["errors"]:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    directory = _result.pop("directory", None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not (_result.keys() - {"directory"}):
        return
    write = terminalreporter.write_line
    if _result.get("skipped") and not _result.get("errors"):
        write("SGLang 0.5.19 contract: skipped (no interpreter at .cache/sglang-0.5.19; .ci/run builds it)")
        return
    for error in _result.get("errors", []):
        write(f"SGLang 0.5.19 contract: {error}", red=True)
    if "payloads" in _result:
        write(
            f"SGLang 0.5.19 contract: {_result['payloads']} payloads and {_result['commands']} launch commands "
            f"checked with SGLang's own classes in {_result['seconds']} s, {len(_result['errors'])} disagreements"
        )
