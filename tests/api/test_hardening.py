"""What an attacker (or an unlucky client) tries, in-process: unforeseen failures, leaks of internals,
redirects, bodies that almost decode, JSON at the edges, the preparation limit, the document."""

from __future__ import annotations

import concurrent.futures
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from openjev import metrics
from openjev.api import create_app
from openjev.backends.base import BackendError, BackendHealth, BackendUnavailable, LabelLogprobs, ReadoutCall
from openjev.config import Settings
from openjev.examples import support_ticket
from tests.api.test_routes import InstantBackend, _eventually_ready, settings_for
from tests.conftest import gzip_compress, zstd_compress

SECRET = "http://10.9.8.7:30000 /srv/models/secret"
HEAD = '{"model": "jev-latest", "questions": {"q": {"type": "noul", "instructions": "x"}}, "state": '


class FailingBackend(InstantBackend):
    """Raises `error` on every readout, and reports internals in its health detail."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    async def readout(self, call: ReadoutCall) -> LabelLogprobs:
        raise self.error

    async def health(self) -> BackendHealth:
        return BackendHealth(True, {"url": SECRET, "path": SECRET, "error": SECRET, "context_length": 4096})


def started(app: Any) -> TestClient:
    client = TestClient(app, raise_server_exceptions=False)
    client.__enter__()
    assert _eventually_ready(client)
    return client


@pytest.fixture
def client(qwen_tokenizer_dir: Path) -> Iterator[TestClient]:
    with TestClient(create_app(settings_for(qwen_tokenizer_dir), InstantBackend())) as http:
        assert _eventually_ready(http)
        yield http


def count(status: str) -> float:
    return metrics.REQUESTS.labels("/v1/systemone", status)._value.get()


def test_unforeseen_error_is_a_counted_500_with_request_id_and_no_internals(qwen_tokenizer_dir, caplog) -> None:
    app = create_app(settings_for(qwen_tokenizer_dir), FailingBackend(RuntimeError(f"boom at {SECRET}")))
    client = started(app)
    before = count("500")
    with caplog.at_level(logging.ERROR, logger="openjev"):
        response = client.post("/v1/systemone", json=support_ticket())
    client.__exit__(None, None, None)
    assert response.status_code == 500
    request_id = response.headers["x-typesafe-request-id"]
    assert response.json()["detail"]["error_type"] == "internal_error" and request_id in response.text
    assert "10.9.8.7" not in response.text and "RuntimeError" not in response.text
    assert count("500") == before + 1
    logged = [record for record in caplog.records if record.exc_info and request_id in record.getMessage()]
    assert logged and "boom at" in str(logged[0].exc_info[1])


@pytest.mark.parametrize(
    ("error", "status"),
    [(BackendError(f"SGLang said {SECRET}"), 502), (BackendUnavailable(f"unreachable at {SECRET}"), 503)],
)
def test_backend_failures_show_no_backend_words(qwen_tokenizer_dir, error, status) -> None:
    client = started(create_app(settings_for(qwen_tokenizer_dir), FailingBackend(error)))
    response = client.post("/v1/systemone", json=support_ticket())
    health = client.get("/health")
    client.__exit__(None, None, None)
    assert response.status_code == status and response.json()["detail"]["message"]
    assert response.headers["x-typesafe-request-id"] in response.json()["detail"]["message"]
    assert "10.9.8.7" not in response.text and "secret" not in response.text
    assert "10.9.8.7" not in health.text and "secret" not in health.text
    assert health.json()["backend"]["context_length"] == 4096  # facts stay


def test_trailing_slash_is_404_not_a_redirect_to_the_callers_host(client) -> None:
    response = client.post("/v1/systemone/", json=support_ticket(), headers={"host": "evil.example"})
    assert response.status_code == 404 and "location" not in response.headers


def post_encoded(client: TestClient, data: bytes, encoding: str):
    headers = {"content-type": "application/json", "content-encoding": encoding}
    return client.post("/v1/systemone", content=data, headers=headers)


def test_compressed_bodies_decode_whole_or_not_at_all(client) -> None:
    raw = json.dumps(support_ticket()).encode()
    half = len(raw) // 2
    expected = client.post("/v1/systemone", content=raw, headers={"content-type": "application/json"}).json()
    # Concatenated gzip members and zstd frames are one valid stream: every part is decoded.
    for encoding, compress in (("gzip", gzip_compress), ("zstd", zstd_compress)):
        response = post_encoded(client, compress(raw[:half]) + compress(raw[half:]), encoding)
        assert response.status_code == 200, response.text
        assert response.json()["answers"] == expected["answers"]
    refused = {
        "gzip with trailing garbage": ("gzip", gzip_compress(raw) + b"trailing garbage"),
        "gzip cut short": ("gzip", gzip_compress(raw)[:-6]),
        "zstd cut short": ("zstd", zstd_compress(raw)[:-3]),
        "zstd with trailing garbage": ("zstd", zstd_compress(raw) + b"trailing garbage"),
    }
    for name, (encoding, data) in refused.items():
        response = post_encoded(client, data, encoding)
        assert response.status_code == 400, (name, response.text)
        assert response.json()["detail"]["error_type"] == "invalid_body"


@pytest.mark.parametrize(
    "content",
    [
        (HEAD + "1" * 5000 + "}").encode(),  # an integer past the parser's digit limit
        HEAD.encode() + b'"\xff\xfe"}',  # not UTF-8
        (HEAD + "[" * 100_000 + "]" * 100_000 + "}").encode(),  # deeper than the parser recurses
    ],
    ids=["5000-digit-integer", "invalid-utf8", "deep-nesting"],
)
def test_json_the_parser_cannot_take_is_422_json_invalid(client, content: bytes) -> None:
    response = client.post("/v1/systemone", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["type"] == "json_invalid"
    assert "set_int_max_str_digits" not in response.text


def test_preparation_has_its_own_limit(qwen_tokenizer_dir) -> None:
    settings = settings_for(qwen_tokenizer_dir, max_concurrent_preparations=1, inline_preparation_bytes=0)
    app = create_app(settings, InstantBackend())
    with TestClient(app) as client:
        assert _eventually_ready(client)
        engine = app.state.service.runtime().engine
        gate, entered = threading.Event(), threading.Event()
        prepare = engine.prepare

        def slow_prepare(body, **options):
            entered.set()
            gate.wait(10)
            return prepare(body, **options)

        engine.prepare = slow_prepare
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            first = pool.submit(client.post, "/v1/systemone", json=support_ticket())
            assert entered.wait(10)
            refused = client.post("/v1/systemone", json=support_ticket())
            live = client.get("/health/live")
            gate.set()
            assert first.result(timeout=10).status_code == 200
    assert refused.status_code == 529 and refused.headers["retry-after"]
    assert "OPENJEV_MAX_CONCURRENT_PREPARATIONS" in refused.json()["detail"]["message"]
    assert live.status_code == 200  # preparation runs off the event loop


def prepared_where(tokenizer_dir: Path, bodies: list[dict[str, Any]], **settings: Any) -> tuple[list[Any], list[bool]]:
    """Each body's response, and for each preparation whether it ran on the event loop (else a worker thread)."""
    app = create_app(settings_for(tokenizer_dir, **settings), InstantBackend())
    with TestClient(app) as client:
        assert _eventually_ready(client)
        engine = app.state.service.runtime().engine
        prepare, threads = engine.prepare, []

        def recording_prepare(body, **options):
            threads.append(threading.current_thread())
            return prepare(body, **options)

        engine.prepare = recording_prepare
        answered = [client.post("/v1/systemone", json=body) for body in bodies]
        event_loop = client.portal.call(threading.current_thread)
    return answered, [thread is event_loop for thread in threads]


def test_small_new_text_is_prepared_on_the_event_loop_and_more_on_a_worker_thread(qwen_tokenizer_dir) -> None:
    ticket = support_ticket()
    small = len(json.dumps(ticket).encode())
    larger = {**ticket, "state": "x" * (small + 100)}
    # A long conversation is new the first time; then it is asked with one short message more, twice (the
    # first extension of its shape proves that the template renders it the same, on a worker thread).
    chat = [{"role": ("user", "assistant")[i % 2], "content": f"message {i} " + "y" * 200} for i in range(40)]
    grown = [chat, [*chat, {"role": "user", "content": "one"}], [*chat, {"role": "user", "content": "two"}]]
    # A long text asked again brings nothing new; a JSON state is rendered before it can be looked
    # up, so it goes to a worker thread every time.
    document = {**ticket, "state": {"lines": ["x" * 100] * (small // 100 + 1)}}
    bodies = [ticket, larger, *({**ticket, "state": messages} for messages in grown), larger, document, document]
    answered, on_loop = prepared_where(qwen_tokenizer_dir, bodies, inline_preparation_bytes=small + 100)
    assert [response.status_code for response in answered] == [200] * 8
    assert on_loop == [True, False, False, False, True, True, False, False]
    assert answered[0].json()["answers"].keys() == answered[1].json()["answers"].keys()


def test_many_short_new_messages_count_their_markup_and_go_to_a_worker_thread(qwen_tokenizer_dir) -> None:
    # 4,000 one-character messages are 4,000 bytes of content but some 124,000 rendered (about 30
    # characters of markup each on Qwen's template): they took 115-336 ms on the event loop.
    chat = [{"role": ("user", "assistant")[i % 2], "content": f"message {i}"} for i in range(8)]
    short = [{"role": ("user", "assistant")[i % 2], "content": "x"} for i in range(4000)]
    # The chat is new, then its first extension proves its shape; then a few short messages more are
    # prepared on the loop, and 4,000 short messages on a worker thread.
    few = [{"role": ("user", "assistant")[i % 2], "content": "y"} for i in range(3)]
    states = [chat, [*chat, {"role": "user", "content": "one"}], [*chat, *few], [*chat, *short]]
    answered, on_loop = prepared_where(qwen_tokenizer_dir, [{**support_ticket(), "state": state} for state in states])
    assert [response.status_code for response in answered] == [200] * 4
    assert on_loop == [True, True, True, False]


def test_cheap_limits_come_before_any_preparation(qwen_tokenizer_dir) -> None:
    app = create_app(settings_for(qwen_tokenizer_dir, max_questions=2), InstantBackend())
    with TestClient(app) as client:
        assert _eventually_ready(client)
        engine = app.state.service.runtime().engine
        engine.prepare = lambda body, **options: pytest.fail("prepared a request that breaks a counted limit")
        questions = {f"q{i}": {"type": "noul", "instructions": "x" * 100_000} for i in range(3)}
        response = client.post("/v1/systemone", json={"model": "jev-latest", "state": "s", "questions": questions})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "questions"]


def test_openapi_documents_errors_security_and_assets(client) -> None:
    schema = client.get("/openapi.json").json()
    operation = schema["paths"]["/v1/systemone"]["post"]
    assert {"400", "401", "404", "408", "413", "415", "422", "502", "503", "504", "529"} <= set(operation["responses"])
    for path in ("/v1/models", "/v1/limits"):
        assert "401" in schema["paths"][path]["get"]["responses"]
        assert schema["paths"][path]["get"]["security"] == [{"HTTPBearer": []}]
    assert schema["components"]["securitySchemes"]["HTTPBearer"] == {
        **schema["components"]["securitySchemes"]["HTTPBearer"],
        "type": "http",
        "scheme": "bearer",
    }
    assert operation["security"] == [{"HTTPBearer": []}]
    # Image assets as the official schema has them (a vision model takes them; a text-only one says so).
    assets = schema["components"]["schemas"]["SystemOneRequest"]["properties"]["assets"]
    assert {"$ref": "#/components/schemas/Asset"} in [option.get("additionalProperties") for option in assets["anyOf"]]
    asset = schema["components"]["schemas"]["Asset"]["properties"]
    assert set(asset) == {"type", "format", "data_base64", "part"}
    assert "503" in schema["paths"]["/health"]["get"]["responses"]


def test_an_empty_api_key_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="OPENJEV_API_KEY is empty"):
        Settings(api_key="")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="OPENJEV_API_KEY is empty"):
        Settings(api_key="  ")  # type: ignore[arg-type]


def test_a_backend_error_text_is_logged_clipped(qwen_tokenizer_dir, caplog) -> None:
    huge = "SGLang echoed " + "x" * 20_000_000
    client = started(create_app(settings_for(qwen_tokenizer_dir), FailingBackend(BackendError(huge))))
    with caplog.at_level(logging.WARNING, logger="openjev"):
        response = client.post("/v1/systemone", json=support_ticket())
    client.__exit__(None, None, None)
    assert response.status_code == 502
    logged = [record.getMessage() for record in caplog.records if "backend failure" in record.getMessage()]
    assert logged and all(len(message) < 5000 for message in logged)
    assert "SGLang echoed xxx" in logged[0] and "characters more" in logged[0]
