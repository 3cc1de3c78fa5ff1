"""The harness against a server that is not openjev: what it cannot read is recorded, and the run goes on.

The stand-in answers `/v1/systemone` with a real openjev's answers (on the fake SGLang) and serves the
rest as SGLang's own endpoint does (0.5.23: `/v1/models` in OpenAI's list shape, no `/v1/limits`), or
worse: nothing at all, or a body that is not JSON.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from evals.harness import compare, report, run
from openjev.backends.supervised import free_port
from tests.conftest import RunningOpenJev

SGLANG_MODELS = {"object": "list", "data": [{"id": "/models/qwen", "object": "model", "owned_by": "sglang"}]}
Answer = Callable[[], Response]

#: What each stand-in serves at /v1/models and /v1/limits.
SERVERS: dict[str, tuple[Answer, Answer]] = {
    "sglang-own": (lambda: JSONResponse(SGLANG_MODELS), lambda: JSONResponse({"detail": "Not Found"}, 404)),
    "bare": (lambda: JSONResponse({"detail": "Not Found"}, 404), lambda: PlainTextResponse("limits: none")),
}


@pytest.fixture
def foreign(request: pytest.FixtureRequest, openjev_on_fake: RunningOpenJev) -> Iterator[str]:
    """The stand-in named by the test's parameter, in front of a real openjev; its URL."""
    models, limits = SERVERS[request.param]

    async def systemone(incoming: Request) -> Response:
        async with httpx.AsyncClient(base_url=openjev_on_fake.url, timeout=60) as client:
            answer = await client.post(
                "/v1/systemone", content=await incoming.body(), headers={"content-type": "application/json"}
            )
        return Response(answer.content, answer.status_code, media_type="application/json")

    routes = [Route("/v1/models", lambda _: models()), Route("/v1/limits", lambda _: limits())]
    app = Starlette(routes=[Route("/v1/systemone", systemone, methods=["POST"]), *routes])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.mark.parametrize("foreign", list(SERVERS), indirect=True)
def test_a_server_that_is_not_openjev_is_run_and_what_it_did_not_say_recorded(
    foreign: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert run.main(["jev-dev", "--url", foreign, "--limit", "1", "--out", str(out)]) == 0
    meta = json.loads((out / "run.json").read_text())
    assert meta["answer_settings"] is None
    unread = meta["server_unread"]
    assert set(unread) == {"/v1/models", "/v1/limits"}
    if meta["server_models"] is None:  # the bare one
        assert unread["/v1/models"].startswith("HTTP 404") and unread["/v1/limits"].startswith("not JSON")
    else:
        assert meta["server_models"] == SGLANG_MODELS
        assert "no `models` list" in unread["/v1/models"] and unread["/v1/limits"].startswith("HTTP 404")
    assert capsys.readouterr().err.count("not read in openjev's shape") == 2
    summary = json.loads((out / "report.json").read_text())
    assert summary["n"] == 7 and summary["server_unread"] == unread and not summary["answer_settings_known"]
    assert "not read from the server: `/v1/limits`" in (out / "report.md").read_text()
    # Resumed with a larger limit: the same server again, only the new state asked.
    assert run.main(["jev-dev", "--url", foreign, "--limit", "2", "--out", str(out)]) == 0
    assert [session["asked"] for session in json.loads((out / "run.json").read_text())["sessions"]] == [1, 1]
    assert report.main([str(out)]) == 0 and compare.main([str(out), str(out)]) == 0


def test_a_server_that_refuses_the_key_is_refused(
    serve_openjev, fake_sglang, qwen_tokenizer_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    guarded = serve_openjev(
        "--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env={"OPENJEV_API_KEY": "s3cret"}
    )
    out = tmp_path / "run"
    assert run.main(["jev-dev", "--url", guarded.url, "--api-key", "wrong", "--limit", "1", "--out", str(out)]) == 2
    assert "answered 401" in capsys.readouterr().err
