"""`POST /v1/systemone` refuses bad input over real HTTP (openjev under uvicorn on a fake SGLang): a 422
naming the field for a bad question or body value, and the body layer's 4xx for what arrives on the wire
(encodings, corrupt and oversized bodies before and after decompression)."""

import json
import socket

import pytest

from tests.api.systemone import NOUL, loc_of, post, request_with
from tests.conftest import gzip_compress, zstd_compress

# -- validation: 422 naming the field -------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "loc"),
    [
        ({"type": "choice", "criteria": {}}, ["body", "questions", "q", "criteria"]),
        ({"type": "choice", "criteria": {f"o{i}": None for i in range(256)}}, ["body", "questions", "q", "criteria"]),
        (
            {"type": "choice", "criteria": {"": "empty name", "b": None}},
            ["body", "questions", "q", "criteria", "", "[key]"],
        ),
        ({"type": "score", "criteria": []}, ["body", "questions", "q", "criteria"]),
        ({"type": "score", "criteria": [f"l{i}" for i in range(65)]}, ["body", "questions", "q", "criteria"]),
        ({"type": "score", "criteria": {"0": "low", "1": "high"}}, ["body", "questions", "q", "criteria"]),
        ({"type": "noul"}, ["body", "questions", "q"]),
        ({"type": "noul", "criteria": {"true": None, "false": None}}, ["body", "questions", "q"]),
        ({"type": "box", "instructions": "find the cat"}, ["body", "questions", "q", "type"]),
        ({"type": "ranking"}, ["body", "questions", "q"]),
    ],
)
def test_bad_questions_get_422_at_the_field(http, question, loc):
    response = post(http, request_with({"q": question}))
    assert loc in loc_of(response)
    assert all(isinstance(entry["msg"], str) and entry["type"] for entry in response.json()["detail"])


def test_question_count_and_empty_ids(http):
    assert ["body", "questions"] in loc_of(post(http, request_with({f"q{i}": NOUL for i in range(201)})))
    assert ["body", "questions"] in loc_of(post(http, request_with({})))
    assert any(loc[:2] == ["body", "questions"] for loc in loc_of(post(http, request_with({"": NOUL}))))


def test_missing_and_mistyped_top_level_fields(http):
    assert ["body", "state"] in loc_of(post(http, {"model": "jev-latest", "questions": {"q": NOUL}}))
    assert ["body", "model"] in loc_of(post(http, {"state": "x", "questions": {"q": NOUL}}))
    assert any(loc[:2] == ["body", "state"] for loc in loc_of(post(http, request_with({"q": NOUL}, state=42))))


def test_assets_and_non_text_chat_parts_are_refused_by_name(http):
    body = {**request_with({"q": NOUL}), "assets": {"img-1": {"type": "image", "format": "png", "data_base64": "AA=="}}}
    assert ["body", "assets"] in loc_of(post(http, body))
    image_state = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:x"}}]}]
    assert ["body", "state", 0, "content", 0, "type"] in loc_of(post(http, request_with({"q": NOUL}, image_state)))
    # The SDK's multipart form: the JSON part, then the image part its asset claims; this model reads text only.
    sent = {
        **request_with({"q": NOUL}, state="<image:1>"),
        "assets": {"<image:1>": {"type": "image", "part": "asset-0"}},
    }
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 32
    files = {"request": (None, json.dumps(sent), "application/json"), "asset-0": ("asset-0", png, "image/png")}
    assert ["body", "assets"] in loc_of(http.post("/v1/systemone", files=files))


def test_non_standard_json_numbers_are_refused(http):
    for literal in ("NaN", "Infinity", "-Infinity", "1e999"):
        content = '{"model": "jev-latest", "state": "x", "questions": {"q": {"type": "score", "criteria": [L, 1]}}}'
        response = http.post(
            "/v1/systemone", content=content.replace("L", literal), headers={"content-type": "application/json"}
        )
        assert response.status_code == 422, (literal, response.text)
        assert response.json()["detail"][0]["type"] == "json_invalid"


def test_pathologically_nested_json_is_422_not_500(http):
    state = "[" * 100_000 + "]" * 100_000
    head = '{"model": "jev-latest", "questions": {"q": {"type": "noul", "instructions": "x"}}, "state": '
    content = head + state + "}"
    response = http.post("/v1/systemone", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 422 and response.json()["detail"][0]["type"] == "json_invalid"


def test_bodies_that_are_not_json_get_4xx(http):
    for content, content_type in [(b"{not json", "application/json"), (b"hello", "text/plain"), (b"", None)]:
        headers = {"content-type": content_type} if content_type else {}
        response = http.post("/v1/systemone", content=content, headers=headers)
        assert 400 <= response.status_code < 500, (content, response.status_code)


# -- bodies on the wire ---------------------------------------------------------------------------


def test_gzip_and_zstd_bodies_are_decoded(http):
    raw = json.dumps(request_with({"q": NOUL}, state="x" * 5000)).encode()
    plain = http.post("/v1/systemone", content=raw, headers={"content-type": "application/json"})
    for encoding, data in [("zstd", zstd_compress(raw)), ("gzip", gzip_compress(raw))]:
        response = http.post(
            "/v1/systemone", content=data, headers={"content-type": "application/json", "content-encoding": encoding}
        )
        assert response.status_code == 200, response.text
        assert response.json()["answers"] == plain.json()["answers"]


def test_unknown_encoding_is_415_and_corrupt_body_is_400(http):
    response = http.post("/v1/systemone", content=b"abc", headers={"content-encoding": "br"})
    assert response.status_code == 415 and response.json()["detail"]["error_type"] == "unsupported_media_type"
    response = http.post("/v1/systemone", content=b"not zstd at all", headers={"content-encoding": "zstd"})
    assert response.status_code == 400 and response.json()["detail"]["message"]


def test_oversized_bodies_are_413_before_and_after_decompression(http):
    # An answering route's body may carry images: its cap is OPENJEV_MAX_IMAGE_BODY_BYTES (40 MiB).
    cap = 40 * 1024 * 1024
    host, port = http.base_url.host, http.base_url.port
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(f"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: {cap + 1}\r\n\r\n".encode())
        assert sock.recv(65536).startswith(b"HTTP/1.1 413")  # refused from the head, no byte of the body sent

    def chunks():
        for _ in range(cap // (1024 * 1024)):
            yield b"z" * (1024 * 1024)
        yield b"zz"

    assert http.post("/v1/systemone", content=chunks()).status_code == 413  # chunked: no Content-Length
    bomb = zstd_compress(b" " * (64 * 1024 * 1024))
    assert len(bomb) < 64 * 1024
    response = http.post("/v1/systemone", content=bomb, headers={"content-encoding": "zstd"})
    assert response.status_code == 413 and response.json()["detail"]["error_type"] == "request_too_large"
    assert (
        http.post(
            "/v1/systemone", content=gzip_compress(b"[" * (cap + 1)), headers={"content-encoding": "gzip"}
        ).status_code
        == 413
    )
