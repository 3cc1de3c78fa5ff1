"""The production install serves: `python -m tests.production_install` (a CI step, before the tests).

CI's own environment has every extra, so it cannot see a module the API imports that only an extra
brings. Here the project is installed twice into fresh environments, with nothing else:

- as the Modal image installs it: the files the image copies (`modal_app.py`), then
  `uv sync --frozen --no-dev --no-editable` (no extras, no groups);
- as `pip install openjev-server` would: a wheel built with `uv build`, installed into an empty venv.

From each environment: every openjev module imports (the embedded runtimes import their extras
lazily), `openjev schema` prints the API, `openjev serve --connect` over the fake SGLang answers the
README example (`examples/request.json`), and, from the synced one, `openjev eval --url` reports on a
small labelled file. Exits 1 with the failing command's output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from openjev.backends.supervised import free_port
from tests.conftest import fetch_qwen_tokenizer, wait_for
from tests.fake_sglang import FakeSGLang

ROOT = Path(__file__).resolve().parents[2]
#: What modal_app.py's image copies before its `uv sync`.
IMAGE_FILES = ("pyproject.toml", "uv.lock", "README.md", "src")
SYNC = ("uv", "sync", "--frozen", "--no-dev", "--no-editable")
IMPORT_EVERY_MODULE = """
import importlib, pkgutil, openjev
for module in pkgutil.walk_packages(openjev.__path__, "openjev."):
    if module.name != "openjev.__main__":
        importlib.import_module(module.name)
"""
TEAMS = {"billing": "Payments, charges and refunds", "technical": "Bugs and outages", "sales": "New purchases"}
EVAL_ROWS = [
    {"state": f"Ticket {i}: {text}", "gold": gold, "question": {"type": "choice", "instructions": "Which team?",
                                                                 "criteria": TEAMS}}
    for i, (text, gold) in enumerate([("charged twice", "billing"), ("the app crashes", "technical"),
                                      ("want more seats", "sales")])
]  # fmt: skip


class CheckFailed(Exception):
    pass


def run(*command: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(part) for part in command], cwd=cwd, env={**os.environ, **(env or {})},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise CheckFailed(f"`{' '.join(map(str, command))}` exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def copy_image_files(target: Path) -> Path:
    target.mkdir()
    for name in IMAGE_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, target / name)
    return target


def synced(scratch: Path) -> Path:
    """The Modal image's install: `uv sync` of the copied files into a fresh environment."""
    project = copy_image_files(scratch / "image")
    venv = scratch / "synced-venv"
    run(*SYNC, cwd=project, env={"UV_PROJECT_ENVIRONMENT": str(venv)})
    return venv


def from_wheel(scratch: Path) -> Path:
    """A wheel built from the same files, installed into an empty venv by its own metadata (not the lock)."""
    project = copy_image_files(scratch / "wheel-source")
    run("uv", "build", "--wheel", "--out-dir", scratch / "dist", cwd=project)
    (wheel,) = (scratch / "dist").glob("openjev*.whl")
    venv = scratch / "wheel-venv"
    run("uv", "venv", "--quiet", venv)
    run("uv", "pip", "install", "--quiet", "--python", venv / "bin" / "python", wheel)
    return venv


def answer_the_example(url: str) -> str:
    request = json.loads((ROOT / "examples" / "request.json").read_text())
    response = httpx.post(f"{url}/v1/systemone", json=request, timeout=60)
    if response.status_code != 200 or set(response.json().get("answers", {})) != set(request["questions"]):
        raise CheckFailed(f"the README example got {response.status_code}: {response.text[:2000]}")
    return response.text


def check(venv: Path, fake: FakeSGLang, tokenizer: Path, scratch: Path, *, evaluate: bool) -> None:
    openjev = venv / "bin" / "openjev"
    run(venv / "bin" / "python", "-c", IMPORT_EVERY_MODULE)
    if "/v1/systemone" not in json.loads(run(openjev, "schema"))["paths"]:
        raise CheckFailed("openjev schema has no /v1/systemone")
    port = free_port()
    log = scratch / f"serve-{venv.name}.log"
    with log.open("wb") as log_file:
        server = subprocess.Popen(
            [openjev, "serve", "--host", "127.0.0.1", "--port", str(port), "--connect", fake.url,
             "--tokenizer", str(tokenizer)], stdout=log_file, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{url}/health", timeout=120, process=server)
        answer_the_example(url)
        if evaluate:
            rows = scratch / "rows.jsonl"
            rows.write_text("".join(json.dumps(row) + "\n" for row in EVAL_ROWS))
            run(openjev, "eval", rows, "--url", url, "--out", scratch / "eval")
    except (RuntimeError, TimeoutError, CheckFailed, httpx.HTTPError) as error:
        raise CheckFailed(f"{error}\n--- server log ---\n{log.read_text(errors='replace')}") from error
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> int:
    started = time.monotonic()
    tokenizer = fetch_qwen_tokenizer()
    fake = FakeSGLang().start()
    try:
        with tempfile.TemporaryDirectory(prefix="openjev-production-install-") as directory:
            scratch = Path(directory)
            check(synced(scratch), fake, tokenizer, scratch, evaluate=True)
            check(from_wheel(scratch), fake, tokenizer, scratch, evaluate=False)
    except CheckFailed as error:
        print(f"production install: FAILED\n{error}", file=sys.stderr)
        return 1
    finally:
        fake.stop()
    if fake.violations:
        print(f"production install: requests that would break a real SGLang: {fake.violations}", file=sys.stderr)
        return 1
    print(f"production install: the synced environment and the wheel serve ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
