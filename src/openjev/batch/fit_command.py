"""`openjev tasks fit FILE` as the user sees it: the file read as `eval` reads one, its problems and the
server's refusals as `openjev: FILE:LINE: ...` lines, and what the stored task will do said plainly.

- Columns: `--state-column`, `--label-column` (the label; `gold` is read where `label` is absent, so an
  `eval` file fits as it is), `--pair-column`; names match up to case, dotted names reach into nested
  objects (`request/labelled_files.py`).
- A file that cannot be read is exit 2; a fit the server refuses is exit 1, a 422 on an example named
  by the file line it came from.
- After the report, a warning on stderr where the stored calibration will not do what its figures
  suggest: adopted but the identity (temperature 1, no biases: the answers are the plain readout's),
  at the temperature cap (MAX_TEMPERATURE: probabilities nearly flat), or one label answering every
  state: the calibrated logit is (log p_i + b_i)/T with log p_i in [log PROBABILITY_FLOOR, 0], so a
  label whose bias leads every other by more than log(1/PROBABILITY_FLOOR) wins whatever p is.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import typer

from openjev.answering.answers import PROBABILITY_FLOOR
from openjev.tasks.calibration import MAX_TEMPERATURE


def fit_file(
    file: Path, question: Any, columns: dict[str, str], url: str | None, api_key: str | None, json_file: Path | None
) -> None:
    """The command (module doc): read, fit on `url` (or the embedded default), print the report."""
    from openjev.batch.client import ServerUnreachable
    from openjev.batch.jobs import Target, served
    from openjev.batch.local_server import ServerFailed
    from openjev.batch.task_fit import fit
    from openjev.request.labelled_files import LabelledFileError, read_labelled
    from openjev.tasks.client import report_lines

    try:
        examples = read_labelled(file, columns)
    except LabelledFileError as error:
        typer.echo(f"openjev: {error}", err=True)
        raise typer.Exit(2) from None
    body = {"question": question, "examples": [example for _, example in examples]}
    try:
        with served(Target(url)) as base:
            status, task = asyncio.run(fit(base, body, api_key))
    except (ServerUnreachable, ServerFailed) as error:
        typer.echo(f"openjev: {error}", err=True)
        raise typer.Exit(1) from None
    if status not in (200, 201):
        typer.echo("\n".join(refusal_lines(file, [line for line, _ in examples], status, task)), err=True)
        raise typer.Exit(1)
    if json_file is not None:
        json_file.write_text(json.dumps(task, indent=1, ensure_ascii=False))
    typer.echo("\n".join(report_lines(task)))
    for warning in calibration_warnings(task):
        typer.echo(f"openjev: warning: {warning}", err=True)


def refusal_lines(file: Path, lines: list[int], status: int, body: Any) -> list[str]:
    """The server's refusal as `openjev:` lines; a 422 on example i as `FILE:LINE: field: message`."""
    try:
        detail = json.loads(body)["detail"] if isinstance(body, str) else None
    except (ValueError, KeyError, TypeError):
        detail = None
    if status != 422 or not isinstance(detail, list):
        return [f"openjev: the task was refused ({status}): {body}"]
    said = []
    for entry in detail:
        loc = [part for part in entry.get("loc", []) if part != "body"]
        if len(loc) >= 2 and loc[0] == "examples" and isinstance(loc[1], int) and loc[1] < len(lines):
            field = ".".join(map(str, loc[2:])) or "example"
            said.append(f"openjev: {file}:{lines[loc[1]]}: {field}: {entry.get('msg')}")
        else:
            said.append(f"openjev: the task was refused (422): {'.'.join(map(str, loc))}: {entry.get('msg')}")
    return said


def calibration_warnings(task: dict[str, Any]) -> list[str]:
    """What the stored calibration does that its figures do not show (module doc)."""
    calibration, labels = task["calibration"], task["labels"]
    temperature, biases = calibration["temperature"], calibration["biases"]
    if task["report"]["nested"]["adopted"] and temperature == 1 and not any(biases):
        return [
            "adopted, but the calibration stored is the identity (temperature 1, no biases): the plain readout answers"
        ]
    warnings = []
    if temperature >= MAX_TEMPERATURE * (1 - 1e-6):
        warnings.append(
            f"the stored calibration is at its temperature cap ({MAX_TEMPERATURE:g}): its probabilities are nearly "
            "flat, so its confidence says little; more examples, or more even label counts, usually fit better"
        )
    ranked = sorted(zip(biases, labels, strict=True), reverse=True)
    if len(ranked) > 1 and ranked[0][0] - ranked[1][0] > math.log(1 / PROBABILITY_FLOOR):
        warnings.append(f"it answers {ranked[0][1]!r} for every state: its bias outweighs any readout")
    return warnings
