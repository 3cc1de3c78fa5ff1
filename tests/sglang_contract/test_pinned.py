"""The pinned environment is built by the one script `.ci/run` runs too, once, and a build that fails
names that script. Here `uv` is a stand-in that records its arguments and makes `bin/python`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.sglang_contract import pinned

ROOT = Path(__file__).resolve().parents[2]
STAND_IN_UV = """#!/bin/sh
echo "$@" >> "{log}"
for last; do :; done
if [ "$1" = venv ]; then mkdir -p "$last/bin" && ln -s /bin/true "$last/bin/python"; fi
exit {status}
"""


def stand_in_uv(tmp_path: Path, status: int = 0) -> tuple[Path, Path]:
    uv, log = tmp_path / "uv", tmp_path / "uv.log"
    uv.write_text(STAND_IN_UV.format(log=log, status=status))
    uv.chmod(0o755)
    return uv, log


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("OPENJEV_SGLANG_CONTRACT_PYTHON", raising=False)
    monkeypatch.setattr(pinned, "ENVIRONMENT", tmp_path / "env" / "sglang-0.5.19")
    return pinned.ENVIRONMENT


def test_built_once_from_the_pins_then_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, elsewhere: Path) -> None:
    uv, log = stand_in_uv(tmp_path)
    monkeypatch.setenv("UV", str(uv))
    assert pinned.contract_python() == elsewhere / "bin" / "python"
    venv, install = log.read_text().splitlines()
    assert venv == f"venv -q -p 3.11 {elsewhere}"
    assert install == (
        f"pip install -q -p {elsewhere}/bin/python --no-deps --compile-bytecode "
        "-r tests/sglang_contract/requirements-sglang-0.5.19.txt"
    )
    assert pinned.is_built()
    pinned.contract_python()
    assert len(log.read_text().splitlines()) == 2  # the stamp says it is built: no second run
    (elsewhere / ".built-from").write_text("another digest\n")
    pinned.contract_python()
    assert log.read_text().splitlines()[2:] == [install.replace(" --compile-bytecode", "")]


def test_a_failed_build_names_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, elsewhere: Path) -> None:
    uv, _ = stand_in_uv(tmp_path, status=3)
    monkeypatch.setenv("UV", str(uv))
    with pytest.raises(pinned.PinnedEnvironmentError, match=re.escape(pinned.BUILD_COMMAND)):
        pinned.contract_python()
    assert not pinned.is_built()


def test_ci_runs_the_same_script() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(rf"^{re.escape(pinned.BUILD_COMMAND)}$", ci, re.MULTILINE)
    assert "uv pip install" not in ci and "uv venv" not in ci  # no second copy of the build
    assert os.access(pinned.BUILD_SCRIPT, os.X_OK)
