"""The `openjev` command: serve the API, print its OpenAPI schema, smoke-test a deployment, fit tasks,
evaluate a server on a labelled file (`eval`) and answer a file (`classify`)."""

import inspect
import json
import logging
import signal
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import SecretStr, ValidationError

from openjev.batch.compare_command import compare_command
from openjev.batch.default_group import DefaultCommandGroup
from openjev.batch.file_commands import answer_rows_of, file_command_options, read_file_rows, target_of
from openjev.config import Settings
from openjev.endpoints import COMPAT_MODEL_ALIAS

app = typer.Typer(add_completion=False, no_args_is_help=True, help="openjev: a self-hosted Jev System One API.")


def load_settings(**flags: Any) -> Settings:
    """Environment first, then every flag the user actually passed."""
    return Settings(**{name: value for name, value in flags.items() if value is not None})


def _flag_type(annotation: Any) -> Any:
    """The type typer parses for a settings field: secrets are typed in as plain strings."""
    arguments = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    base = arguments[0] if typing.get_origin(annotation) in (types.UnionType, typing.Union) else annotation
    return str if base is SecretStr else base


def settings_flags(command: Callable[..., None]) -> Callable[..., None]:
    """Give `command` one `--flag` per `Settings` field, so flags mirror the OPENJEV_* variables exactly."""
    parameters = []
    for name, field in Settings.model_fields.items():
        option = typer.Option(help=f"{field.description} (OPENJEV_{name.upper()})", show_default=False)
        annotation = Annotated[_flag_type(field.annotation) | None, option]
        parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation))
    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    return command


@app.command()
@settings_flags
def serve(**flags: Any) -> None:
    """Serve the API. Default backend: the embedded CPU model; --connect or --sglang-python for SGLang."""
    try:
        settings = load_settings(**flags)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, issue['loc']))}: {issue['msg']}" for issue in error.errors())
        raise typer.BadParameter(problems) from None
    import uvicorn

    from openjev.api import create_app
    from openjev.api.memory import return_large_buffers
    from openjev.api.server import http_protocol
    from openjev.backends import build_backend

    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # One INFO line per backend call would drown the log.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return_large_buffers()
    failure: list[BaseException] = []
    server: uvicorn.Server | None = None

    def on_fatal(error: BaseException) -> None:
        failure.append(error)
        if server is not None:
            server.should_exit = True

    try:
        backend = build_backend(settings, on_fatal)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from error
    api = create_app(settings, backend, on_fatal=on_fatal)
    config = uvicorn.Config(
        api,
        host=settings.host,
        port=settings.port,
        loop="uvloop" if sys.platform != "win32" else "auto",
        # Heads and stalled responses get the body's deadline; idle keep-alive connections close after 5 s.
        http=http_protocol(settings.body_read_timeout, settings.max_connections),
        timeout_keep_alive=5,
        log_level=settings.log_level.lower(),
        timeout_graceful_shutdown=int(settings.request_timeout) + 5,
        server_header=False,
    )
    server = uvicorn.Server(config)

    def stop_gracefully(*_: object) -> None:
        # Until uvicorn takes the signals over: stop as soon as it has started. After its graceful
        # shutdown it re-raises the signal that stopped it here, and the process exits 0, not killed by it.
        server.should_exit = True

    signal.signal(signal.SIGINT, stop_gracefully)
    signal.signal(signal.SIGTERM, stop_gracefully)
    server.run()
    if failure:
        typer.echo(f"openjev: stopped: {failure[0]}", err=True)
        raise typer.Exit(1)


@app.command()
def schema() -> None:
    """Print the OpenAPI schema (no model, GPU or network needed)."""
    from openjev.api import create_app
    from openjev.backends.base import Backend, LabelLogprobs, ReadoutCall

    class _NoBackend(Backend):
        kind = "none"

        async def readout(self, call: ReadoutCall) -> LabelLogprobs:  # pragma: no cover - never called
            raise NotImplementedError

    typer.echo(json.dumps(create_app(Settings(), _NoBackend()).openapi(), indent=2))


@app.command()
def smoke(
    url: Annotated[str, typer.Argument(help="Base URL of the deployment, e.g. https://NAME.us-west.modal.direct")],
    api_key: Annotated[
        str | None, typer.Option(envvar="OPENJEV_API_KEY", help="Bearer key of the deployment; also checks auth.")
    ] = None,
    json_file: Annotated[Path | None, typer.Option("--json", help="Also write the report as JSON here.")] = None,
    startup_deadline: Annotated[
        float, typer.Option(help="Seconds to keep retrying 503/529 while the server starts.")
    ] = 1800.0,
    model: Annotated[str, typer.Option(help="Model name to request.")] = COMPAT_MODEL_ALIAS,
) -> None:
    """Check a running deployment end to end; exit 1 if it is not ready or any check fails."""
    from openjev.smoke import run_smoke

    report = run_smoke(url, api_key=api_key, startup_deadline=startup_deadline, model=model)
    if json_file is not None:
        json_file.write_text(report.to_json())
    typer.echo(report.summary())
    if not report.ok:
        raise typer.Exit(1)


tasks_app = typer.Typer(no_args_is_help=True, help="Tasks: a recurring question learned from labelled examples.")
app.add_typer(tasks_app, name="tasks")


def _question(value: str) -> Any:
    """The question as inline JSON, or the path of a JSON file holding it; exit 2 with one `openjev:`
    line, as `eval` and `classify` refuse theirs."""
    try:
        return json.loads(Path(value).read_text() if not value.lstrip().startswith("{") else value)
    except (OSError, json.JSONDecodeError) as error:
        typer.echo(f"openjev: --question: not a JSON question or a readable JSON file: {error}", err=True)
        raise typer.Exit(2) from None


@tasks_app.command("fit")
def tasks_fit(
    file: Annotated[
        Path, typer.Argument(help="Labelled states: JSONL, JSON, CSV, TSV or Parquet (state, label or gold, pair).")
    ],
    question: Annotated[str, typer.Option(help="The question (noul, choice or score) as JSON, or a JSON file.")],
    url: Annotated[
        str | None,
        typer.Option(help="A running openjev to fit on (POST /v1/tasks); default: the embedded default, started here."),
    ] = None,
    api_key: Annotated[str | None, typer.Option(envvar="OPENJEV_API_KEY", help="Bearer key of --url.")] = None,
    json_file: Annotated[Path | None, typer.Option("--json", help="Also write the task as JSON here.")] = None,
    state_column: Annotated[str, typer.Option(help="The file's column (or key) holding each state.")] = "state",
    label_column: Annotated[str, typer.Option(help="The file's column holding the label (else gold).")] = "label",
    pair_column: Annotated[str, typer.Option(help="The file's column naming contrastive pairs.")] = "pair",
) -> None:
    """Fit a task from a file of labelled states and print its held-out report; exit 1 if it is refused."""
    from openjev.batch.fit_command import fit_file

    columns = {"state": state_column, "label": label_column, "pair": pair_column}
    fit_file(file, _question(question), columns, url, api_key, json_file)


TaskUrl = Annotated[str, typer.Option(help="The running openjev whose tasks these are.")]
TaskKey = Annotated[str | None, typer.Option(envvar="OPENJEV_API_KEY", help="Bearer key of --url.")]


@tasks_app.command("list")
def tasks_list(url: TaskUrl, api_key: TaskKey = None) -> None:
    """List a running server's tasks, one line each."""
    from openjev.batch.task_commands import list_lines, run_command

    run_command(url, api_key, lambda checked: "\n".join(list_lines(checked, api_key)))


@tasks_app.command("show")
def tasks_show(
    task_id: Annotated[str, typer.Argument(help="The task's id.")], url: TaskUrl, api_key: TaskKey = None
) -> None:
    """Print one task's document (without its examples) as JSON."""
    from openjev.batch.task_commands import run_command, show

    run_command(url, api_key, lambda checked: show(checked, api_key, task_id))


@tasks_app.command("delete")
def tasks_delete(
    task_id: Annotated[str, typer.Argument(help="The task's id.")], url: TaskUrl, api_key: TaskKey = None
) -> None:
    """Remove a task (and its file) from a running server."""
    from openjev.batch.task_commands import delete, run_command

    run_command(url, api_key, lambda checked: delete(checked, api_key, task_id))


eval_app = typer.Typer(
    cls=DefaultCommandGroup,
    no_args_is_help=True,
    help="Evaluate a server on a labelled file (`openjev eval FILE`), or compare two runs.",
)
app.add_typer(eval_app, name="eval")


@eval_app.command("run")
@file_command_options
def eval_file(
    file: Annotated[Path, typer.Argument(help="Labelled rows: JSONL, JSON, CSV, TSV or Parquet (.gz too).")],
    out: Annotated[Path, typer.Option(help="Folder for answers.jsonl and the report files.")] = Path("eval-out"),
    **options: Any,
) -> None:
    """Ask a server every labelled row and report each question's figures (`openjev eval FILE` runs this).

    Accuracy, precision, recall, F1, the confusion matrix, Brier, ECE and pairs, with plots."""
    from openjev.batch.evaluation import evaluate, now, run_metadata
    from openjev.batch.outputs import OutputError, check_eval_out
    from openjev.batch.rows import read_question
    from openjev.batch.server_info import server_facts

    try:
        check_eval_out(out, [file, options["question"]])
    except OutputError as error:
        typer.echo(f"openjev: {error}", err=True)
        raise typer.Exit(2) from None
    rows = read_file_rows(file, options, need_gold=True)
    out.mkdir(parents=True, exist_ok=True)
    target, started, facts = target_of(options), now(), {}
    records = answer_rows_of(
        rows, options, out / "answers.jsonl", file, lambda url: facts.update(server_facts(url, target.api_key)), facts
    )
    asked = read_question(options["question"]) if options["question"] is not None else None
    server = options["url"] or "the embedded default"
    try:
        run = {**run_metadata(file, asked, rows, started), **facts}
        summary = evaluate(rows, records, out, f"openjev eval of {file.name} on {server}", run)
    except ValueError as error:
        typer.echo(f"openjev: {error}", err=True)
        raise typer.Exit(1) from None
    typer.echo((out / "report.md").read_text())
    if isinstance(summary["plots"], str):
        typer.echo(f"openjev: no plots: {summary['plots']}", err=True)
    if summary["errors"]["n"]:
        raise typer.Exit(1)


eval_app.command("compare")(compare_command)


@app.command()
@file_command_options(gold=False)
def classify(
    file: Annotated[Path, typer.Argument(help="Rows to answer: JSONL, JSON, CSV, TSV or Parquet (.gz too).")],
    out: Annotated[
        Path, typer.Option(help="The answers: .jsonl (appended as rows finish; a rerun resumes it), .csv or .parquet.")
    ] = Path("answers.jsonl"),
    **options: Any,
) -> None:
    """Answer every row of a file, one JSON line per row as it finishes; exit 1 if any row got an error."""
    from openjev.batch.labelled_copy import write_labelled_copy
    from openjev.batch.outputs import OutputError, check_classify_out

    try:
        journal = check_classify_out(out, [file, options["question"]])
    except OutputError as error:
        typer.echo(f"openjev: {error}", err=True)
        raise typer.Exit(2) from None
    rows = read_file_rows(file, options, need_gold=False)
    records = answer_rows_of(rows, options, journal, file)
    write_labelled_copy(out, rows, records)
    if out != journal:
        typer.echo(f"answers written to {out} (as they came: {journal})", err=True)
    if any("answer" not in records.get(row.id, {}) for row in rows):
        raise typer.Exit(1)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
