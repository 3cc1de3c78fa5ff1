"""The `openjev` command: serve the API, print its OpenAPI schema, smoke-test a deployment."""

import json
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from openjev.config import COMPAT_MODEL_ALIAS, ConfidenceMode, Frontend, Settings

app = typer.Typer(add_completion=False, no_args_is_help=True, help="openjev: a self-hosted Jev System One API.")


def load_settings(**flags: Any) -> Settings:
    """Environment first, then every flag the user actually passed."""
    return Settings(**{name: value for name, value in flags.items() if value is not None})


def build_backend(settings: Settings, on_fatal: Callable[[BaseException], None]) -> Any:
    if settings.connect and settings.sglang_python:
        raise typer.BadParameter("use either --connect or --sglang-python, not both")
    if settings.connect:
        from openjev.backends.sglang import SGLangBackend

        return SGLangBackend(
            settings.connect,
            api_key=settings.backend_api_key.get_secret_value() if settings.backend_api_key else None,
            request_timeout=settings.request_timeout,
            startup_timeout=settings.backend_startup_timeout,
            max_connections=settings.max_concurrent_branches,
        )
    if settings.sglang_python:
        from openjev.supervisor import SupervisedSGLangBackend

        return SupervisedSGLangBackend(settings, on_fatal=on_fatal)
    from openjev.backends.embedded import EmbeddedBackend

    return EmbeddedBackend.from_settings(settings)


@app.command()
def serve(
    connect: Annotated[str | None, typer.Option(help="URL of a running SGLang server (OPENJEV_CONNECT).")] = None,
    sglang_python: Annotated[
        Path | None, typer.Option(help="Python of an SGLang environment: launch and supervise SGLang.")
    ] = None,
    tokenizer: Annotated[Path | None, typer.Option(help="Local tokenizer directory (OPENJEV_TOKENIZER).")] = None,
    local_model: Annotated[
        str | None,
        typer.Option(help="Embedded model: HF directory, .gguf file or hub id (OPENJEV_LOCAL_MODEL)."),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model weights for SGLang (OPENJEV_MODEL).")] = None,
    revision: Annotated[str | None, typer.Option(help="Hub revision of --model (OPENJEV_REVISION).")] = None,
    served_model_name: Annotated[str | None, typer.Option(help="Public model id (OPENJEV_SERVED_MODEL_NAME).")] = None,
    frontend: Annotated[Frontend | None, typer.Option(help="SGLang frontend (OPENJEV_FRONTEND).")] = None,
    host: Annotated[str | None, typer.Option(help="Bind address (OPENJEV_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (OPENJEV_PORT).")] = None,
    max_questions: Annotated[int | None, typer.Option(help="OPENJEV_MAX_QUESTIONS")] = None,
    max_input_tokens: Annotated[int | None, typer.Option(help="OPENJEV_MAX_INPUT_TOKENS")] = None,
    max_total_input_tokens: Annotated[int | None, typer.Option(help="OPENJEV_MAX_TOTAL_INPUT_TOKENS")] = None,
    max_concurrent_requests: Annotated[int | None, typer.Option(help="OPENJEV_MAX_CONCURRENT_REQUESTS")] = None,
    max_concurrent_branches: Annotated[int | None, typer.Option(help="OPENJEV_MAX_CONCURRENT_BRANCHES")] = None,
    request_timeout: Annotated[float | None, typer.Option(help="OPENJEV_REQUEST_TIMEOUT (seconds)")] = None,
    temperature: Annotated[float | None, typer.Option(help="OPENJEV_TEMPERATURE")] = None,
    confidence: Annotated[ConfidenceMode | None, typer.Option(help="OPENJEV_CONFIDENCE")] = None,
    cache_dir: Annotated[Path | None, typer.Option(help="OPENJEV_CACHE_DIR")] = None,
    prefix_cache_bytes: Annotated[int | None, typer.Option(help="OPENJEV_PREFIX_CACHE_BYTES")] = None,
    log_level: Annotated[str | None, typer.Option(help="OPENJEV_LOG_LEVEL")] = None,
) -> None:
    """Serve the API. Default backend: the embedded CPU model; --connect or --sglang-python for SGLang."""
    settings = load_settings(**locals())
    import uvicorn

    from openjev.app import create_app

    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # One INFO line per backend call would drown the log.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    failure: list[BaseException] = []
    server: uvicorn.Server | None = None

    def on_fatal(error: BaseException) -> None:
        failure.append(error)
        if server is not None:
            server.should_exit = True

    backend = build_backend(settings, on_fatal)
    api = create_app(settings, backend, on_fatal=on_fatal)
    config = uvicorn.Config(
        api,
        host=settings.host,
        port=settings.port,
        loop="uvloop" if sys.platform != "win32" else "auto",
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
    from openjev.app import create_app
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


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
