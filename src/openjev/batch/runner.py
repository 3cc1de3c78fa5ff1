"""`openjev eval` and `openjev classify` around the client: what the user is told before, during and after.

- The answers file is opened (and checked: `answers_file.py`) before any server is started; a refusal
  is exit 2 naming the difference.
- While rows are asked, `Progress` shows them; Ctrl-C stops the run with exit 130, saying how many
  rows are kept and the exact command that resumes it; a server that cannot be reached is exit 1
  with the same two facts.
- At the end: rows answered of the total, the retries by reason, and each row without an answer
  named with its line and status (the first MAX_NAMED).
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from openjev.batch.answers_file import ResumeRefused, open_answers, read_answers, run_header
from openjev.batch.client import ServerUnreachable
from openjev.batch.jobs import Target, answer_file
from openjev.batch.local_server import ServerFailed
from openjev.batch.progress import Progress
from openjev.batch.rows import Row

MAX_NAMED = 20


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
    try:
        opened = open_answers(answers, run_header(source, rows), restart=restart)
    except ResumeRefused as error:
        typer.echo(f"openjev: {error}", err=True)
        raise typer.Exit(2) from None
    progress = Progress(len(rows))
    try:
        with progress:
            records = answer_file(rows, target, answers, opened, progress, on_served)
    except KeyboardInterrupt:
        typer.echo(f"openjev: interrupted. {_kept(rows, answers)}", err=True)
        raise typer.Exit(130) from None
    except (ServerUnreachable, ServerFailed) as error:
        typer.echo(f"openjev: {error}\n{_kept(rows, answers)}", err=True)
        raise typer.Exit(1) from None
    if counted is not None:
        counted["retries"] = progress.retry_text()
    missing = [row for row in rows if "answer" not in records.get(row.id, {})]
    typer.echo(
        f"{len(rows) - len(missing)} of {len(rows)} rows answered into {answers}; {progress.retry_text()}", err=True
    )
    if missing:
        named = "\n".join(
            f"  {row.id} (line {row.line}): {_status(records.get(row.id))}" for row in missing[:MAX_NAMED]
        )
        more = f"\n  ... and {len(missing) - MAX_NAMED} more" if len(missing) > MAX_NAMED else ""
        typer.echo(f"rows without an answer (run again to ask them again):\n{named}{more}", err=True)
    return records


def resume_command() -> str:
    """The command line of this run, without --restart: what picks it up where it stopped."""
    return shlex.join(["openjev", *(argument for argument in sys.argv[1:] if argument != "--restart")])


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
