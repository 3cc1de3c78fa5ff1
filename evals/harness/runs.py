"""A run directory: run.json (what was asked of which server), results.jsonl (one line per answer), sessions.

Contract:
- run.json holds the run's identity: suite, protocol, dataset sha256, URL, the suite's own identity
  keys (`--shifts` of the MMLU family), the request's `--model` when given, the server's answer
  settings (`answer_settings` of its `/v1/limits`; None for a server that does not say them) and
  its `/v1/models` (as served; None where unreadable), with `server_unread` naming each endpoint the
  harness could not read in openjev's shape and why (transport.py; updated each session); and the
  harness checkout's git revision, the installed openjev version when the server is on this
  machine, one entry per session. The API key is never written.
- Resuming checks every identity key against the stored run.json (a key a suite adds that an older
  run.json lacks takes the suite's `absent` value; answer settings absent from a run made before
  they were recorded are taken from the server) and refuses (RunRefused) a run made for anything else.
- results.jsonl: one JSON line per answer; each item's latest line counts, a line cut short by a
  crash is skipped; at the start of a session the error lines are dropped, so they are asked again.
- `ask_pool` asks pending units `concurrency` at a time and appends their lines as they come.
- `guarded` turns a refused run or an unreachable server into exit status 2 with the reason on stderr.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from tqdm import tqdm

from evals.harness.data import Suite

REPO = Path(__file__).resolve().parents[2]
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
#: The key of openjev's `/v1/limits` answer settings, kept under the same name in run.json.
ANSWER_SETTINGS = "answer_settings"
#: run.json's record of what the harness could not read from the server: {endpoint: why}.
UNREAD = "server_unread"
Unit = TypeVar("Unit")


class RunRefused(RuntimeError):
    """The run cannot go on: a DIR made for something else, or a server that does not answer."""


def git_state() -> dict[str, Any] | None:
    """The harness checkout's revision and whether it has uncommitted changes (None outside git)."""
    try:
        revision = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {"revision": revision, "dirty": bool(status.strip())}


def local_openjev_version(url: str) -> str | None:
    """The installed openjev's version when the server runs on this machine (presumably this checkout)."""
    if urlsplit(url).hostname not in LOOPBACK_HOSTS:
        return None
    try:
        return importlib.metadata.version("openjev-server")
    except importlib.metadata.PackageNotFoundError:
        return None


def model_names(models: Any) -> list[str]:
    """The model names of an openjev-shaped `/v1/models` answer; none for any other answer."""
    entries = models.get("models") if isinstance(models, dict) else None
    return sorted(str(entry.get("name")) for entry in entries or [] if isinstance(entry, dict))


def prepare_run(
    directory: Path,
    suite: Suite,
    url: str,
    models: Any,
    settings: Any,
    protocol: Mapping[str, str],
    model: str | None = None,
    extra: Mapping[str, Any] | None = None,
    absent: Mapping[str, Any] | None = None,
    unread: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """run.json's content: the stored one when resuming (after checking it matches), else a new one (DIR created)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "run.json"
    identity = {"suite": suite.name, "protocol": dict(protocol), "dataset_sha256": suite.dataset_sha256, "url": url,
                **(extra or {}), **({} if model is None else {"model": model})}  # fmt: skip
    if path.is_file():
        meta = json.loads(path.read_text())
        stored = {**(absent or {}), **meta}
        stored.setdefault(ANSWER_SETTINGS, settings)  # a run from before they were recorded takes these
        for key, value in {**identity, ANSWER_SETTINGS: settings}.items():
            if stored.get(key) != value:
                raise RunRefused(f"{directory} holds a run with another {key}: {stored.get(key)!r}, not {value!r}")
        if meta.get("model") != model:
            raise RunRefused(f"{directory} holds a run asking model {meta.get('model')!r}, not {model!r}")
        if model_names(meta["server_models"]) != model_names(models):
            raise RunRefused(f"{directory} was run against other models: {model_names(meta['server_models'])}")
        return {**meta, ANSWER_SETTINGS: settings, UNREAD: dict(unread or {})}
    return {
        **identity,
        ANSWER_SETTINGS: settings,
        "description": suite.description,
        "server_models": models,
        UNREAD: dict(unread or {}),
        "openjev_version": local_openjev_version(url),
        "git": git_state(),
        "sessions": [],
    }


def write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def read_results(directory: Path) -> list[dict[str, Any]]:
    """The latest line for each item id, in suite order; a line cut short by a crash is skipped."""
    path = directory / "results.jsonl"
    latest: dict[str, dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text().split("\n"):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            latest[record["id"]] = record
    return sorted(latest.values(), key=lambda record: record["position"])


def read_meta(spec: str | Path) -> dict[str, Any]:
    """run.json of `DIR` (or of `DIR@VARIANT`)."""
    return json.loads((Path(str(spec).partition("@")[0]) / "run.json").read_text())


def read_run(directory: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """run.json, the answered lines and the error lines of a run directory."""
    meta = read_meta(directory)
    records = read_results(directory)
    return meta, [r for r in records if "error" not in r], [r for r in records if "error" in r]


def keep_answered(directory: Path) -> set[str]:
    """Rewrite results.jsonl with each item's latest answered line (errors and cut lines dropped); their ids."""
    answered = [record for record in read_results(directory) if "error" not in record]
    with (directory / "results.jsonl").open("w") as handle:
        handle.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in answered)
    return {record["id"] for record in answered}


def begin_session(directory: Path, meta: dict[str, Any], **fields: Any) -> float:
    """Record a new session in run.json (start time and `fields`); its monotonic start."""
    meta["sessions"].append({"started": datetime.now(UTC).isoformat(timespec="seconds"), **fields})
    write_json(directory / "run.json", meta)
    return time.monotonic()


def end_session(directory: Path, meta: dict[str, Any], started: float, asked: int, errors: int) -> None:
    meta["sessions"][-1].update(
        asked=asked, errors=errors, finished=datetime.now(UTC).isoformat(timespec="seconds"),
        wall_s=round(time.monotonic() - started, 1),
    )  # fmt: skip
    write_json(directory / "run.json", meta)


async def ask_pool(
    ask: Callable[[Unit], Awaitable[list[dict[str, Any]]]],
    pending: Sequence[Unit],
    concurrency: int,
    results: Path,
    progress: tqdm,
) -> int:
    """Ask the pending units, `concurrency` at a time, appending each unit's lines as they come; the error count."""
    queue = iter(pending)
    errors = right = answered = 0
    with results.open("a") as handle, progress:

        async def worker() -> None:
            nonlocal errors, right, answered
            for unit in queue:
                records = await ask(unit)
                handle.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
                handle.flush()
                for record in records:
                    if "error" in record:
                        errors += 1
                    else:
                        answered += 1
                        right += record["choice"] == record["gold"]
                progress.set_postfix(accuracy=f"{right / max(answered, 1):.3f}", errors=errors)
                progress.update()

        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(worker())
    return errors


def guarded(run: Coroutine[Any, Any, int]) -> int | None:
    """The run's error count; None, with the reason on stderr, when it was refused or the server went away."""
    try:
        return asyncio.run(run)
    except RunRefused as error:
        print(f"refused: {error}", file=sys.stderr)
    except (httpx.TransportError, ExceptionGroup) as error:
        unreachable = error.subgroup(httpx.TransportError) if isinstance(error, ExceptionGroup) else error
        if unreachable is None:
            raise
        print(f"stopped, the server is unreachable: {unreachable!r}; run again to resume", file=sys.stderr)
    return None


def ask_then_report(
    asking: Coroutine[Any, Any, int],
    directory: Path,
    report: Callable[[Path], dict[str, Any]],
    line: Callable[..., str],
) -> int:
    """A suite's run: `asking` (guarded), then its report written from `directory` and `line(report,
    errors)` printed; evals/run.py's exit status: 2 when refused or cut off, 1 with errors, else 0."""
    errors = guarded(asking)
    if errors is None:
        return 2
    print(line(report(directory), errors))
    return 1 if errors else 0
