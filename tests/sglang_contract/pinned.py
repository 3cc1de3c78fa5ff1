"""The pinned SGLang 0.5.19 environment (`.cache/sglang-0.5.19`) the contract check, the live tests
and the Modal image check run: found, or built by `build-env` (the script `.ci/run` runs too), once,
then reused.

`OPENJEV_SGLANG_CONTRACT_PYTHON` names another interpreter, used as it is (never built). Otherwise the
environment is ready when `.built-from` holds the requirements file's sha256; if not, the first caller
in a session runs `build-env` (about 130 s, under a lock so that two sessions do not build at once). A
build that fails is a `PinnedEnvironmentError` naming the one command that builds it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENVIRONMENT = ROOT / ".cache" / "sglang-0.5.19"
REQUIREMENTS = Path(__file__).with_name("requirements-sglang-0.5.19.txt")
BUILD_SCRIPT = Path(__file__).with_name("build-env")
BUILD_COMMAND = str(BUILD_SCRIPT.relative_to(ROOT))
_BUILD_TIMEOUT = 1800


class PinnedEnvironmentError(RuntimeError):
    """The pinned environment is missing and could not be built."""


def explicit_python() -> Path | None:
    explicit = os.environ.get("OPENJEV_SGLANG_CONTRACT_PYTHON")
    return Path(explicit) if explicit else None


def default_python() -> Path:
    return ENVIRONMENT / "bin" / "python"


def is_built() -> bool:
    stamp = ENVIRONMENT / ".built-from"
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    return default_python().exists() and stamp.is_file() and stamp.read_text().strip() == digest


def contract_python() -> Path:
    """The interpreter, built first where needed; `PinnedEnvironmentError` when it cannot be."""
    explicit = explicit_python()
    if explicit is not None:
        if not explicit.exists():
            raise PinnedEnvironmentError(f"OPENJEV_SGLANG_CONTRACT_PYTHON={explicit} does not exist")
        return explicit
    if not is_built():
        build()
    return default_python()


def build() -> None:
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        raise PinnedEnvironmentError(
            f"no SGLang 0.5.19 environment and no uv to build it: install uv, run {BUILD_COMMAND}"
        )
    ENVIRONMENT.parent.mkdir(parents=True, exist_ok=True)
    with (ENVIRONMENT.parent / ".sglang-0.5.19.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be building it: wait, then check again
        if is_built():
            return
        done = subprocess.run(
            [str(BUILD_SCRIPT), str(ENVIRONMENT)], capture_output=True, text=True, timeout=_BUILD_TIMEOUT, check=False,
            env={**os.environ, "UV": uv},
        )  # fmt: skip
    if done.returncode != 0:
        raise PinnedEnvironmentError(
            f"building the SGLang 0.5.19 environment failed ({done.returncode}); build it with {BUILD_COMMAND}:\n"
            f"{done.stderr[-3000:]}"
        )
