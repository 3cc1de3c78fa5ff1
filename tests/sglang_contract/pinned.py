"""The pinned SGLang environments (`.cache/sglang-<version>`): 0.5.19, the production pin, which the
contract check, the live tests and the Modal image check run, and 0.5.23, which the live tests run
too: found, or built by `build-env` (the script `.ci/run` runs too), once, then reused.

`OPENJEV_SGLANG_CONTRACT_PYTHON` names another interpreter, used as it is (never built). Otherwise the
environment is ready when `.built-from` holds its requirements file's sha256; if not, the first caller
in a session runs `build-env VERSION` (about 130 s, under a lock so that two sessions do not build
at once). A build that fails is a `PinnedEnvironmentError` naming the one command that builds it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The production pin: the contract check and every live test but the newer release's run use it.
DEFAULT_VERSION = "0.5.19"
#: Every pinned release: `requirements-sglang-<version>.txt` each (the live suite runs on all).
VERSIONS = ("0.5.19", "0.5.23")
ENVIRONMENT = ROOT / ".cache" / f"sglang-{DEFAULT_VERSION}"
BUILD_SCRIPT = Path(__file__).with_name("build-env")
BUILD_COMMAND = str(BUILD_SCRIPT.relative_to(ROOT))
_BUILD_TIMEOUT = 1800


class PinnedEnvironmentError(RuntimeError):
    """The pinned environment is missing and could not be built."""


def environment(version: str = DEFAULT_VERSION) -> Path:
    return ENVIRONMENT if version == DEFAULT_VERSION else ROOT / ".cache" / f"sglang-{version}"


def requirements(version: str = DEFAULT_VERSION) -> Path:
    return Path(__file__).with_name(f"requirements-sglang-{version}.txt")


def build_command(version: str = DEFAULT_VERSION) -> str:
    return BUILD_COMMAND if version == DEFAULT_VERSION else f"{BUILD_COMMAND} {version}"


def explicit_python() -> Path | None:
    explicit = os.environ.get("OPENJEV_SGLANG_CONTRACT_PYTHON")
    return Path(explicit) if explicit else None


def default_python(version: str = DEFAULT_VERSION) -> Path:
    return environment(version) / "bin" / "python"


def is_built(version: str = DEFAULT_VERSION) -> bool:
    stamp = environment(version) / ".built-from"
    digest = hashlib.sha256(requirements(version).read_bytes()).hexdigest()
    return default_python(version).exists() and stamp.is_file() and stamp.read_text().strip() == digest


def contract_python(version: str = DEFAULT_VERSION) -> Path:
    """The interpreter of `version`, built first where needed; `PinnedEnvironmentError` when it cannot be.
    OPENJEV_SGLANG_CONTRACT_PYTHON replaces the default release's only."""
    explicit = explicit_python() if version == DEFAULT_VERSION else None
    if explicit is not None:
        if not explicit.exists():
            raise PinnedEnvironmentError(f"OPENJEV_SGLANG_CONTRACT_PYTHON={explicit} does not exist")
        return explicit
    if not is_built(version):
        build(version)
    return default_python(version)


def build(version: str = DEFAULT_VERSION) -> None:
    uv = os.environ.get("UV") or shutil.which("uv")
    command = build_command(version)
    if uv is None:
        raise PinnedEnvironmentError(
            f"no SGLang {version} environment and no uv to build it: install uv, run {command}"
        )
    target = environment(version)
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f".sglang-{version}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be building it: wait, then check again
        if is_built(version):
            return
        done = subprocess.run(
            [str(BUILD_SCRIPT), version, str(target)], capture_output=True, text=True, timeout=_BUILD_TIMEOUT,
            check=False, env={**os.environ, "UV": uv},
        )  # fmt: skip
    if done.returncode != 0:
        raise PinnedEnvironmentError(
            f"building the SGLang {version} environment failed ({done.returncode}); build it with {command}:\n"
            f"{done.stderr[-3000:]}"
        )
