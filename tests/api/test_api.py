"""`POST /v1/systemone` and friends over real HTTP: openjev under uvicorn in front of a fake SGLang (the
`stack` and `http` fixtures); what it answers, the official SDK as a client, and the routes beside it.
Refusals of bad questions and bodies are in `test_api_refusals.py`."""

import copy
import math
import re

import pytest
import typesafe_sdk
from typesafe_sdk import Choice, Noul, RetryPolicy, Score, TypeSafeClient

from openjev.examples import support_ticket
from tests.api.systemone import CHOICE, NOUL, SCORE, post, request_with

EXAMPLE = support_ticket()


# -- the answer shapes ----------------------------------------------------------------------------


def test_example_answers_have_the_official_shapes(stack, http):
    _, fake = stack
    before = len(fake.generate_calls)
    response = post(http, EXAMPLE)
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


def test_backend_calls_follow_the_sglang_contract(stack, http):
    _, fake = stack
    before = len(fake.generate_calls)
    response = post(http, request_with({"n": NOUL, "c": CHOICE}))
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


def test_answers_do_not_depend_on_ids_order_or_other_questions(http):
    alone = post(http, request_with({"urgent": NOUL})).json()["answers"]["urgent"]
    renamed = post(http, request_with({"ist es dringend? ✓": NOUL})).json()["answers"]["ist es dringend? ✓"]
    crowded = post(http, request_with({"c": CHOICE, "s": SCORE, "urgent": NOUL})).json()["answers"]
    reordered = post(http, request_with({"urgent": NOUL, "s": SCORE, "c": CHOICE})).json()["answers"]
    assert alone == renamed == crowded["urgent"] == reordered["urgent"]
    assert crowded["c"] == reordered["c"] and crowded["s"] == reordered["s"]
    assert list(reordered) == ["urgent", "s", "c"]


def test_255_options_and_64_questions(http):
    options = {f"option {i} ✓": (None if i % 2 else {"text": f"case {i}"}) for i in range(255)}
    response = post(http, request_with({"wide": {"type": "choice", "criteria": options}}))
    assert response.status_code == 200, response.text
    probabilities = response.json()["answers"]["wide"]["probabilities"]
    assert list(probabilities) == list(options)
    assert math.fsum(probabilities.values()) == pytest.approx(1.0)
    many = {f"q{i}": NOUL for i in range(64)}
    response = post(http, request_with(many))
    assert response.status_code == 200 and len(response.json()["answers"]) == 64
    # The state of the choice before: its prefix is still cached, so the branches go without a warm-up.
    assert response.json()["usage"]["output_tokens"] == 64 == int(response.headers["x-openjev-backend-output-tokens"])


def test_states_of_every_shape(http):
    states = [
        "",
        {"ticket": {"id": 7, "body": "Refund please"}, "tags": ["billing"]},
        ["a", 1, None, {"b": [True]}],
        [{"role": "user", "content": "hi", "name": "x"}, {"role": "assistant", "content": None}],
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
        {"messages": [{"role": "user", "content": "hi"}], "metadata": {"channel": "email"}},
    ]
    for state in states:
        response = post(http, request_with({"q": NOUL}, state=state))
        assert response.status_code == 200, (state, response.text)


def test_instructions_and_criteria_accept_json_values(http):
    questions = {
        "n": {"type": "noul", "instructions": {"task": "spam?"}, "criteria": {"true": ["ads"], "false": None}},
        "one_sided": {"type": "noul", "criteria": {"true": "It mentions fire"}},
        "c": {"type": "choice", "instructions": ["pick", "one"], "criteria": {"a": {"x": 1}, "b": ["y"]}},
        "s": {"type": "score", "criteria": [{"level": "low"}, ["mid"], "high"]},
    }
    response = post(http, request_with(questions))
    assert response.status_code == 200, response.text
    assert response.json()["answers"]["s"]["legend"] == {"0": {"level": "low"}, "1": ["mid"], "2": "high"}


def test_one_option_and_one_level_are_answered_with_certainty(stack, http):
    _, fake = stack
    questions = {
        "c": {"type": "choice", "criteria": {"the only team": "all tickets"}},
        "s": {"type": "score", "criteria": [{"level": "any"}]},
        "n": NOUL,
    }
    before = len(fake.generate_calls)
    response = post(http, request_with(questions, state="A one-option request."))
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    assert answers["c"] == {
        "type": "choice",
        "choice": "the only team",
        "probabilities": {"the only team": 1.0},
        "confidence": 1.0,
    }
    assert answers["s"] == {
        "type": "score",
        "score": 0.0,
        "legend": {"0": {"level": "any"}},
        "probabilities": {"0": 1.0},
        "confidence": 1.0,
    }
    # One readout each (one label, no rotations, no content-free prior), beside the warm-up and the noul.
    calls = [entry["body"] for entry in fake.generate_calls[before:]]
    assert len(calls) == 4 and sorted(len(call["token_ids_logprob"]) for call in calls[1:]) == [1, 1, 2]


def test_model_aliases_and_unknown_model(http):
    assert post(http, request_with({"q": NOUL}, model="Qwen/Qwen3.6-35B-A3B")).status_code == 200
    response = post(http, request_with({"q": NOUL}, model="gpt-5"))
    assert response.status_code == 404
    assert response.json()["detail"]["error_type"] == "model_not_found"
    assert "gpt-5" in response.json()["detail"]["message"]


def test_unknown_top_level_fields_are_ignored(http):
    body = {**request_with({"q": NOUL}), "metadata": {"caller": "x"}, "temperature": 3}
    assert post(http, body).status_code == 200


# -- the official SDK as a client ---------------------------------------------------------------


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


def test_models_limits_health_docs(http):
    models = http.get("/v1/models").json()
    names = ["jev-latest", "Qwen/Qwen3.6-35B-A3B", "gpt-6-luna", "openjev-think"]
    assert [m["name"] for m in models["models"]] == names
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", m["release_date"]) for m in models["models"])
    assert [m["id"] for m in models["data"]] == names
    limits = http.get("/v1/limits").json()
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
    health = http.get("/health")
    assert health.status_code == 200 and health.json()["ready"] is True
    assert health.json()["backend"]["kind"] == "sglang" and health.json()["startup_seconds"] >= 0
    assert http.get("/health/live").json() == {"status": "alive"}
    assert "swagger" in http.get("/docs").text.lower()
    assert "api-reference" in http.get("/").text
    schema = http.get("/openapi.json").json()
    operation = schema["paths"]["/v1/systemone"]["post"]
    assert {"401", "404", "413", "422", "503", "529"} <= set(operation["responses"])
    assert schema["components"]["schemas"]["SystemOneRequest"]["examples"]
    # Every answer counts, the body layer's refusals included.
    http.post("/v1/systemone", content=b"x", headers={"content-encoding": "br"})
    post(http, request_with({"q": {"type": "noul"}}))
    exposition = http.get("/metrics").text
    for status in ("200", "415", "422"):
        assert f'openjev_requests_total{{route="/v1/systemone",status="{status}"}}' in exposition
    missing = http.get("/v2/nothing")
    assert missing.status_code == 404 and missing.json()["detail"]["error_type"] == "not_found"


def test_example_file_is_a_valid_request(http):
    assert post(http, copy.deepcopy(EXAMPLE)).status_code == 200
