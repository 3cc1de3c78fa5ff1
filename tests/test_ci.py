"""CI's guard: with OPENJEV_REQUIRE_EMBEDDED / OPENJEV_REQUIRE_SGLANG_LIVE set, a skipped test of that
marker fails the run."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REQUIRED_MARKERS

ROOT = Path(__file__).resolve().parents[1]
SKIPPING = """
import pytest

@pytest.mark.{marker}
def test_needs_the_environment():
    pytest.skip("environment missing")

def test_other_skip():
    pytest.skip("not about it")
"""


def run_pytest(tmp_path: Path, marker: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_skipping.py").write_text(SKIPPING.format(marker=marker))
    environment = {key: value for key, value in os.environ.items() if key not in REQUIRED_MARKERS.values()}
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
