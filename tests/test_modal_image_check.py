"""modal_app.py's image check builds the application: an API environment whose CLI answers `--help`
but cannot serve fails the image's build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("modal")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import modal_app  # noqa: E402


def test_the_image_check_builds_the_application_not_only_the_cli(tmp_path: Path) -> None:
    """An API environment whose CLI answers --help but cannot build the application (a dependency the
    image lacks, imported only at serve) fails the build."""
    api_venv = tmp_path / "venv"
    (api_venv / "bin").mkdir(parents=True)
    openjev = api_venv / "bin" / "openjev"
    openjev.write_text('#!/bin/sh\n[ "$1" = "--help" ] && exit 0\necho "No module named numpy" >&2\nexit 1\n')
    openjev.chmod(0o755)
    python = api_venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    check = modal_app.image_check("true", str(api_venv), "0.5.19")  # only the API's half: `true` stands for SGLang
    assert subprocess.run(["bash", "-c", check], check=False, capture_output=True).returncode != 0
    openjev.write_text(f'#!/bin/sh\nexec {Path(sys.prefix) / "bin" / "openjev"} "$@"\n')
    assert subprocess.run(["bash", "-c", check], check=False, capture_output=True).returncode == 0
