"""`POST /v1/systemone` and friends over real HTTP: openjev under uvicorn in front of a fake SGLang."""

import copy
import json
import math
import re
import socket

import httpx
import pytest
import typesafe_sdk
from typesafe_sdk import Choice, Noul, RetryPolicy, Score, TypeSafeClient

from openjev.examples import support_ticket
from tests.conftest import gzip_compress, running_stack, zstd_compress
from tests.fake_sglang import FakeSGLang

EXAMPLE = support_ticket()


@pytest.fixture(scope="module")
def stack(qwen_tokenizer_dir, tmp_path_factory):
    """One fake SGLang and one openjev with default settings, shared by the read-only tests."""
    with running_stack(FakeSGLang(), qwen_tokenizer_dir, tmp_path_factory.mktemp("logs")) as stack:
        yield stack


@pytest.fixture
def client(stack):
    server, _ = stack
    with httpx.Client(base_url=server.url, timeout=30) as http:
        yield http


def post(client, body, **kwargs):
    return client.post("/v1/systemone", json=body, **kwargs)


def request_with(questions, state="The printer on floor 3 is on fire.", model="jev-latest"):
    return {"model": model, "state": state, "questions": questions}


def loc_of(response):
    assert response.status_code == 422, response.text
    return [entry["loc"] for entry in response.json()["detail"]]


NOUL = {"type": "noul", "instructions": "Is this an emergency?"}
CHOICE = {"type": "choice", "instructions": "Who handles it?", "criteria": {"facilities": None, "it": "Computers"}}
SCORE = {"type": "score", "instructions": "How bad?", "criteria": ["minor", "serious", "critical"]}


# -- the answer shapes ----------------------------------------------------------------------------


def test_example_answers_have_the_official_shapes(stack, client):
    _, fake = stack
    before = len(fake.generate_calls)
    response = post(client, EXAMPLE)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == "Qwen/Qwen3.6-35B-A3B"
    answers = body["answers"]
    assert list(answers) == ["refund", "department", "urgency"]
    assert set(answers["refund"]) == {"type", "noul"} and 0 <= answers["refund"]["noul"] <= 1
    department = answers["department"]
    assert set(department) == {"type", "choice", "probabilities", "confidence"}
    assert list(department["probabilities"]) == ["billing", "technical", "sales"]
    assert math.fsum(department["probabilities"].values()) == pytest.approx(1.0)
    assert department["choice"] == max(department["probabilities"], key=department["probabilities"].get)
    urgency = answers["urgency"]
    assert urgency["legend"] == {"0": "Routine", "1": "Urgent", "2": "Emergency"}
    assert urgency["score"] == pytest.approx(sum(int(k) * p for k, p in urgency["probabilities"].items()))
    assert 0 <= urgency["confidence"] <= 1
    usage = body["usage"]
    # One answer per question billed; every backend call (the warm-up and one readout per question: no
    # content-free readout by default) is openjev's own work, in a header.
    assert usage["output_tokens"] == 3
    backend_calls = int(response.headers["x-openjev-backend-output-tokens"])
    assert backend_calls == len(fake.generate_calls) - before == 4
    assert isinstance(usage["input_tokens"], int) and re.search(r'"input_tokens":\d+[,}]', response.text)


def test_backend_calls_follow_the_sglang_contract(stack, client):
    _, fake = stack
    before = len(fake.generate_calls)
    response = post(client, request_with({"n": NOUL, "c": CHOICE}))
    assert response.status_code == 200
    calls = [entry["body"] for entry in fake.generate_calls[before:]]
    warm = calls[0]
    prefix = warm["input_ids"]
    # The warm-up, then the noul and the choice over the shared prefix: nothing else by default.
    branches = [call for call in calls[1:] if call["input_ids"][: len(prefix)] == prefix]
    assert len(branches) == 2 == len(calls) - 1
    assert int(response.headers["x-openjev-prefix-tokens"]) == len(prefix)
    rids = [call["rid"] for call in calls]
    assert len(set(rids)) == len(calls) and all(re.fullmatch(r"[0-9a-f]{32}", rid) for rid in rids)
    for call in calls:
        assert call["sampling_params"] == {"max_new_tokens": 1, "temperature": 0}
        assert call["return_logprob"] is True and call["logprob_start_len"] == -1 and call["token_ids_logprob"]
    for branch in branches:
        assert branch["input_ids"][: len(prefix)] == prefix and len(branch["input_ids"]) > len(prefix)
    assert sorted(len(branch["token_ids_logprob"]) for branch in branches) == [2, 2]
    # Billed: the prefix once and each question's own tokens; the header: every prompt sent.
    own = [len(branch["input_ids"]) - len(prefix) for branch in branches]
    assert response.json()["usage"]["input_tokens"] - len(prefix) == sum(own)
    assert int(response.headers["x-openjev-backend-input-tokens"]) == sum(len(call["input_ids"]) for call in calls)
    # The header sums what SGLang reported for the question readouts (not the warm-up).
    cached = int(response.headers["x-openjev-cached-tokens"])
    assert cached == sum(fake.cached_tokens[call["rid"]] for call in branches)
    assert cached >= 2 * len(prefix)
    timing = response.headers["server-timing"]
    assert re.fullmatch(r"prep;dur=[\d.]+, prefill;dur=[\d.]+, branches;dur=[\d.]+", timing)
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-typesafe-request-id"])


def test_answers_do_not_depend_on_ids_order_or_other_questions(client):
    alone = post(client, request_with({"urgent": NOUL})).json()["answers"]["urgent"]
    renamed = post(client, request_with({"ist es dringend? ✓": NOUL})).json()["answers"]["ist es dringend? ✓"]
    crowded = post(client, request_with({"c": CHOICE, "s": SCORE, "urgent": NOUL})).json()["answers"]
    reordered = post(client, request_with({"urgent": NOUL, "s": SCORE, "c": CHOICE})).json()["answers"]
    assert alone == renamed == crowded["urgent"] == reordered["urgent"]
    assert crowded["c"] == reordered["c"] and crowded["s"] == reordered["s"]
    assert list(reordered) == ["urgent", "s", "c"]


def test_255_options_and_64_questions(client):
    options = {f"option {i} ✓": (None if i % 2 else {"text": f"case {i}"}) for i in range(255)}
    response = post(client, request_with({"wide": {"type": "choice", "criteria": options}}))
    assert response.status_code == 200, response.text
    probabilities = response.json()["answers"]["wide"]["probabilities"]
    assert list(probabilities) == list(options)
    assert math.fsum(probabilities.values()) == pytest.approx(1.0)
    many = {f"q{i}": NOUL for i in range(64)}
    response = post(client, request_with(many))
    assert response.status_code == 200 and len(response.json()["answers"]) == 64
    # The state of the choice before: its prefix is still cached, so the branches go without a warm-up.
    assert response.json()["usage"]["output_tokens"] == 64 == int(response.headers["x-openjev-backend-output-tokens"])


def test_states_of_every_shape(client):
    states = [
        "",
        {"ticket": {"id": 7, "body": "Refund please"}, "tags": ["billing"]},
        ["a", 1, None, {"b": [True]}],
        [{"role": "user", "content": "hi", "name": "x"}, {"role": "assistant", "content": None}],
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
        {"messages": [{"role": "user", "content": "hi"}], "metadata": {"channel": "email"}},
    ]
    for state in states:
        response = post(client, request_with({"q": NOUL}, state=state))
        assert response.status_code == 200, (state, response.text)


def test_instructions_and_criteria_accept_json_values(client):
    questions = {
        "n": {"type": "noul", "instructions": {"task": "spam?"}, "criteria": {"true": ["ads"], "false": None}},
        "one_sided": {"type": "noul", "criteria": {"true": "It mentions fire"}},
        "c": {"type": "choice", "instructions": ["pick", "one"], "criteria": {"a": {"x": 1}, "b": ["y"]}},
        "s": {"type": "score", "criteria": [{"level": "low"}, ["mid"], "high"]},
    }
    response = post(client, request_with(questions))
    assert response.status_code == 200, response.text
    assert response.json()["answers"]["s"]["legend"] == {"0": {"level": "low"}, "1": ["mid"], "2": "high"}


def test_one_option_and_one_level_are_answered_with_certainty(stack, client):
    _, fake = stack
    questions = {"c": {"type": "choice", "criteria": {"the only team": "all tickets"}}, "s": {"type": "score",
                 "criteria": [{"level": "any"}]}, "n": NOUL}  # fmt: skip
    before = len(fake.generate_calls)
    response = post(client, request_with(questions, state="A one-option request."))
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    assert answers["c"] == {"type": "choice", "choice": "the only team", "probabilities": {"the only team": 1.0},
                            "confidence": 1.0}  # fmt: skip
    assert answers["s"] == {"type": "score", "score": 0.0, "legend": {"0": {"level": "any"}},
                            "probabilities": {"0": 1.0}, "confidence": 1.0}  # fmt: skip
    # One readout each (one label, no rotations, no content-free prior), beside the warm-up and the noul.
    calls = [entry["body"] for entry in fake.generate_calls[before:]]
    assert len(calls) == 4 and sorted(len(call["token_ids_logprob"]) for call in calls[1:]) == [1, 1, 2]


def test_model_aliases_and_unknown_model(client):
    assert post(client, request_with({"q": NOUL}, model="Qwen/Qwen3.6-35B-A3B")).status_code == 200
    response = post(client, request_with({"q": NOUL}, model="gpt-5"))
    assert response.status_code == 404
    assert response.json()["detail"]["error_type"] == "model_not_found"
    assert "gpt-5" in response.json()["detail"]["message"]


def test_unknown_top_level_fields_are_ignored(client):
    body = {**request_with({"q": NOUL}), "metadata": {"caller": "x"}, "temperature": 3}
    assert post(client, body).status_code == 200


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
def test_bad_questions_get_422_at_the_field(client, question, loc):
    response = post(client, request_with({"q": question}))
    assert loc in loc_of(response)
    assert all(isinstance(entry["msg"], str) and entry["type"] for entry in response.json()["detail"])


def test_question_count_and_empty_ids(client):
    assert ["body", "questions"] in loc_of(post(client, request_with({f"q{i}": NOUL for i in range(201)})))
    assert ["body", "questions"] in loc_of(post(client, request_with({})))
    assert any(loc[:2] == ["body", "questions"] for loc in loc_of(post(client, request_with({"": NOUL}))))


def test_missing_and_mistyped_top_level_fields(client):
    assert ["body", "state"] in loc_of(post(client, {"model": "jev-latest", "questions": {"q": NOUL}}))
    assert ["body", "model"] in loc_of(post(client, {"state": "x", "questions": {"q": NOUL}}))
    assert any(loc[:2] == ["body", "state"] for loc in loc_of(post(client, request_with({"q": NOUL}, state=42))))


def test_assets_and_non_text_chat_parts_are_refused_by_name(client):
    body = {**request_with({"q": NOUL}), "assets": {"img-1": {"type": "image", "format": "png", "data_base64": "AA=="}}}
    assert ["body", "assets"] in loc_of(post(client, body))
    image_state = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:x"}}]}]
    assert ["body", "state", 0, "content", 0, "type"] in loc_of(post(client, request_with({"q": NOUL}, image_state)))
    # The SDK's multipart form: the JSON part, then the image part its asset claims; this model reads text only.
    sent = {
        **request_with({"q": NOUL}, state="<image:1>"),
        "assets": {"<image:1>": {"type": "image", "part": "asset-0"}},
    }
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 32
    files = {"request": (None, json.dumps(sent), "application/json"), "asset-0": ("asset-0", png, "image/png")}
    assert ["body", "assets"] in loc_of(client.post("/v1/systemone", files=files))


def test_non_standard_json_numbers_are_refused(client):
    for literal in ("NaN", "Infinity", "-Infinity", "1e999"):
        content = '{"model": "jev-latest", "state": "x", "questions": {"q": {"type": "score", "criteria": [L, 1]}}}'
        response = client.post(
            "/v1/systemone", content=content.replace("L", literal), headers={"content-type": "application/json"}
        )
        assert response.status_code == 422, (literal, response.text)
        assert response.json()["detail"][0]["type"] == "json_invalid"


def test_pathologically_nested_json_is_422_not_500(client):
    state = "[" * 100_000 + "]" * 100_000
    head = '{"model": "jev-latest", "questions": {"q": {"type": "noul", "instructions": "x"}}, "state": '
    content = head + state + "}"
    response = client.post("/v1/systemone", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 422 and response.json()["detail"][0]["type"] == "json_invalid"


def test_bodies_that_are_not_json_get_4xx(client):
    for content, content_type in [(b"{not json", "application/json"), (b"hello", "text/plain"), (b"", None)]:
        headers = {"content-type": content_type} if content_type else {}
        response = client.post("/v1/systemone", content=content, headers=headers)
        assert 400 <= response.status_code < 500, (content, response.status_code)


# -- bodies on the wire ---------------------------------------------------------------------------


def test_gzip_and_zstd_bodies_are_decoded(client):
    raw = json.dumps(request_with({"q": NOUL}, state="x" * 5000)).encode()
    plain = client.post("/v1/systemone", content=raw, headers={"content-type": "application/json"})
    for encoding, data in [("zstd", zstd_compress(raw)), ("gzip", gzip_compress(raw))]:
        response = client.post(
            "/v1/systemone", content=data, headers={"content-type": "application/json", "content-encoding": encoding}
        )
        assert response.status_code == 200, response.text
        assert response.json()["answers"] == plain.json()["answers"]


def test_unknown_encoding_is_415_and_corrupt_body_is_400(client):
    response = client.post("/v1/systemone", content=b"abc", headers={"content-encoding": "br"})
    assert response.status_code == 415 and response.json()["detail"]["error_type"] == "unsupported_media_type"
    response = client.post("/v1/systemone", content=b"not zstd at all", headers={"content-encoding": "zstd"})
    assert response.status_code == 400 and response.json()["detail"]["message"]


def test_oversized_bodies_are_413_before_and_after_decompression(client):
    # An answering route's body may carry images: its cap is OPENJEV_MAX_IMAGE_BODY_BYTES (40 MiB).
    cap = 40 * 1024 * 1024
    host, port = client.base_url.host, client.base_url.port
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(f"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: {cap + 1}\r\n\r\n".encode())
        assert sock.recv(65536).startswith(b"HTTP/1.1 413")  # refused from the head, no byte of the body sent

    def chunks():
        for _ in range(cap // (1024 * 1024)):
            yield b"z" * (1024 * 1024)
        yield b"zz"

    assert client.post("/v1/systemone", content=chunks()).status_code == 413  # chunked: no Content-Length
    bomb = zstd_compress(b" " * (64 * 1024 * 1024))
    assert len(bomb) < 64 * 1024
    response = client.post("/v1/systemone", content=bomb, headers={"content-encoding": "zstd"})
    assert response.status_code == 413 and response.json()["detail"]["error_type"] == "request_too_large"
    assert client.post("/v1/systemone", content=gzip_compress(b"[" * (cap + 1)),
                       headers={"content-encoding": "gzip"}).status_code == 413  # fmt: skip


# -- the official SDK as a client -----------------------------------------------------------------


def test_official_sdk_reads_every_answer_type_over_zstd(stack):
    server, _ = stack
    with TypeSafeClient(base_url=server.url, api_key="any-key", compression="zstd") as sdk:
        result = sdk.system_one(
            state={"ticket": "I was charged twice. " * 80},  # over 1 KiB: the SDK compresses it
            questions={
                "refund": Noul(instructions="Does the user want a refund?"),
                "team": Choice(instructions="Which team?", criteria={"billing": "Payments", "sales": None}),
                "anger": Score(instructions="How angry?", criteria=["Calm", "Annoyed", {"level": "Furious"}]),
            },
        )
        assert 0 <= result.nouls["refund"].noul <= 1
        assert result.choices["team"].choice in {"billing", "sales"}
        assert set(result.scores["anger"].probabilities) == {0, 1, 2}
        assert result.scores["anger"].legend[2] == {"level": "Furious"}
        assert (
            result.usage.output_tokens == 3
        )  # one per question; rotations and content-free readouts are openjev's own
        assert [m.name for m in sdk.models.list().models][:2] == ["jev-latest", "Qwen/Qwen3.6-35B-A3B"]


def test_official_sdk_surfaces_validation_and_model_errors(stack):
    server, _ = stack
    with TypeSafeClient(base_url=server.url, api_key="k", compression="zstd", retry=RetryPolicy(max_retries=0)) as sdk:
        with pytest.raises(typesafe_sdk.TypeSafeUnprocessableEntityError) as invalid:
            sdk.system_one(state="x", questions={"team": Choice(criteria={f"o{i}": None for i in range(256)})})
        assert "questions.team.criteria" in str(invalid.value)
        one = sdk.system_one(state="x", questions={"team": Choice(criteria={"only": None})})  # the SDK's least
        assert one.choices["team"].choice == "only" and one.choices["team"].confidence == 1.0
        assert invalid.value.request_id
        with pytest.raises(typesafe_sdk.TypeSafeNotFoundError, match="not served here"):
            sdk.system_one(state="x", questions={"q": Noul(instructions="?")}, model="other-model")


# -- routes ---------------------------------------------------------------------------------------


def test_models_limits_health_docs(client):
    models = client.get("/v1/models").json()
    names = ["jev-latest", "Qwen/Qwen3.6-35B-A3B", "gpt-6-luna", "openjev-think"]
    assert [m["name"] for m in models["models"]] == names
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", m["release_date"]) for m in models["models"])
    assert [m["id"] for m in models["data"]] == names
    limits = client.get("/v1/limits").json()
    assert limits["max_questions"] == 200 and limits["max_choice_options"] == 255
    # The backend's limit wins when it is smaller (SGLang's max_req_input_len sits a few tokens under its context).
    assert limits["max_input_tokens"] == min(32768, limits["backend_context_length"])
    # Per request: the input once and every readout's own tokens, twice a question's budget by default.
    assert limits["max_total_input_tokens"] == 2 * limits["max_input_tokens"]
    routes = limits["token_budgets"]
    assert sorted(routes) == ["/api/alpha/decisions", "/api/v1/systemone", "/v1/decisions", "/v1/systemone"]
    assert routes["/v1/decisions"]["standard"] == {
        "per_question": limits["max_input_tokens"],
        "per_request": limits["max_total_input_tokens"],
    }
    assert limits["max_concurrent_requests"] == 16 and limits["max_body_bytes"] == 2 * 1024 * 1024
    health = client.get("/health")
    assert health.status_code == 200 and health.json()["ready"] is True
    assert health.json()["backend"]["kind"] == "sglang" and health.json()["startup_seconds"] >= 0
    assert client.get("/health/live").json() == {"status": "alive"}
    assert "swagger" in client.get("/docs").text.lower()
    assert "api-reference" in client.get("/").text
    schema = client.get("/openapi.json").json()
    operation = schema["paths"]["/v1/systemone"]["post"]
    assert {"401", "404", "413", "422", "503", "529"} <= set(operation["responses"])
    assert schema["components"]["schemas"]["SystemOneRequest"]["examples"]
    # Every answer counts, the body layer's refusals included.
    client.post("/v1/systemone", content=b"x", headers={"content-encoding": "br"})
    post(client, request_with({"q": {"type": "noul"}}))
    exposition = client.get("/metrics").text
    for status in ("200", "415", "422"):
        assert f'openjev_requests_total{{route="/v1/systemone",status="{status}"}}' in exposition
    missing = client.get("/v2/nothing")
    assert missing.status_code == 404 and missing.json()["detail"]["error_type"] == "not_found"


def test_example_file_is_a_valid_request(client):
    assert post(client, copy.deepcopy(EXAMPLE)).status_code == 200
