"""Supervised SGLang: `openjev serve --sglang-python PY` runs SGLang as a child of the API process.

Contract:
- `start()` resolves a local tokenizer directory (OPENJEV_TOKENIZER, else only the tokenizer files of
  OPENJEV_MODEL at OPENJEV_REVISION from the hub), launches `PY -m sglang.launch_server` bound to
  127.0.0.1 on a free port, forwards its output line by line to the `openjev.sglang.process` logger
  with a `[sglang] ` prefix, and returns once `SGLangBackend.start()` has seen SGLang really ready
  (`/health` 200, then one real generation). If SGLang exits first, `start()` fails at once with
  its exit code.
- `sglang_command` and `sglang_environment` are the one place where SGLang's flags and environment
  are chosen.
- Once SGLang is ready, an exit that openjev did not ask for calls `on_fatal` (the CLI then stops
  the API with a non-zero status): there is never a live API in front of a dead backend.
- `aclose()` runs at lifespan shutdown, after the HTTP server has stopped taking requests and drained
  the in-flight ones. It sends SIGTERM to SGLang's process group, SIGKILL after
  OPENJEV_SGLANG_SHUTDOWN_GRACE seconds, and returns when the group is gone.
- SGLang runs in its own session, so Ctrl-C and SIGTERM reach only the API, which stops SGLang last.
  On Linux the kernel also kills SGLang if the API process dies without stopping it.

The API's environment never imports sglang; the given interpreter is only executed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import shlex
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

from openjev.backends.base import BackendError
from openjev.backends.sglang import SGLangBackend, client_options
from openjev.config import Settings, served_model_name
from openjev.options import Frontend
from openjev.prompting.tokenizer_source import resolve_tokenizer_dir

log = logging.getLogger("openjev.supervised")
process_log = logging.getLogger("openjev.sglang.process")

LOG_PREFIX = "[sglang] "
# Progress bars can write long lines without a newline; longer chunks are forwarded in pieces.
_MAX_LOG_LINE = 1 << 20
_LOG_DRAIN_SECONDS = 5.0
_GROUP_POLL_SECONDS = 0.1
# Reads the installed release without importing sglang (seconds of imports on a GPU image).
_VERSION_PROBE = "from importlib.metadata import version; print(version('sglang'))"


def sglang_command(settings: Settings, port: int, tokenizer_dir: Path) -> list[str]:
    """`<sglang python> -m sglang.launch_server ...` with every flag openjev sets."""
    if settings.sglang_python is None:
        raise ValueError("supervised mode needs OPENJEV_SGLANG_PYTHON (--sglang-python)")
    api_key = settings.backend_api_key.get_secret_value() if settings.backend_api_key else None
    return [
        str(settings.sglang_python), "-m", "sglang.launch_server",
        "--model-path", settings.model,
        *(["--revision", settings.revision] if settings.revision else []),
        # A local directory: the Rust frontend cannot resolve a revision-pinned hub name itself, and
        # the API reads exactly the same tokenizer and chat template.
        "--tokenizer-path", str(tokenizer_dir),
        "--served-model-name", served_model_name(settings, None),
        # Only the API process talks to SGLang: its generation and admin routes stay private.
        "--host", "127.0.0.1",
        "--port", str(port),
        # SGLang's context length: the model's own unless the operator caps long contexts. The API admits
        # prompts strictly below the scheduler's limit derived from it (`max_req_input_len`, six tokens
        # less: see `sglang_facts.admissible_budget`), which SGLang reports once ready.
        *(["--context-length", str(cap)] if (cap := settings.max_long_context_tokens) else []),
        # SGLang's own start-up warm-up asks for no logprobs; the Rust frontend's /health is 200 before
        # it runs, and a readout batched with it crashes the scheduler (#34719). openjev's readiness
        # readout (which carries token_ids_logprob) is the warm-up instead.
        "--skip-server-warmup",
        # The radix cache is on by default (never pass --disable-radix-cache). On a hybrid model such as
        # Qwen3.6 it reuses the prefix only if recurrent state is kept at branch points: SGLang's `auto`
        # mamba strategy picks `extra_buffer` for those architectures itself. Forcing it crashes the
        # scheduler at the first prefill of a dense model (0.5.19, found by tests/sglang_live).
        # Prefill batches asking for logprobs (every readout) still replay breakable CUDA graphs.
        "--cuda-graph-backend-prefill", "breakable",
        # One scheduler and radix cache per rank behind one HTTP front; openjev pins each conversation
        # to one of them (`affinity.py`). One rank: no flag, today's command exactly.
        *(["--dp-size", str(settings.data_parallel_size)] if (settings.data_parallel_size or 1) > 1 else []),
        *(["--api-key", api_key] if api_key else []),
        *shlex.split(settings.sglang_args or ""),
    ]  # fmt: skip


def sglang_environment(settings: Settings) -> dict[str, str]:
    """Variables set for SGLang on top of the API process's own environment."""
    return {
        # The HTTP frontend is an environment switch, not a flag: Rust (the default) or Python.
        "SGLANG_RUST_SERVER": "1" if settings.frontend is Frontend.rust else "0",
        # /health must not inject a generation: that probe has no token_ids_logprob, and batched with
        # a readout it crashes the scheduler (SGLang #34719).
        "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "0",
        # Its output reaches us through a pipe: unbuffered, lines arrive as they are written.
        "PYTHONUNBUFFERED": "1",
    }


def redacted(command: list[str]) -> list[str]:
    """The command as it may be logged: the API key's value hidden."""
    return ["REDACTED" if index and command[index - 1] == "--api-key" else part for index, part in enumerate(command)]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _signal_group(group: int, signum: int) -> bool:
    """Signal every process of the group; False when none is left."""
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        return False
    return True


if sys.platform == "linux":
    _libc = ctypes.CDLL(None, use_errno=True)
    _PR_SET_PDEATHSIG = 1

    def _die_with_parent() -> None:
        # Runs in the child between fork and exec: if the API process dies without stopping SGLang
        # (SIGKILL, out of memory), the kernel kills SGLang's launcher, whose workers follow it. The
        # signal follows the forking thread, the event loop's, which lives as long as the API.
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

    _PREEXEC: Callable[[], None] | None = _die_with_parent
else:  # pragma: no cover - macOS development machines
    _PREEXEC = None


class SupervisedSGLangBackend(SGLangBackend):
    """An `SGLangBackend` whose server is a child process that this backend starts and stops."""

    kind = "sglang-supervised"

    def __init__(self, settings: Settings, *, on_fatal: Callable[[BaseException], None]) -> None:
        self.settings = settings
        self.port = free_port()
        # SGLang runs on this machine: it can read openjev's image files (`sglang_images.py`).
        super().__init__(f"http://127.0.0.1:{self.port}", **client_options(settings, co_located=True))
        self._on_fatal = on_fatal
        self._tokenizer_dir: Path | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._exited: asyncio.Task[int] | None = None
        self._log_task: asyncio.Task[None] | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def tokenizer_dir(self) -> Path | None:
        return self._tokenizer_dir

    @property
    def model_name(self) -> str:
        return served_model_name(self.settings, None)

    async def start(self) -> None:
        await self._check_version()
        # SGLang has no tokenizer of its own to offer yet: explicit directory, else the hub's files.
        self._tokenizer_dir = await asyncio.to_thread(
            resolve_tokenizer_dir, self.settings.tokenizer, None, self.settings.model, self.settings.revision
        )
        # The vision files are read from it too, before any hub look-up (`sglang_vision.read_vision`).
        self._tokenizer = self._tokenizer_dir
        exited = await self._launch(sglang_command(self.settings, self.port, self._tokenizer_dir))
        ready = asyncio.ensure_future(super().start())
        try:
            await asyncio.wait({ready, exited}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not ready.done():
                ready.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ready
        if ready.cancelled():
            raise BackendError(
                f"SGLang exited with code {exited.result()} before it was ready "
                f"(its output is logged above with the prefix {LOG_PREFIX!r})"
            )
        ready.result()
        self._watch_task = asyncio.create_task(self._watch(exited))

    async def _check_version(self) -> None:
        """The interpreter's sglang must be OPENJEV_SGLANG_VERSION: the limits and flags openjev relies on
        are those of the release it was verified on."""
        wanted = self.settings.sglang_version
        process = await asyncio.create_subprocess_exec(
            str(self.settings.sglang_python), "-c", _VERSION_PROBE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await process.communicate()
        found, python = out.decode(errors="replace").strip(), self.settings.sglang_python
        if process.returncode != 0:
            raise BackendError(f"OPENJEV_SGLANG_PYTHON={python} has no sglang: {err.decode(errors='replace')[-300:]}")
        if found != wanted:
            raise BackendError(
                f"OPENJEV_SGLANG_PYTHON={python} runs sglang {found}, but OPENJEV_SGLANG_VERSION "
                f"is {wanted}: install {wanted} there, or set the version that is installed"
            )

    async def _launch(self, command: list[str]) -> asyncio.Task[int]:
        log.info("launching SGLang: %s", shlex.join(redacted(command)))
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env={**os.environ, **sglang_environment(self.settings)},
                start_new_session=True,
                preexec_fn=_PREEXEC,
                limit=_MAX_LOG_LINE,
            )
        except OSError as error:
            raise BackendError(f"cannot run the SGLang interpreter {command[0]!r}: {error}") from error
        assert process.stdout is not None
        self._process = process
        self._exited = exited = asyncio.ensure_future(process.wait())
        self._log_task = asyncio.create_task(self._forward_logs(process.stdout))
        log.info("SGLang started (pid %d, port %d)", process.pid, self.port)
        return exited

    async def _forward_logs(self, stream: asyncio.StreamReader) -> None:
        while True:
            try:
                chunk = await stream.readuntil(b"\n")
            except asyncio.IncompleteReadError as end:
                chunk = end.partial
            except asyncio.LimitOverrunError as overrun:
                chunk = await stream.readexactly(overrun.consumed)
            if not chunk:
                return
            # Progress bars redraw with carriage returns; the last state is the one worth keeping.
            line = chunk.decode(errors="replace").rstrip().rsplit("\r", 1)[-1]
            if line:
                process_log.info("%s%s", LOG_PREFIX, line)

    async def _watch(self, exited: asyncio.Task[int]) -> None:
        code = await asyncio.shield(exited)
        if self._stopping:
            return
        error = BackendError(f"SGLang exited unexpectedly with code {code}")
        log.error("%s; stopping openjev", error)
        self._on_fatal(error)

    async def aclose(self) -> None:
        self._stopping = True
        if self._watch_task is not None:
            self._watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch_task
        if self._process is not None and self._exited is not None:
            await self._stop_process_group(self._process.pid, self._exited)
        if self._log_task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._log_task, _LOG_DRAIN_SECONDS)
        await super().aclose()

    async def _stop_process_group(self, group: int, exited: asyncio.Task[int]) -> None:
        """SIGTERM to the whole group (SGLang's launcher leads it), SIGKILL after the grace period."""
        if not _signal_group(group, signal.SIGTERM):
            return
        grace = self.settings.sglang_shutdown_grace
        deadline = time.monotonic() + grace
        log.info("stopping SGLang (SIGTERM to process group %d)", group)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(exited), grace)
        # The launcher may be gone while its workers are still exiting; they share its group. They are
        # not our children, so no event reports their exit: poll.
        while _signal_group(group, 0) and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(_GROUP_POLL_SECONDS)
        if _signal_group(group, signal.SIGKILL):
            log.warning("SGLang did not exit within %gs of SIGTERM: killed", grace)
        log.info("SGLang stopped (exit code %s)", await exited)
