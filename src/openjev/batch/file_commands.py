"""What `openjev eval` and `openjev classify` share: their file options, the rows read and the rows asked.

Errors in the file are plain lines and exit 2 (a script reads them; a rich error box would wrap the
file name and the field).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from openjev.endpoints import COMPAT_MODEL_ALIAS

#: The options `eval` and `classify` share: name -> (type, default, help).
FILE_COMMAND_OPTIONS: dict[str, tuple[Any, Any, str]] = {
    "url": (str | None, None, "Base URL of any Jev server; without it the embedded default is started."),
    "api_key": (str | None, None, "Bearer key of the server (OPENJEV_API_KEY)."),
    "model": (str, COMPAT_MODEL_ALIAS, "Model name to request."),
    "concurrency": (int, 4, "Requests in flight at once."),
    "question": (Path | None, None, "A JSON file holding the one question asked of rows that carry none."),
    "state_column": (str, "state", "The file's column (or key) holding each row's state."),
    "label_column": (str | None, None, "The file's column holding the gold answer (default: gold, else label)."),
    "id_column": (str, "id", "The file's column naming each row (without one: the row's content digest)."),
    "score_gold": (
        str,
        "auto",
        "A score's gold: auto (level index from 0, or text), index, text, rating (from 1).",
    ),
    "restart": (bool, False, "Delete the answers file first instead of resuming it."),
}


def file_command_options(command: Callable[..., None]) -> Callable[..., None]:
    """Append FILE_COMMAND_OPTIONS to `command`'s own parameters; the command takes them as `**options`."""
    own = [p for p in inspect.signature(command).parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    shared = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=default,
            annotation=Annotated[
                kind, typer.Option(help=text, envvar="OPENJEV_API_KEY" if name == "api_key" else None)
            ],
        )
        for name, (kind, default, text) in FILE_COMMAND_OPTIONS.items()
    ]
    command.__signature__ = inspect.Signature([*own, *shared])  # type: ignore[attr-defined]
    command.__annotations__ = {parameter.name: parameter.annotation for parameter in [*own, *shared]}
    return command


def target_of(options: dict[str, Any]) -> Any:
    from openjev.batch.jobs import Target

    return Target(options["url"], options["api_key"], options["model"], max(1, options["concurrency"]))


def read_file_rows(file: Path, options: dict[str, Any], *, need_gold: bool) -> list[Any]:
    from openjev.batch.rows import SCORE_GOLD, read_question, read_rows
    from openjev.request.labelled_files import LabelledFileError

    if options["score_gold"] not in SCORE_GOLD:
        raise typer.BadParameter(f"one of {', '.join(SCORE_GOLD)}", param_hint="--score-gold")
    columns = {"state": options["state_column"], "id": options["id_column"]}
    if options["label_column"]:
        columns["gold"] = options["label_column"]
    try:
        asked = read_question(options["question"]) if options["question"] is not None else None
        return read_rows(file, question=asked, need_gold=need_gold, columns=columns, score_gold=options["score_gold"])
    except LabelledFileError as error:
        # Plain lines a script can read: a rich error box would wrap the file name and the field.
        typer.echo(f"openjev: {error}", err=True)
        raise typer.Exit(2) from None


def answer_rows_of(
    rows: list[Any],
    options: dict[str, Any],
    answers: Path,
    file: Path,
    on_served: Callable[[str], None] = lambda url: None,
    counted: dict[str, Any] | None = None,
) -> dict[str, Any]:
    from openjev.batch.runner import run_rows

    return run_rows(
        rows, target_of(options), answers, source=file, restart=options["restart"], on_served=on_served, counted=counted
    )
