"""`openjev eval` and `openjev classify` around the client: what the user is told before, during and after.

- The answers file is opened (and checked: `answers_file.py`) before any server is started; a refusal
  is exit 2 naming the difference.
- While rows are asked, `Progress` shows them; Ctrl-C (exit 130) and SIGTERM (exit 143) stop the run
  saying how many rows are kept and the exact command that resumes it; a server that cannot be
  reached, or that failed MAX_FAILURES_IN_A_ROW times in a row or refused the key mid-run, is exit 1
  with the same two facts; a key refused before the first row is exit 2, one line, nothing sent.
- No line printed holds a secret: the `--api-key` and a URL's password are shown as `client.MASK`, and the
  resume command passes the key as `--api-key "$OPENJEV_API_KEY"`.
- At the end: rows answered of the total, the retries by reason, and each row without an answer
  named with its line and status (the first MAX_NAMED).
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from openjev.batch.answers_file import ResumeRefused, open_answers, read_answers, run_header
from openjev.batch.client import KeyRefused, ServerUnreachable, masked
from openjev.batch.jobs import Target, answer_file
from openjev.batch.local_server import ServerFailed
from openjev.batch.progress import Progress
from openjev.batch.rows import Row

MAX_NAMED = 20
#: Exit statuses of a run stopped by a signal: 128 + its number, as a shell reports it.
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, stopping the run as Ctrl-C does."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def run_rows(
    rows: list[Row],
    target: Target,
    answers: Path,
    *,
    source: Path,
    restart: bool,
    on_served: Callable[[str], None] = lambda url: None,
    counted: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every row asked into `answers` (module doc); the records by row id. `on_served` gets the server's
    URL before the first row is asked; `counted`, where given, gets this run's `retries` (their text)."""
    say = _masker(target)
    try:
        opened = open_answers(answers, run_header(source, rows), restart=restart)
    except ResumeRefused as error:
        typer.echo(say(f"openjev: {error}"), err=True)
        raise typer.Exit(2) from None
    progress = Progress(len(rows))
    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if on_main else None
    try:
        with progress:
            records = answer_file(rows, target, answers, opened, progress, on_served)
    except KeyboardInterrupt as stop:
        how, status = (
            ("terminated (SIGTERM)", EXIT_TERMINATED)
            if isinstance(stop, Terminated)
            else ("interrupted", EXIT_INTERRUPTED)
        )
        typer.echo(say(f"openjev: {how}. {_kept(rows, answers)}"), err=True)
        raise typer.Exit(status) from None
    except KeyRefused as error:
        typer.echo(say(f"openjev: {error}"), err=True)
        raise typer.Exit(2) from None
    except (ServerUnreachable, ServerFailed) as error:
        typer.echo(say(f"openjev: {error}\n{_kept(rows, answers)}"), err=True)
        raise typer.Exit(1) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if counted is not None:
        counted["retries"] = progress.retry_text()
    _say_end(rows, records, answers, progress, say)
    return records


def _say_end(
    rows: list[Row], records: dict[str, Any], answers: Path, progress: Progress, say: Callable[[str], str]
) -> None:
    """Rows answered of the total, the retries, and each row without an answer (the first MAX_NAMED)."""
    missing = [row for row in rows if "answer" not in records.get(row.id, {})]
    answered = f"{len(rows) - len(missing)} of {len(rows)} rows answered into {answers}; {progress.retry_text()}"
    typer.echo(say(answered), err=True)
    if missing:
        named = "\n".join(
            f"  {row.id} (line {row.line}): {_status(records.get(row.id))}" for row in missing[:MAX_NAMED]
        )
        more = f"\n  ... and {len(missing) - MAX_NAMED} more" if len(missing) > MAX_NAMED else ""
        typer.echo(say(f"rows without an answer (run again to ask them again):\n{named}{more}"), err=True)


def _masker(target: Target) -> Callable[[str], str]:
    """A function that shows `text` with the run's secrets (its key, its URL's password) masked."""
    return lambda text: masked(text, target.url, target.api_key)


def resume_command() -> str:
    """The command line of this run, without --restart and with the key from OPENJEV_API_KEY: what picks
    it up where it stopped."""
    kept, given, skip = [], False, False
    for argument in sys.argv[1:]:
        if skip:
            skip = False
        elif argument == "--api-key":
            given = skip = True
        elif argument.startswith("--api-key="):
            given = True
        elif argument != "--restart":
            kept.append(argument)
    return shlex.join(["openjev", *kept]) + (' --api-key "$OPENJEV_API_KEY"' if given else "")


def _kept(rows: list[Row], answers: Path) -> str:
    records = read_answers(answers)
    kept = sum(1 for row in rows if "answer" in records.get(row.id, {}) and records[row.id].get("input") == row.digest)
    return f"{kept} of {len(rows)} rows have an answer kept in {answers}; resume with:\n  {resume_command()}"


def _status(record: dict[str, Any] | None) -> str:
    if record is None:
        return "not asked"
    error = record.get("error", {})
    body = error.get("body")
    detail = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return f"HTTP {error.get('status')} {detail[:200]}"
