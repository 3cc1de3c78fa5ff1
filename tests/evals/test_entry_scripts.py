"""The documented command lines run as scripts (`uv run evals/run.py ...`): each registers every suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "evals" / "runs" / "jev-dev-2026-12-01" / "score-digits"


def script(name: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(ROOT / "evals" / name), *arguments]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def test_run_offers_every_registered_suite_and_its_options() -> None:
    shown = script("run.py", "--help")
    assert shown.returncode == 0, shown.stderr
    for name in ("mmlu-pro-matched", "mmlu-pro-dev", "mmlu", "jev-dev", "--shifts", "--types"):
        assert name in shown.stdout


def test_report_compare_and_calibrate_read_a_committed_run(tmp_path: Path) -> None:
    copy = tmp_path / "run"
    copy.mkdir()
    for name in ("run.json", "results.jsonl"):
        (copy / name).write_bytes((COMMITTED / name).read_bytes())
    rebuilt = script("report.py", str(copy))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert rebuilt.stdout.startswith("jev-dev: n=")
    compared = script("compare.py", "--type", "score", str(copy), f"{copy}@cc")
    assert compared.returncode == 0, compared.stderr
    assert "paired bootstrap" in compared.stdout
    calibrate = script("calibrate.py", "--help")
    assert calibrate.returncode == 0 and "average" in calibrate.stdout
