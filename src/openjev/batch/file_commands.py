"""What `openjev eval` and `openjev classify` share: their file options, the rows read and the rows asked.

Errors in the file are plain lines and exit 2 (a script reads them; a rich error box would wrap the
file name and the field), as is a `--url` that is not an http(s) URL with a host. `-` as the file is
standard input (spooled first: `request/file_text.py`). `--limit N` keeps the first N rows,
`--sample N` then N of them drawn by `--seed` (in file order); `--dry-run` reads and checks the file,
says what a run would ask (rows, questions, gold labels, about how many tokens of state) and sends
nothing. Options only a labelled run reads (gold) are offered by `eval` alone.
"""

from __future__ import annotations

import functools
import inspect
import random
import tempfile
from collections import Counter
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
    "resume_edited": (
        bool,
        False,
        "Resume although the file's content changed (the same file edited): answers of unchanged rows stand.",
    ),
    # Sending and slices.
    "max_retries": (int, 8, "Retries of one row after its first try (408, 429, 5xx, connection errors)."),
    "max_failures": (int, 10, "Stop the run after this many failures in a row: the server is down."),
    "rps": (float | None, None, "At most this many requests started a second."),
    "timeout": (float, 600.0, "Seconds to wait for one answer."),
    "limit": (int | None, None, "Ask only the first N rows."),
    "sample": (int | None, None, "Ask N rows drawn at random (after --limit), the same for one --seed."),
    "seed": (int, 0, "The seed of --sample."),
    "dry_run": (bool, False, "Read and check the file, count rows and tokens; send nothing."),
    "label_names": (str | None, None, "Names of integer gold labels, the first for 0: neg,pos (a ClassLabel)."),
}
#: Lower bounds of the numeric options (a 0 is an error, never run as 1).
OPTION_MIN: dict[str, float] = {"concurrency": 1, "max_retries": 0, "max_failures": 1, "rps": 0.001}
OPTION_MIN |= {"timeout": 0.001, "limit": 1, "sample": 1}
#: What only a labelled run (`eval`) reads.
GOLD_OPTIONS = ("label_column", "score_gold", "label_names")
#: About this many characters of English text make one token (what --dry-run counts by).
CHARACTERS_PER_TOKEN = 4


def file_command_options(command: Callable[..., None] | None = None, *, gold: bool = True) -> Callable[..., Any]:
    """Append FILE_COMMAND_OPTIONS (without GOLD_OPTIONS where not `gold`) to `command`'s own parameters;
    the command takes them as `**options`, its `file` spooled from stdin where it is `-`."""
    if command is None:
        return functools.partial(file_command_options, gold=gold)
    own = [p for p in inspect.signature(command).parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=_option(name, kind, text))
        for name, (kind, default, text) in FILE_COMMAND_OPTIONS.items()
        if gold or name not in GOLD_OPTIONS
    ]

    @functools.wraps(command)
    def run(**given: Any) -> None:
        if given.get("file") != Path("-"):
            return command(**given)
        from openjev.request.file_text import FileTextError, spool_stdin

        with tempfile.TemporaryDirectory(prefix="openjev-stdin-") as folder:
            try:
                given["file"] = spool_stdin(Path(folder))
            except FileTextError as error:
                typer.echo(f"openjev: {error}", err=True)
                raise typer.Exit(2) from None
            return command(**given)

    run.__signature__ = inspect.Signature([*own, *shared])  # type: ignore[attr-defined]
    run.__annotations__ = {parameter.name: parameter.annotation for parameter in [*own, *shared]}
    return run


def _option(name: str, kind: Any, text: str) -> Any:
    envvar = "OPENJEV_API_KEY" if name == "api_key" else None
    return Annotated[kind, typer.Option(help=text, envvar=envvar, min=OPTION_MIN.get(name))]


def target_of(options: dict[str, Any]) -> Any:
    from openjev.batch.client import BadUrl, Sending, checked_url
    from openjev.batch.jobs import Target

    try:
        url = None if options["url"] is None else checked_url(options["url"])
    except BadUrl as error:
        typer.echo(f"openjev: {error}", err=True)
        raise typer.Exit(2) from None
    sending = Sending(options["max_retries"], options["max_failures"], options["rps"], options["timeout"])
    return Target(url, options["api_key"], options["model"], options["concurrency"], sending)


def read_file_rows(file: Path, options: dict[str, Any], *, need_gold: bool) -> list[Any]:
    """The file's rows, sliced by --limit and --sample; with --dry-run, what a run would ask said and exit 0."""
    from openjev.batch.rows import SCORE_GOLD, read_question, read_rows
    from openjev.request.labelled_files import LabelledFileError

    score_gold = options.get("score_gold", "auto")
    if score_gold not in SCORE_GOLD:
        raise typer.BadParameter(f"one of {', '.join(SCORE_GOLD)}", param_hint="--score-gold")
    target_of(options)  # a bad --url is refused before the file is read
    columns = {"state": options["state_column"], "id": options["id_column"]}
    if options.get("label_column"):
        columns["gold"] = options["label_column"]
    names = [name.strip() for name in options["label_names"].split(",")] if options.get("label_names") else None
    try:
        asked = read_question(options["question"]) if options["question"] is not None else None
        rows = read_rows(
            file, question=asked, need_gold=need_gold, columns=columns, score_gold=score_gold, label_names=names
        )
    except LabelledFileError as error:
        # Plain lines a script can read: a rich error box would wrap the file name and the field.
        typer.echo(f"openjev: {error}", err=True)
        raise typer.Exit(2) from None
    sliced = _sliced(rows, options)
    if options["dry_run"]:
        typer.echo(_dry_run_text(file, rows, sliced), err=True)
        raise typer.Exit(0)
    return sliced


def _sliced(rows: list[Any], options: dict[str, Any]) -> list[Any]:
    rows = rows[: options["limit"]] if options["limit"] is not None else rows
    if options["sample"] is None or options["sample"] >= len(rows):
        return rows
    drawn = sorted(random.Random(options["seed"]).sample(range(len(rows)), options["sample"]))
    return [rows[index] for index in drawn]


def _dry_run_text(file: Path, read: list[Any], rows: list[Any]) -> str:
    from openjev.batch.rows import digest_of

    characters = sum(len(row.state) if isinstance(row.state, str) else len(str(row.state)) for row in rows)
    questions = len({digest_of(row.question) for row in rows})
    lines = [
        f"{file}: {len(rows)} rows to ask (of {len(read)} read), {questions} question(s), "
        f"about {characters // CHARACTERS_PER_TOKEN:,} tokens of state ({characters:,} characters); "
        "nothing sent (--dry-run)"
    ]
    golds = Counter(row.gold for row in rows if row.gold is not None)
    if golds:
        lines.append("gold: " + ", ".join(f"{label} {n}" for label, n in golds.most_common()))
    return "\n".join(lines)


def answer_rows_of(
    rows: list[Any],
    options: dict[str, Any],
    answers: Path,
    file: Path,
    on_served: Callable[[str], None] = lambda url: None,
    counted: dict[str, Any] | None = None,
) -> dict[str, Any]:
    from openjev.batch.answers_file import ResumeRefused, rebind
    from openjev.batch.runner import run_rows

    if options["resume_edited"] and not options["restart"]:
        try:
            rebind(answers, file)
        except ResumeRefused as error:
            typer.echo(f"openjev: {error}", err=True)
            raise typer.Exit(2) from None
    return run_rows(
        rows, target_of(options), answers, source=file, restart=options["restart"], on_served=on_served, counted=counted
    )
