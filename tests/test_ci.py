"""CI's guard: with OPENJEV_REQUIRE_EMBEDDED set, a skipped `embedded` test fails the run."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIPPING = """
import pytest

@pytest.mark.embedded
def test_needs_the_model():
    pytest.skip("packaged test model missing")

def test_other_skip():
    pytest.skip("not about the model")
"""


def run_pytest(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    environment = {key: value for key, value in os.environ.items() if key != "OPENJEV_REQUIRE_EMBEDDED"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "-o", "markers=embedded", str(tmp_path / "test_skipping.py")],
        capture_output=True, text=True, cwd=ROOT, env={**environment, **env}, timeout=120,
    )  # fmt: skip


def test_a_skipped_embedded_test_fails_only_when_required(tmp_path: Path) -> None:
    relaxed = run_pytest(tmp_path)
    assert relaxed.returncode == 0 and "2 skipped" in relaxed.stdout, relaxed.stdout
    required = run_pytest(tmp_path, OPENJEV_REQUIRE_EMBEDDED="1")
    assert required.returncode == 1, required.stdout
    assert "1 failed, 1 skipped" in required.stdout and "OPENJEV_REQUIRE_EMBEDDED" in required.stdout
