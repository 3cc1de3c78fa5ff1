"""Ask a Jev `/v1/systemone` every item of a suite, record the answers, then write the report.

Usage: uv run evals/run.py SUITE [--url URL] [--api-key K] [--limit N] [--concurrency C] [--model NAME] --out DIR

Contract:
- DIR/run.json: the run's metadata (suite, protocol, dataset sha256, URL, `--shifts`, the server's
  answer settings (`/v1/limits`), the server's `/v1/models`,
  the harness checkout's git revision, the installed openjev version when the server is on this
  machine, one entry per session with its times). The API key is never written.
- DIR/results.jsonl: one JSON line per item as soon as it is answered: `position` (in the suite
  order), `id`, `row`, `subject`, `gold`, then `choice`, `probabilities`, `confidence`, `model`,
  `usage`, `latency_s` (of the answered attempt) and `attempts`; or `error` instead of the answer;
  and, when the server sends them (its thinking tier), `escalated` and `reasoning_tokens`.
- `--model NAME` sends NAME as the request's `model` (e.g. the thinking tier, `openjev-think`); it is
  part of the run's identity (run.json `model`), while the protocol and so `compare.py` stay the same.
- Resumable: running again on the same DIR asks only the items of the first N that have no answer
  yet (errors are asked again). A DIR made for another suite, protocol, dataset, URL, set of
  served model names, `--shifts` (absent in run.json: 1) or other answer settings of the server
  (`answer_settings` of its `/v1/limits`: cue, option shifts, label prior, temperature, confidence,
  calibration file's sha256; None for a server without them) is refused. A DIR from before answer
  settings were recorded takes the server's at its next session.
- 429, 503 and 529 are retried after `retry-after-ms` or `Retry-After` (1 s when absent, at most
  60 s a wait) for up to 30 minutes an item. Any other failure status, or an answer that breaks
  the contract, is recorded as that item's error. A transport failure (server gone) stops the run;
  what was answered stays in DIR.
- At the end DIR/report.{json,md} and DIR/reliability.png are written (evals/report.py).
- `jev-dev` (several questions per request, all three types) is asked by evals/jev_run.py, with
  the same retries, resuming and run.json checks; `--types` keeps only some question types.
- Exit status: 0 when every item asked for has an answer, 1 when some have errors, 2 when the run
  could not go on (a refused DIR, an unreachable server).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from tqdm import tqdm

if __package__ in {None, ""}:  # run as a script (`uv run evals/run.py`): make the `evals` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import contextlib

from evals.report import read_results, write_report
from evals.suites import PROTOCOL, QUESTION_ID, SUITES, Item, Suite, load_suite, shift_id
from openjev.answering.answers import shift_offsets

DEFAULT_URL = "http://127.0.0.1:8000"
#: Jev-native requests, several questions each (evals/jev_dev.py, evals/jev_run.py).
JEV_DEV_SUITE = "jev-dev"
RETRY_STATUSES = frozenset({429, 503, 529})
RETRY_DEADLINE_S = 1800.0
MAX_RETRY_WAIT_S = 60.0
REQUEST_TIMEOUT_S = 600.0
REPO = Path(__file__).resolve().parents[1]
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
#: The key of openjev's `/v1/limits` answer settings, kept under the same name in run.json.
ANSWER_SETTINGS = "answer_settings"


class RunRefused(RuntimeError):
    """The run cannot go on: a DIR made for something else, or a server that does not answer."""


def retry_delay(headers: httpx.Headers) -> float:
    """Seconds to wait before retrying: `retry-after-ms`, else `Retry-After` in seconds, else 1; at most 60."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return min(max(float(headers[name]) * scale, 0.0), MAX_RETRY_WAIT_S)
        except (KeyError, ValueError):
            continue
    return 1.0


async def send_with_retry(
    send: Callable[[], Awaitable[httpx.Response]], deadline_s: float = RETRY_DEADLINE_S
) -> tuple[httpx.Response, int, float]:
    """The first response that is not 429/503/529 (or the last one past the deadline), attempts, its latency."""
    give_up_at = time.monotonic() + deadline_s
    attempts = 0
    while True:
        attempts += 1
        started = time.perf_counter()
        response = await send()
        latency = time.perf_counter() - started
        if response.status_code not in RETRY_STATUSES or time.monotonic() >= give_up_at:
            return response, attempts, latency
        await asyncio.sleep(retry_delay(response.headers))


def read_answer(body: Any, item: Item, question_id: str = QUESTION_ID) -> dict[str, Any]:
    """The fields recorded from a 200 answer; ValueError when it breaks the Jev contract for this item."""
    try:
        answer = body["answers"][question_id]
        probabilities = {letter: float(answer["probabilities"][letter]) for letter in item.letters}
        choice = answer["choice"]
        extra = set(answer["probabilities"]) - set(item.letters)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"malformed answer: {error!r}") from error
    if answer.get("type") != "choice" or choice not in probabilities or extra:
        raise ValueError(f"answer breaks the contract: {json.dumps(answer)[:300]}")
    return {
        "choice": choice,
        "probabilities": probabilities,
        "confidence": answer.get("confidence"),
        "model": body.get("model"),
        "usage": body.get("usage"),
    }


def read_shifts(body: Any, item: Item, offsets: Sequence[int]) -> dict[str, Any]:
    """Every rotation's distribution, by original letter, in `offsets` order (`--shifts`)."""
    return {
        "offsets": list(offsets),
        "probabilities": [read_answer(body, item, shift_id(offset))["probabilities"] for offset in offsets],
    }


def server_timing(headers: httpx.Headers) -> dict[str, float]:
    """`Server-Timing: prep;dur=1.2, prefill;dur=…` as {name: milliseconds}; unreadable entries skipped."""
    timing = {}
    for entry in headers.get("server-timing", "").split(","):
        name, _, rest = entry.strip().partition(";")
        for parameter in rest.split(";"):
            key, _, value = parameter.strip().partition("=")
            if key == "dur" and name:
                with contextlib.suppress(ValueError):
                    timing[name] = float(value)
    return timing


def thinking_headers(headers: httpx.Headers) -> dict[str, int]:
    """The thinking tier's `x-openjev-escalated` and `x-openjev-reasoning-tokens`, where sent."""
    found = {}
    for key, header in (("escalated", "x-openjev-escalated"), ("reasoning_tokens", "x-openjev-reasoning-tokens")):
        with contextlib.suppress(KeyError, ValueError):
            found[key] = int(headers[header])
    return found


async def ask(
    client: httpx.AsyncClient, item: Item, position: int, shifts: int = 1, model: str | None = None
) -> dict[str, Any]:
    """One item's results line: its answer, or an `error` for a failure status or a malformed answer.

    With `shifts` > 1 the request also asks the item's options in the other rotations of
    `shift_offsets`, recorded under `shifts`; `choice` and `probabilities` stay the protocol's."""
    record: dict[str, Any] = {
        "position": position,
        "id": item.id,
        "row": item.row,
        "subject": item.subject,
        "gold": item.gold,
    }
    offsets = shift_offsets(len(item.options), shifts)
    request = item.shifted_request(offsets) if shifts > 1 else item.request()
    if model is not None:
        request["model"] = model
    response, attempts, latency = await send_with_retry(lambda: client.post("/v1/systemone", json=request))
    try:
        if response.status_code != 200:
            raise ValueError(f"HTTP {response.status_code}: {response.text[:300]}")
        body = response.json()
        record.update(read_answer(body, item))
        if shifts > 1:
            record["shifts"] = read_shifts(body, item, offsets)
    except ValueError as error:
        record["error"] = str(error)
    record.update(latency_s=round(latency, 4), attempts=attempts, server_timing_ms=server_timing(response.headers))
    record.update(thinking_headers(response.headers))
    return record


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
        return importlib.metadata.version("openjev")
    except importlib.metadata.PackageNotFoundError:
        return None


def model_names(models: Any) -> list[str]:
    return sorted(str(entry.get("name")) for entry in models.get("models", []) if isinstance(entry, dict))


def prepare_run(
    directory: Path,
    suite: Suite,
    url: str,
    models: Any,
    shifts: int = 1,
    settings: Any = None,
    protocol: dict[str, str] = PROTOCOL,
    model: str | None = None,
) -> dict[str, Any]:
    """run.json's content: the stored one when resuming (after checking it matches), else a new one."""
    path = directory / "run.json"
    # The protocol's own answer is unchanged by --shifts; the rotations are extra questions in the same request.
    identity = {"suite": suite.name, "protocol": protocol, "dataset_sha256": suite.dataset_sha256, "url": url,
                "shifts": shifts, **({} if model is None else {"model": model})}  # fmt: skip
    if path.is_file():
        meta = json.loads(path.read_text())
        stored = {**meta, "shifts": meta.get("shifts", 1)}
        stored.setdefault(ANSWER_SETTINGS, settings)  # a run from before they were recorded takes these
        for key, value in {**identity, ANSWER_SETTINGS: settings}.items():
            if stored.get(key) != value:
                raise RunRefused(f"{directory} holds a run with another {key}: {stored.get(key)!r}, not {value!r}")
        if meta.get("model") != model:
            raise RunRefused(f"{directory} holds a run asking model {meta.get('model')!r}, not {model!r}")
        if model_names(meta["server_models"]) != model_names(models):
            raise RunRefused(f"{directory} was run against other models: {model_names(meta['server_models'])}")
        return {**meta, ANSWER_SETTINGS: settings}
    return {
        **identity,
        ANSWER_SETTINGS: settings,
        "description": suite.description,
        "server_models": models,
        "openjev_version": local_openjev_version(url),
        "git": git_state(),
        "sessions": [],
    }


def write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


async def fetch_answer_settings(client: httpx.AsyncClient) -> Any:
    """The server's answer settings (openjev's `/v1/limits`), or None where it does not say them."""
    response, _, _ = await send_with_retry(lambda: client.get("/v1/limits"))
    if response.status_code != 200:
        return None
    with contextlib.suppress(ValueError, AttributeError):
        return response.json().get(ANSWER_SETTINGS)
    return None


async def fetch_models(client: httpx.AsyncClient) -> Any:
    response, _, _ = await send_with_retry(lambda: client.get("/v1/models"))
    if response.status_code != 200:
        raise RunRefused(f"GET /v1/models answered {response.status_code}: {response.text[:300]}")
    return response.json()


def start_session(
    directory: Path, suite: Suite, items: Sequence[Item], args: argparse.Namespace, models: Any, settings: Any = None
) -> tuple[dict[str, Any], list[tuple[int, Item]]]:
    """Check or create run.json, keep only answered lines in results.jsonl; run.json and the items to ask."""
    directory.mkdir(parents=True, exist_ok=True)
    meta = prepare_run(directory, suite, args.url, models, args.shifts, settings, model=args.model)
    # Keep each item's latest answer; errors and a line cut short by a crash are dropped and asked again.
    answered = [record for record in read_results(directory) if "error" not in record]
    done = {record["id"] for record in answered}
    with (directory / "results.jsonl").open("w") as handle:
        handle.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in answered)
    pending = [(position, item) for position, item in enumerate(items) if item.id not in done]
    meta["sessions"].append({"started": datetime.now(UTC).isoformat(timespec="seconds"), "limit": args.limit})
    write_json(directory / "run.json", meta)
    return meta, pending


async def evaluate(args: argparse.Namespace, suite: Suite, directory: Path) -> int:
    """Ask every item of the suite's first --limit that DIR has no answer for; the number of errors."""
    items = suite.items[: args.limit]
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    async with httpx.AsyncClient(base_url=args.url, headers=headers, timeout=REQUEST_TIMEOUT_S) as client:
        try:
            models = await fetch_models(client)
            settings = await fetch_answer_settings(client)
        except httpx.TransportError as error:
            raise RunRefused(f"{args.url} cannot be reached: {error!r}") from error
        meta, pending = start_session(directory, suite, items, args, models, settings)
        started = time.monotonic()
        errors = await ask_all(client, pending, args, directory / "results.jsonl", len(items))
    meta["sessions"][-1].update(
        asked=len(pending),
        errors=errors,
        finished=datetime.now(UTC).isoformat(timespec="seconds"),
        wall_s=round(time.monotonic() - started, 1),
    )
    write_json(directory / "run.json", meta)
    return errors


async def ask_all(
    client: httpx.AsyncClient, pending: Sequence[tuple[int, Item]], args: argparse.Namespace, results: Path, total: int
) -> int:
    """Ask the pending items with --concurrency requests in flight, appending each line as it comes; the error count."""
    queue = iter(pending)
    errors = 0
    right = answered = 0
    with results.open("a") as handle, tqdm(total=total, initial=total - len(pending), unit="item") as progress:

        async def worker() -> None:
            nonlocal errors, right, answered
            for position, item in queue:
                record = await ask(client, item, position, args.shifts, args.model)
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                handle.flush()
                if "error" in record:
                    errors += 1
                else:
                    answered += 1
                    right += record["choice"] == record["gold"]
                progress.set_postfix(accuracy=f"{right / max(answered, 1):.3f}", errors=errors)
                progress.update()

        async with asyncio.TaskGroup() as group:
            for _ in range(args.concurrency):
                group.create_task(worker())
    return errors


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run an answer-quality suite against a Jev /v1/systemone.")
    parser.add_argument("suite", choices=(*SUITES, JEV_DEV_SUITE))
    parser.add_argument("--url", default=DEFAULT_URL, help=f"server base URL (default {DEFAULT_URL})")
    parser.add_argument("--api-key", help="sent as Authorization: Bearer KEY")
    parser.add_argument("--limit", type=int, help="ask only the suite's first N items")
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight (default 1)")
    parser.add_argument("--out", required=True, help="run directory (created; resumed when it exists)")
    parser.add_argument(
        "--shifts",
        type=int,
        default=1,
        help="also ask each item's options in K-1 more cyclic rotations, in the same request (default 1: off)",
    )
    parser.add_argument(
        "--types", default="noul,choice,score", help="jev-dev: the question types asked (default all three)"
    )
    parser.add_argument("--model", help="the request's `model` (default: the protocol's, jev-latest)")
    args = parser.parse_args(argv)
    if args.concurrency < 1 or args.shifts < 1 or (args.limit is not None and args.limit < 1):
        parser.error("--limit, --concurrency and --shifts must be at least 1")
    args.url = args.url.rstrip("/")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.suite == JEV_DEV_SUITE:
        from evals.jev_run import run_jev_dev

        return run_jev_dev(args)
    suite = load_suite(args.suite)
    directory = Path(args.out)
    try:
        errors = asyncio.run(evaluate(args, suite, directory))
    except RunRefused as error:
        print(f"refused: {error}", file=sys.stderr)
        return 2
    except ExceptionGroup as group:
        unreachable = group.subgroup(httpx.TransportError)
        if unreachable is None:
            raise
        print(
            f"stopped, the server is unreachable: {unreachable.exceptions[0]!r}; run again to resume", file=sys.stderr
        )
        return 2
    if not any("error" not in record for record in read_results(directory)):
        print(f"{suite.name}: no item was answered ({errors} errors); see {directory / 'results.jsonl'}")
        return 1
    report = write_report(directory)
    print(
        f"{suite.name}: {report['n']} answered, {report['errors']} errors, accuracy {report['accuracy']:.1%} "
        f"({report['accuracy_ci95'][0]:.1%}-{report['accuracy_ci95'][1]:.1%}); report in {directory}"
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
