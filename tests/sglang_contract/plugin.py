"""End-of-session check: everything the tests made openjev send to the fake SGLang, and every launch
command, judged by SGLang 0.5.19's own classes in one run of its interpreter (`validate.py`).

The interpreter is the pinned environment (`pinned.py`: `.cache/sglang-0.5.19`, built by
`tests/sglang_contract/build-env` the first time it is needed) or `$OPENJEV_SGLANG_CONTRACT_PYTHON`.
A session that recorded nothing has nothing to judge; one that recorded something and cannot get the
interpreter fails, naming the command that builds it. In CI (`CI` or `OPENJEV_REQUIRE_SGLANG_CONTRACT`
set) the check must also have judged at least `MIN_PAYLOADS` payloads and `MIN_COMMANDS` launch
commands (a whole run records more; see their comment), and among the payloads SGLang accepted at
least one carrying `image_data` (an image's transfer) and one carrying `sampling_params.regex` (a box
question's constrained decoding): fewer means the recording broke, or the tests no longer reach a part
of the contract, and a check of nothing passes nothing. A disagreement fails the run. The summary says
how many it judged.
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
from tests.sglang_contract.pinned import PinnedEnvironmentError, contract_python

VALIDATOR = Path(__file__).with_name("validate.py")
#: Floors in CI, under what a whole run records. Counted module by module (each a session of its own):
#: tests/api/test_api.py 33 payloads, tests/backends/test_supervised.py 13 and 9 launch commands (its
#: only source: 2 built commands and 7 stand-in launches), tests/backends/test_sglang_limits.py 10,
#: test_fake_sglang + test_sglang + test_sglang_control 17, tests/evals/test_harness.py 8,
#: tests/api/test_wire.py 1: 82 payloads from these alone (some may coincide in one session), the
#: robustness suites (schemathesis) many more.
MIN_PAYLOADS = 60
MIN_COMMANDS = 8
#: The parts of a payload a CI run must have had judged at least once among the accepted payloads, each
#: with its floor-error text. Counted module by module: tests/api/test_boxes.py 9 accepted payloads
#: with `image_data` and 3 with a regex (the only source of regexes), test_image_traffic.py and
#: test_image_values.py 31 with `image_data`.
REQUIRED_KINDS = {
    "image_data": "`image_data` (images sent to SGLang)",
    "regex": "`sampling_params.regex` (a box question's constrained decoding)",
}
_TIMEOUT = 900
_result: dict[str, Any] = {}


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


def floor_errors(payloads: int, commands: int, kinds: dict[str, int]) -> list[str]:
    """What is missing for a CI run: too few payloads or launch commands judged, or no accepted payload
    of a kind in `REQUIRED_KINDS` (`kinds` counts them)."""
    errors = []
    for what, judged, floor in (("payloads", payloads, MIN_PAYLOADS), ("launch commands", commands, MIN_COMMANDS)):
        if judged < floor:
            errors.append(f"judged {judged} {what}, fewer than the {floor} a CI run must (the recording broke?)")
    for kind, described in REQUIRED_KINDS.items():
        if not kinds.get(kind):
            errors.append(
                f"judged no accepted payload carrying {described}; a CI run must judge at least one "
                "(the recording broke, or no test sends one any more?)"
            )
    return errors


def payload_kinds(body: Any) -> set[str]:
    """Which of `REQUIRED_KINDS` a `/generate` body carries."""
    if not isinstance(body, dict):
        return set()
    params = body.get("sampling_params")
    params = params if isinstance(params, list) else [params]
    regex = any(isinstance(each, dict) and each.get("regex") is not None for each in params)
    return {kind for kind, present in (("image_data", body.get("image_data") is not None), ("regex", regex)) if present}


def recorded(payloads: Path, commands: Path) -> tuple[int, int, dict[str, int]]:
    """Lines in each log, and the accepted payloads (`expect` ok) of each kind in `REQUIRED_KINDS`."""
    kinds = dict.fromkeys(REQUIRED_KINDS, 0)
    lines = 0
    for line in payloads.open() if payloads.is_file() else ():
        lines += 1
        record = json.loads(line)
        for kind in payload_kinds(record["body"]) if record.get("expect") == "ok" else ():
            kinds[kind] += 1
    return lines, sum(1 for _ in commands.open()) if commands.is_file() else 0, kinds


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if "directory" not in _result:  # a nested run: the outer session judges what it recorded
        return
    payloads, commands = (Path(os.environ.get(name, "")) for name in (PAYLOAD_LOG, COMMAND_LOG))
    payload_lines, command_lines, kinds = recorded(payloads, commands)
    if not (payload_lines or command_lines) and not required():
        return
    try:
        python = contract_python()
    except PinnedEnvironmentError as error:
        _result.update(errors=[str(error)])
    else:
        _result.update(validate(python, payloads, commands))
    _result.setdefault("payloads", payload_lines)
    _result.setdefault("commands", command_lines)
    _result["kinds"] = kinds  # the validator judges every line of the log
    if required():
        _result["errors"] = _result["errors"] + floor_errors(_result["payloads"], _result["commands"], kinds)
    if _result["errors"]:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    directory = _result.pop("directory", None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if "payloads" not in _result:
        return
    write = terminalreporter.write_line
    for error in _result.get("errors", []):
        write(f"SGLang 0.5.19 contract: {error}", red=True)
    checked = f" with SGLang's own classes in {_result['seconds']} s" if "seconds" in _result else ""
    kinds = ", ".join(f"{count} accepted with {kind}" for kind, count in _result.get("kinds", {}).items())
    write(
        f"SGLang 0.5.19 contract: judged {_result['payloads']} payloads ({kinds}) and {_result['commands']} "
        f"launch commands{checked} (CI floors {MIN_PAYLOADS} and {MIN_COMMANDS}, at least one of each kind), "
        f"{len(_result['errors'])} errors"
    )
