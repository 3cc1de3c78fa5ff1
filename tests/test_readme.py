"""The README's install story: what must exist first, install commands that never remove what
another use needs, and the same test setup as `.ci/run`."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()


def shell_lines(markdown: str) -> list[str]:
    blocks = re.findall(r"^```sh\n(.*?)^```", markdown, re.MULTILINE | re.DOTALL)
    return [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    return README[start : README.find("\n## ", start + 1)]


def test_what_must_exist_first_comes_first_and_says_how_to_get_it() -> None:
    first = section("What must exist first")
    assert README.index("## What must exist first") < README.index("## Quick start")
    assert "https://astral.sh/uv/install.sh" in first and "pip install uv" in first
    assert "`npm`" in first and "Chromium" in first and "optional" in first
    assert "--inexact" in first and "`cpu` extra" in first


def test_no_install_command_removes_what_another_use_needs() -> None:
    for document in (README, (ROOT / "evals" / "README.md").read_text()):
        syncs = [line for line in shell_lines(document) if line.startswith("uv sync")]
        assert syncs and all("--inexact" in shlex.split(line) for line in syncs), syncs


def test_the_development_install_is_what_ci_installs() -> None:
    (development,) = [line for line in shell_lines(section("Development")) if line.startswith("uv sync")]
    (ci,) = [line for line in CI.splitlines() if line.startswith("uv sync")]
    assert set(shlex.split(development)) - {"--inexact"} == set(shlex.split(ci)) - {"--frozen", "--compile-bytecode"}


def test_readme_and_ci_agree_on_the_sglang_environment_and_the_skip_guard() -> None:
    build = "tests/sglang_contract/build-env"
    assert re.search(rf"^{re.escape(build)}$", CI, re.MULTILINE) and f"`{build}`" in section("Development")
    assert re.search(r"^CI=1 uv run pytest\b", CI, re.MULTILINE) and "sets `CI=1`" in section("Development")


def test_the_live_tolerance_is_the_one_the_readme_states() -> None:
    from tests.sglang_live.test_live import TOLERANCE

    assert TOLERANCE == {"float32": 1e-3, "bfloat16": 1e-2, "int8": 0.1}
    text = " ".join(README.split())
    assert "every probability within 1e-3 when the embedded backend runs float32" in text
    assert "within 1e-2 where it picks bfloat16" in text and "(to 1e-6)" not in text
    assert "within 0.1 where it picks int8" in text
