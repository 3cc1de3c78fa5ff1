"""CI's guard (`tests/skip_guard.py`): with `CI` set every skip fails, a module skipped at collection
included; with OPENJEV_REQUIRE_EMBEDDED / OPENJEV_REQUIRE_SGLANG_LIVE set, a skipped test of that
marker fails the run."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.skip_guard import GUARD_VARIABLES, REQUIRED_MARKERS

ROOT = Path(__file__).resolve().parents[1]
SKIPPING = """
import pytest

@pytest.mark.{marker}
def test_needs_the_environment():
    pytest.skip("environment missing")

def test_other_skip():
    pytest.skip("not about it")
"""
SKIPPED_MODULE = """
import pytest

pytest.importorskip("a_package_that_is_not_installed")

def test_never_collected():
    pass
"""


def run_pytest(tmp_path: Path, marker: str, source: str = SKIPPING, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_skipping.py").write_text(source.format(marker=marker))
    environment = {key: value for key, value in os.environ.items() if key not in GUARD_VARIABLES}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "-o", f"markers={marker}", str(tmp_path / "test_skipping.py")],
        capture_output=True, text=True, cwd=ROOT, env={**environment, **env}, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(("marker", "variable"), REQUIRED_MARKERS.items())
def test_a_skipped_test_fails_only_when_its_marker_is_required(tmp_path: Path, marker: str, variable: str) -> None:
    relaxed = run_pytest(tmp_path, marker)
    assert relaxed.returncode == 0 and "2 skipped" in relaxed.stdout, relaxed.stdout
    required = run_pytest(tmp_path, marker, **{variable: "1"})
    assert required.returncode == 1, required.stdout
    assert "1 failed, 1 skipped" in required.stdout and variable in required.stdout


def test_in_ci_every_skip_fails(tmp_path: Path) -> None:
    ci = run_pytest(tmp_path, "embedded", CI="true")
    assert ci.returncode == 1 and "2 failed" in ci.stdout and "CI is set" in ci.stdout, ci.stdout


def test_in_ci_a_module_skipped_at_collection_fails(tmp_path: Path) -> None:
    relaxed = run_pytest(tmp_path, "embedded", SKIPPED_MODULE)
    assert relaxed.returncode == pytest.ExitCode.NO_TESTS_COLLECTED and "1 skipped" in relaxed.stdout, relaxed.stdout
    ci = run_pytest(tmp_path, "embedded", SKIPPED_MODULE, CI="1")
    assert ci.returncode != 0 and "1 error" in ci.stdout and "a_package_that_is_not_installed" in ci.stdout, ci.stdout
