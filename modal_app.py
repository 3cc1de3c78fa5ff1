"""openjev on Modal: one B200 per container (OPENJEV_GPUS for more), SGLang supervised by the API.

    uv run modal run modal_app.py      # a temporary Server: smoke checks -> smoke-result.json, then shut down
    uv run modal deploy modal_app.py   # a stable public URL (https://...us-west.modal.direct)

The image is the official SGLang image of OPENJEV_SGLANG_VERSION (default the production pin, 0.5.19;
docs/sglang-and-modal.md) plus the API, installed with uv from uv.lock into its own
virtual environment; SGLang keeps the image's Python, which the API only executes. `OpenJev.start`
(`@modal.enter`) runs `openjev serve --sglang-python ...` on port 8000 and returns once `/health` is
200; from then on a watchdog takes the container down if the API process dies (the API itself exits
when SGLang dies), so Modal replaces it instead of routing to a dead backend. `OpenJev.stop`
(`@modal.exit`) disarms the watchdog and stops the API, which drains its requests and stops SGLang.

The `openjev-huggingface` Volume holds the weights and every compile cache (SGLang's tuning and JIT
kernels, FlashInfer's workspace, Triton's and TorchInductor's), so later starts skip the download and
the compilation (CUDA graphs are still captured).

Read from the local environment when this file is loaded: OPENJEV_GPUS (default 1) B200s per
container, served as that many SGLang data-parallel ranks (`--dp-size`, the Python frontend) with each
conversation pinned to one rank's cache, and the container's request limits scaled with them;
OPENJEV_PROFILE, OPENJEV_FRONTEND, OPENJEV_SERVED_MODEL_NAME and OPENJEV_SGLANG_VERSION are forwarded
to the container (where the supervised launch checks the image's sglang against the last);
OPENJEV_API_KEY, OPENJEV_BACKEND_API_KEY and HF_TOKEN travel in a Modal Secret; OPENJEV_MODAL_SECRET
names a stored Modal Secret to add. Unset variables are not sent: by default the endpoint has no auth.
Modal loads this file again in the container, whose environment differs (the Secrets' values are set,
the local ones are not), so the Secret list has the same shape in both: always the one dict Secret,
and the stored Secret's name is forwarded so the container names it too.

Shutdown budget, all within Modal's exit grace: the API drains its requests (at most the request
timeout), then gives SGLang its grace period, then the Volume is committed.

Only the standard library and modal are imported here, so the file loads offline and in the image.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

import modal

#: Containers kept running with no traffic; 1 keeps a B200 warm (and billed) at all times.
MIN_CONTAINERS = 0

APP_NAME = "openjev"
GPU = "B200"
ROUTING_REGION = "us-west"
COMPUTE_REGIONS = ["us-west", "us-central", "us"]
PORT = 8000
SCALEDOWN_SECONDS = 5 * 60
# Past OPENJEV_MAX_CONCURRENT_REQUESTS a container answers 529: Modal scales out before that.
MAX_CONCURRENT_REQUESTS = 16
TARGET_CONCURRENCY = 12
# The first start downloads the weights and compiles kernels; the API gives up 5 minutes earlier, with a message.
STARTUP_SECONDS = 40 * 60
BACKEND_STARTUP_SECONDS = STARTUP_SECONDS - 5 * 60
# `openjev smoke` retries 503s while a cold Server starts: longer than the Server may take to start.
SMOKE_STARTUP_DEADLINE = STARTUP_SECONDS + 5 * 60
# Shutdown, in order: requests drain (each bounded by the request timeout), SGLang exits (SIGKILL after
# its grace), the API process exits, then the Volume commit; Modal's exit grace covers all of it.
REQUEST_TIMEOUT_SECONDS = 120
SGLANG_GRACE_SECONDS = 20
API_STOP_SECONDS = REQUEST_TIMEOUT_SECONDS + SGLANG_GRACE_SECONDS + 10
VOLUME_COMMIT_SECONDS = 30
EXIT_GRACE_SECONDS = API_STOP_SECONDS + VOLUME_COMMIT_SECONDS

SGLANG_VERSION_ENV = "OPENJEV_SGLANG_VERSION"
#: openjev's `settings.backends.DEFAULT_SGLANG_VERSION` (this file imports only the standard library and modal).
DEFAULT_SGLANG_VERSION = "0.5.19"
UV_IMAGE = "ghcr.io/astral-sh/uv:0.13.9"
PROJECT_DIR = "/opt/openjev"
API_VENV = "/opt/openjev-venv"
SGLANG_PYTHON = "/usr/local/bin/sglang-python"
CACHE_DIR = "/cache"
VOLUME_NAME = "openjev-huggingface"

FORWARDED_ENV = ("OPENJEV_PROFILE", "OPENJEV_FRONTEND", "OPENJEV_SERVED_MODEL_NAME", SGLANG_VERSION_ENV)
GPUS_ENV = "OPENJEV_GPUS"
#: GPUs of one kind on one Modal machine (B200 machines have 8; modal 1.6's client passes any count on).
MAX_GPUS = 8
#: Backend calls in flight per GPU (openjev's default OPENJEV_MAX_CONCURRENT_BRANCHES for one).
BRANCHES_PER_GPU = 64
SECRET_ENV = ("OPENJEV_API_KEY", "OPENJEV_BACKEND_API_KEY", "HF_TOKEN")
STORED_SECRET_ENV = "OPENJEV_MODAL_SECRET"

API_COMMAND = [
    f"{API_VENV}/bin/openjev", "serve",
    "--sglang-python", SGLANG_PYTHON,
    "--host", "0.0.0.0",
    "--port", str(PORT),
]  # fmt: skip

#: What `openjev serve` imports before it starts the server (cli.serve).
SERVING_IMPORTS = (
    "import uvicorn, uvloop, httptools; from openjev.api import create_app; from openjev.api.server import "
    "http_protocol; from openjev.api.memory import return_large_buffers; from openjev.backends import build_backend"
)

ROOT = Path(__file__).resolve().parent


def gpu_count(local: Mapping[str, str]) -> int:
    """OPENJEV_GPUS: B200s per container, 1 to MAX_GPUS (default 1)."""
    value = local.get(GPUS_ENV) or "1"
    if not value.isdigit() or not 1 <= int(value) <= MAX_GPUS:
        raise ValueError(f"{GPUS_ENV} must be a whole number from 1 to {MAX_GPUS}, got {value!r}")
    return int(value)


def gpu_spec(local: Mapping[str, str]) -> str:
    """Modal's `gpu=`: `B200` for one, `B200:N` for N on one machine."""
    count = gpu_count(local)
    return GPU if count == 1 else f"{GPU}:{count}"


def data_parallel_env(local: Mapping[str, str]) -> dict[str, str]:
    """N > 1 GPUs: SGLang runs N ranks (`--dp-size N`) on its Python frontend (the one that honours
    `routed_dp_rank`), and the container admits N times one GPU's work. One GPU: nothing is set."""
    count = gpu_count(local)
    if count == 1:
        return {}
    return {
        GPUS_ENV: str(count),  # Modal loads this file again in the container: the same `gpu=` there
        "OPENJEV_DATA_PARALLEL_SIZE": str(count),
        "OPENJEV_FRONTEND": local.get("OPENJEV_FRONTEND") or "python",
        "OPENJEV_MAX_CONCURRENT_REQUESTS": str(MAX_CONCURRENT_REQUESTS * count),
        "OPENJEV_MAX_CONCURRENT_BRANCHES": str(BRANCHES_PER_GPU * count),
    }


def sglang_version(local: Mapping[str, str]) -> str:
    """OPENJEV_SGLANG_VERSION, a release number (default DEFAULT_SGLANG_VERSION)."""
    version = local.get(SGLANG_VERSION_ENV) or DEFAULT_SGLANG_VERSION
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise ValueError(f"{SGLANG_VERSION_ENV} must be a release number such as 0.5.19, got {version!r}")
    return version


def sglang_image(local: Mapping[str, str]) -> str:
    """The official image of the release: its last CUDA 12 build (`-cu129`; the CUDA 13 images need
    r580+ drivers)."""
    return f"lmsysorg/sglang:v{sglang_version(local)}-cu129"


def image_check(sglang_python: str, api_venv: str, version: str) -> str:
    """The image's last build step: SGLang's interpreter is `version` and imports its server arguments
    (what the launch parses), and the API's own environment prints its schema (the whole application
    built) and imports what `openjev serve` imports. `--help` would not do: the CLI imports lazily, so
    a dependency missing from the image would pass it and fail the first start. A broken image fails
    the build, not the first container start."""
    sglang = (
        "from importlib.metadata import version; import sglang.srt.server_args; "
        f"assert version('sglang') == '{version}', version('sglang')"
    )
    return (
        f'{sglang_python} -c "{sglang}" && {api_venv}/bin/openjev schema > /dev/null'
        f' && {api_venv}/bin/python -c "{SERVING_IMPORTS}"'
    )


def container_env(local: Mapping[str, str]) -> dict[str, str]:
    """The container's environment: caches on the Volume, the budgets above, the forwarded local settings."""
    return {
        "HF_HOME": f"{CACHE_DIR}/huggingface",  # weights and tokenizer files
        "SGLANG_CACHE_DIR": f"{CACHE_DIR}/sglang",  # SGLang's kernel tuning cache
        "SGLANG_JIT_CACHE_DIR": f"{CACHE_DIR}/sglang-jit",  # its JIT kernels (default ~/.cache/sglang/jit)
        "FLASHINFER_WORKSPACE_BASE": f"{CACHE_DIR}/flashinfer",  # FlashInfer's JIT workspace (default ~)
        "TRITON_CACHE_DIR": f"{CACHE_DIR}/triton",  # Triton's compiled kernels
        "TORCHINDUCTOR_CACHE_DIR": f"{CACHE_DIR}/torchinductor",  # torch.compile's cache (default /tmp)
        "OPENJEV_CACHE_DIR": f"{CACHE_DIR}/openjev",  # the tokenizer check's verdict: checked once, not per start
        "HF_XET_HIGH_PERFORMANCE": "1",  # the weights download at full speed
        "OPENJEV_BACKEND_STARTUP_TIMEOUT": str(BACKEND_STARTUP_SECONDS),
        "OPENJEV_MAX_CONCURRENT_REQUESTS": str(MAX_CONCURRENT_REQUESTS),
        "OPENJEV_REQUEST_TIMEOUT": str(REQUEST_TIMEOUT_SECONDS),
        "OPENJEV_SGLANG_SHUTDOWN_GRACE": str(SGLANG_GRACE_SECONDS),
        **{name: local[name] for name in (*FORWARDED_ENV, STORED_SECRET_ENV) if local.get(name)},
        **data_parallel_env(local),
    }


def deployment_secrets(local: Mapping[str, str]) -> list[modal.Secret]:
    """The keys set locally in one Secret (never in the image; empty when none is), plus the stored
    Secret OPENJEV_MODAL_SECRET names. The same number in the container, where the keys' values come
    from the Secrets themselves and OPENJEV_MODAL_SECRET from `container_env`."""
    values = {name: local[name] for name in SECRET_ENV if local.get(name)}
    secrets = [modal.Secret.from_dict(values)]
    if local.get(STORED_SECRET_ENV):
        secrets.append(modal.Secret.from_name(local[STORED_SECRET_ENV]))
    return secrets


image = (
    modal.Image.from_registry(sglang_image(os.environ))
    .entrypoint([])  # the CUDA base image's banner script would wrap Modal's own entrypoint
    .dockerfile_commands(f"COPY --from={UV_IMAGE} /uv /usr/local/bin/uv")
    # SGLang's interpreter, pinned by path now; the build fails here if it cannot find sglang.
    .run_commands(
        """PY="$(command -v python3)" """
        """&& "$PY" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("sglang") is None)' """
        f"""&& printf '#!/bin/sh\\nexec %s "$@"\\n' "$PY" > {SGLANG_PYTHON} && chmod +x {SGLANG_PYTHON}"""
    )
    .add_local_file(ROOT / "pyproject.toml", f"{PROJECT_DIR}/pyproject.toml", copy=True)
    .add_local_file(ROOT / "uv.lock", f"{PROJECT_DIR}/uv.lock", copy=True)
    .add_local_file(ROOT / "README.md", f"{PROJECT_DIR}/README.md", copy=True)
    .add_local_dir(ROOT / "src", f"{PROJECT_DIR}/src", copy=True, ignore=["**/__pycache__", "**/*.pyc"])
    # The API in its own environment, exactly as locked, off PATH: Modal and SGLang keep the image's Python.
    .run_commands(
        f"UV_PROJECT_ENVIRONMENT={API_VENV} uv sync --project {PROJECT_DIR} "
        "--frozen --no-dev --no-editable --compile-bytecode"
    )
    .run_commands(image_check(SGLANG_PYTHON, API_VENV, sglang_version(os.environ)))
)

cache_volume = modal.Volume.from_name(VOLUME_NAME, create_if_missing=True)
app = modal.App(APP_NAME)


class ApiLauncher:
    """Runs the API process; once it is ready, its death takes the container down."""

    def __init__(self, command: Sequence[str], health_url: str, *, fallback_exit_seconds: float) -> None:
        self.command = list(command)
        self.health_url = health_url
        self.fallback_exit_seconds = fallback_exit_seconds
        self.process: subprocess.Popen[bytes] | None = None
        self._disarmed = threading.Event()

    def start(self, timeout: float) -> None:
        """Start the API and return when /health is 200; raise if it exits or times out first."""
        # Its own session: Modal's signals reach the API only through `stop`, in order.
        self.process = subprocess.Popen(self.command, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self._healthy():
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(f"openjev exited with code {code} before it was ready")
            if time.monotonic() > deadline:
                self.stop(timeout=10)
                raise TimeoutError(f"openjev was not ready within {timeout:g}s")
            time.sleep(1)
        threading.Thread(target=self._watch, name="openjev-watchdog", daemon=True).start()

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.health_url, timeout=5) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _watch(self) -> None:
        assert self.process is not None
        code = self.process.wait()
        if self._disarmed.is_set():
            return
        print(f"openjev exited with code {code}; stopping the container", file=sys.stderr, flush=True)
        # SIGTERM is Modal's own way out (@modal.exit runs, the Volume is committed), but only while
        # Modal's handler is installed: with the default action it would kill without either.
        if callable(signal.getsignal(signal.SIGTERM)):
            os.kill(os.getpid(), signal.SIGTERM)
            # The fallback waits out the whole exit budget, so it never cuts the Volume commit.
            time.sleep(self.fallback_exit_seconds)
        os._exit(code if code and code > 0 else 1)

    def stop(self, timeout: float) -> int | None:
        """Disarm the watchdog, then SIGTERM the API (it drains and stops SGLang); SIGKILL after `timeout`."""
        self._disarmed.set()
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


@app.server(
    image=image,
    gpu=gpu_spec(os.environ),
    port=PORT,
    unauthenticated=True,
    routing_region=ROUTING_REGION,
    compute_region=COMPUTE_REGIONS,
    min_containers=MIN_CONTAINERS,
    scaledown_window=SCALEDOWN_SECONDS,
    target_concurrency=TARGET_CONCURRENCY * gpu_count(os.environ),
    startup_timeout=STARTUP_SECONDS,
    exit_grace_period=EXIT_GRACE_SECONDS,
    volumes={CACHE_DIR: cache_volume},
    env=container_env(os.environ),
    secrets=deployment_secrets(os.environ),
)
class OpenJev:
    @modal.enter()
    def start(self) -> None:
        self.launcher = ApiLauncher(
            API_COMMAND, f"http://127.0.0.1:{PORT}/health", fallback_exit_seconds=EXIT_GRACE_SECONDS
        )
        self.launcher.start(timeout=STARTUP_SECONDS)

    @modal.exit()
    def stop(self) -> None:
        self.launcher.stop(timeout=API_STOP_SECONDS)
        cache_volume.commit()  # the caches written by this start, within VOLUME_COMMIT_SECONDS


@app.local_entrypoint()
def smoke(report: str = "smoke-result.json") -> None:
    """`modal run`: smoke-check the temporary Server, save the report, fail if any check fails."""
    from openjev.smoke import run_smoke  # local only: the container never runs this

    url = OpenJev.get_url()
    if not url:
        raise RuntimeError("Modal returned no URL for the Server")
    print(f"smoke-checking {url}; a cold start can take many minutes", flush=True)
    result = run_smoke(url, api_key=os.environ.get("OPENJEV_API_KEY"), startup_deadline=SMOKE_STARTUP_DEADLINE)
    Path(report).write_text(result.to_json())
    print(result.summary())
    print(f"report saved to {report}")
    if not result.ok:
        raise SystemExit(1)
