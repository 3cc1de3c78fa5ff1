"""`openjev tasks fit FILE` as the user sees it: the file read as `eval` reads one, its problems and the
server's refusals as `openjev: FILE:LINE: ...` lines, and what the stored task will do said plainly.

- Columns: `--state-column`, `--label-column` (the label; `gold` is read where `label` is absent, so an
  `eval` file fits as it is), `--pair-column`; names match up to case, dotted names reach into nested
  objects (`request/labelled_files.py`).
- A file that cannot be read, or a `--url` without its scheme or host, is exit 2; a server whose
  `/health` fails (not answering, a 5xx, a 404 under a `/v1` URL, with the hint to drop it) is exit 1
  before the fit is posted, as for `eval` (`asking.checked_health`), and a key it refuses (401 or 403
  on `GET /v1/limits`) is exit 2, nothing posted; a fit the server refuses is exit 1, a 422 on an
  example named by the file line it came from. No line shows the key or the URL's password.
- After the report, a warning on stderr where the stored task will not do what its figures suggest:
  adopted but storing neither worked examples nor a calibration (the identity: temperature 1, no
  biases: the answers are the plain readout's); a calibration at the temperature cap
  (MAX_TEMPERATURE: probabilities nearly flat), or within CAP_SHARE of it, since the fit's line
  search stops at its bound on 1/T a hair short of the cap (99.9994 measured on a readout that tells
  no label apart); one label answering every state: the calibrated logit is (log p_i + b_i)/T with
  log p_i in [log PROBABILITY_FLOOR, 0], so a label whose bias leads every other by more than
  log(1/PROBABILITY_FLOOR) wins whatever p is; or, on the held-out examples of the fit's report
  (`report.chosen.answered.predicted_counts`: what the task answers with), one label the answer of at
  least ONE_LABEL_SHARE of them while at most ONE_LABEL_SHARE - GOLD_MARGIN of them have it as their
  label.
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
from openjev.tasks.client import is_identity

#: A temperature at or over (1 - CAP_SHARE) * MAX_TEMPERATURE is said to be at the cap (module doc).
CAP_SHARE = 0.01
#: The share of held-out examples one label answers from which a warning is said (module doc) ...
ONE_LABEL_SHARE = 0.8
#: ... unless that label's own share of the gold is within this of it (a task that is mostly one label).
GOLD_MARGIN = 0.2


def fit_file(
    file: Path, question: Any, columns: dict[str, str], url: str | None, api_key: str | None, json_file: Path | None
) -> None:
    """The command (module doc): read, fit on `url` (or the embedded default), print the report."""
    from openjev.batch.client import BadUrl, KeyRefused, ServerUnreachable, checked_url, masked
    from openjev.batch.jobs import Target, served
    from openjev.batch.local_server import ServerFailed
    from openjev.batch.task_fit import fit
    from openjev.request.labelled_files import LabelledFileError, read_labelled
    from openjev.tasks.client import report_lines

    try:
        url = None if url is None else checked_url(url)
        examples = read_labelled(file, columns)
    except (BadUrl, LabelledFileError) as error:
        typer.echo(f"openjev: {error}", err=True)
        raise typer.Exit(2) from None
    body = {"question": question, "examples": [example for _, example in examples]}
    try:
        with served(Target(url)) as base:
            status, task = asyncio.run(fit(base, body, api_key))
    except (KeyRefused, ServerUnreachable, ServerFailed) as error:
        typer.echo(masked(f"openjev: {error}", url, api_key), err=True)
        raise typer.Exit(2 if isinstance(error, KeyRefused) else 1) from None
    if status not in (200, 201):
        refused = "\n".join(refusal_lines(file, [line for line, _ in examples], status, task))
        typer.echo(masked(refused, url, api_key), err=True)
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
    plain = is_identity(calibration) and not task["worked_examples_per_label"]
    warnings = []
    if task["report"]["nested"]["adopted"] and plain:
        warnings.append(
            "adopted, but the calibration stored is the identity (temperature 1, no biases): the plain readout answers"
        )
    warnings += one_label_held_out(task)
    if temperature >= MAX_TEMPERATURE * (1 - CAP_SHARE):
        warnings.append(
            f"the stored calibration is at its temperature cap ({MAX_TEMPERATURE:g}): its probabilities are nearly "
            "flat, so its confidence says little; more examples, or more even label counts, usually fit better"
        )
    ranked = sorted(zip(biases, labels, strict=True), reverse=True)
    if len(ranked) > 1 and ranked[0][0] - ranked[1][0] > math.log(1 / PROBABILITY_FLOOR):
        warnings.append(f"it answers {ranked[0][1]!r} for every state: its bias outweighs any readout")
    return warnings


def one_label_held_out(task: dict[str, Any]) -> list[str]:
    """The warning where what the task answers with names one label for most held-out examples (module
    doc); none from a server whose report has no `predicted_counts`."""
    counts = task["report"].get("chosen", {}).get("answered", {}).get("predicted_counts")
    if not counts or not sum(counts):
        return []
    held = sum(counts)
    count, label = max(zip(counts, task["labels"], strict=True))
    gold_share = task["report"]["label_counts"].get(label, 0) / max(task["report"]["examples"], 1)
    if count < ONE_LABEL_SHARE * held or gold_share > ONE_LABEL_SHARE - GOLD_MARGIN:
        return []
    return [
        f"on the held-out examples the task answers {label!r} for {count} of {held} ({count / held:.0%}), where "
        f"{gold_share:.0%} of the examples have that label: its answers say little about the state "
        "(more examples, or examples the readout tells apart, usually fit better)"
    ]
