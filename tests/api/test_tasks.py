"""`/v1/tasks` on the real app under uvicorn over the fake SGLang: fit, use, restart, delete, bad input.

The fake's readout favours the first label (the letter A) by 3 nats over hashed noise, as a model with
a letter preference would: a task whose gold labels are mostly not the first learns a bias against it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from tests.conftest import ServeOpenJev
from tests.fake_sglang import FakeSGLang, hashed_logprobs

QUESTION = {
    "type": "choice",
    "instructions": "Which team should handle this ticket?",
    "criteria": {"billing": "Payments and invoices", "shipping": "Deliveries", "other": None},
}
LABELS = ["shipping", "other", "shipping", "other", "billing", "shipping", "other", "shipping", "billing", "shipping"]
EXAMPLES = [{"state": f"Ticket {i}: where is parcel {i * 7}?", "label": label} for i, label in enumerate(LABELS)]
#: Enough for a calibration to be adopted by nested cross-validation (outer and inner folds of several each).
MANY = [{"state": f"Ticket {i}: where is parcel {i * 7}?", "label": LABELS[i % len(LABELS)]} for i in range(30)]


def letter_biased(input_ids: Sequence[int], token_ids: Sequence[int]) -> list[float]:
    values = hashed_logprobs(input_ids, token_ids)
    return [value - (0.0 if index == 0 else 3.0) for index, value in enumerate(values)]


@pytest.fixture
def fake() -> FakeSGLang:
    server = FakeSGLang()
    server.logprobs = letter_biased
    server.start()
    yield server
    server.stop()
    assert server.violations == []


def start(serve: ServeOpenJev, fake: FakeSGLang, tokenizer: Path, tasks: Path, **env: str):
    # One view per choice: the fake's letter bias reaches the raw readout, which is what a task's fit learns.
    settings = {"OPENJEV_TASKS_DIR": str(tasks), "OPENJEV_TASK_FOLDS": "3", "OPENJEV_OPTION_SHIFTS": "1", **env}
    return serve("--connect", fake.url, "--tokenizer", str(tokenizer), env=settings)


def ask(http: httpx.Client, question: dict) -> dict:
    response = http.post(
        "/v1/systemone",
        json={"model": "jev-latest", "state": "Ticket: my parcel is late", "questions": {"q": question}},
    )
    assert response.status_code == 200, response.text
    return response.json()["answers"]["q"]


def test_fit_use_restart_and_delete(serve_openjev, fake, qwen_tokenizer_dir, tmp_path) -> None:
    tasks = tmp_path / "tasks"
    server = start(serve_openjev, fake, qwen_tokenizer_dir, tasks, OPENJEV_TASK_WORKED_EXAMPLES="0")
    with server.client() as http:
        created = http.post("/v1/tasks", json={"question": QUESTION, "examples": MANY})
        assert created.status_code == 201, created.text
        task = created.json()
        assert task["id"].startswith("task_") and "examples" not in task
        assert task["labels"] == ["billing", "shipping", "other"]
        report = task["report"]
        assert report["examples"] == len(MANY) and report["folds"] == 3
        nested = report["nested"]
        # The letter bias makes the raw readout answer "billing" (1 in 5 gold) mostly; calibrated, it does better.
        assert nested["plain"]["accuracy"] < 0.5
        assert nested["chosen"]["accuracy"] > nested["plain"]["accuracy"] and nested["adopted"]
        assert report["chosen"]["calibration_adopted"]
        biases = task["calibration"]["biases"]
        assert biases[0] < biases[1]
        # The same content again: the same task, not fitted again.
        again = http.post("/v1/tasks", json={"question": QUESTION, "examples": MANY})
        assert again.status_code == 200 and again.json() == task  # `created` too: not fitted again
        plain = ask(http, QUESTION)
        used = ask(http, {**QUESTION, "x_task": task["id"]})
        expect_calibrated(plain, used, biases, task["calibration"]["temperature"])
        assert [row["id"] for row in http.get("/v1/tasks").json()["tasks"]] == [task["id"]]
    server.process.terminate()
    server.process.wait(timeout=15)
    assert (tasks / f"{task['id']}.json").is_file()

    restarted = start(serve_openjev, fake, qwen_tokenizer_dir, tasks)
    with restarted.client() as http:
        assert http.get(f"/v1/tasks/{task['id']}").json() == task
        assert ask(http, {**QUESTION, "x_task": task["id"]}) == used
        assert http.delete(f"/v1/tasks/{task['id']}").status_code == 204
        assert http.get(f"/v1/tasks/{task['id']}").status_code == 404
        assert http.delete(f"/v1/tasks/{task['id']}").status_code == 404
        gone = http.post(
            "/v1/systemone",
            json={"model": "jev-latest", "state": "x", "questions": {"q": {**QUESTION, "x_task": task["id"]}}},
        )
        assert gone.status_code == 422
        assert gone.json()["detail"][0]["loc"] == ["body", "questions", "q", "x_task"]
    assert not (tasks / f"{task['id']}.json").exists()


def expect_calibrated(plain: dict, used: dict, biases: list[float], temperature: float) -> None:
    """With no worked examples the prompt is the same: the task's answer is p' ∝ exp((log p + b)/T)."""
    names = list(plain["probabilities"])
    logits = [(math.log(plain["probabilities"][n]) + b) / temperature for n, b in zip(names, biases, strict=True)]
    top = max(logits)
    weights = [math.exp(value - top) for value in logits]
    expected = {name: weight / sum(weights) for name, weight in zip(names, weights, strict=True)}
    assert used["probabilities"] == pytest.approx(expected, rel=1e-6)
    assert used["choice"] == max(expected, key=expected.get)


def test_worked_examples_are_tried_and_the_chosen_ones_shown(serve_openjev, fake, qwen_tokenizer_dir, tmp_path) -> None:
    server = start(serve_openjev, fake, qwen_tokenizer_dir, tmp_path / "tasks")
    with server.client() as http:
        task = http.post("/v1/tasks", json={"question": QUESTION, "examples": MANY}).json()
    report = task["report"]
    # w = 0 is far from perfect here: 1 and 2 worked examples per label were read and compared too, on the
    # examples not shown (two per label set apart; each label keeps two scored at least).
    assert list(report["by_worked_examples"]) == ["0", "1", "2"]
    assert report["nested"]["examples_scored"] == len(MANY) - 6 and report["nested"]["worked_examples_shown"] == 6
    chosen = task["worked_examples_per_label"]
    assert chosen == report["chosen"]["worked_examples_per_label"]
    assert chosen == 0 or report["nested"]["adopted"]
    criteria = task["worked_question"]["criteria"]
    for label, description in QUESTION["criteria"].items():
        states = [e["state"] for e in MANY if e["label"] == label][:chosen]
        if states:
            assert criteria[label]["examples"] == states
            assert criteria[label].get("what") == description
        else:
            assert criteria[label] == description


def test_bad_input_is_a_422_naming_the_field_and_nothing_is_lost(
    serve_openjev, fake, qwen_tokenizer_dir, tmp_path
) -> None:
    server = start(serve_openjev, fake, qwen_tokenizer_dir, tmp_path / "tasks", OPENJEV_TASK_MAX_EXAMPLES="9")
    with server.client() as http:
        kept = http.post("/v1/tasks", json={"question": QUESTION, "examples": EXAMPLES[:4]}).json()

        def refused(body: dict) -> list:
            response = http.post("/v1/tasks", json=body)
            assert response.status_code == 422, response.text
            return [issue["loc"] for issue in response.json()["detail"]]

        wrong = [*EXAMPLES[:2], {"state": "s", "label": "refunds"}]
        assert refused({"question": QUESTION, "examples": wrong}) == [["body", "examples", 2, "label"]]
        assert refused({"question": QUESTION, "examples": []}) == [["body", "examples"]]
        assert refused({"question": QUESTION, "examples": EXAMPLES + EXAMPLES[:1]}) == [["body", "examples"]]
        assert ["body", "question"] in refused({"question": {**QUESTION, "type": "rank"}, "examples": EXAMPLES})
        box = refused({"question": {"type": "box", "instructions": "where?"}, "examples": EXAMPLES})
        assert box and all(loc[:2] == ["body", "question"] for loc in box)
        noul = {"type": "noul", "instructions": "Is it late?"}
        assert refused({"question": noul, "examples": [{"state": "s", "label": "maybe"}]}) == [
            ["body", "examples", 0, "label"]
        ]
        score = {"type": "score", "instructions": "How late?", "criteria": ["on time", "late"]}
        assert refused({"question": score, "examples": [{"state": "s", "label": 2}]}) == [
            ["body", "examples", 0, "label"]
        ]
        unknown = http.post(
            "/v1/systemone",
            json={"model": "jev-latest", "state": "x", "questions": {"q": {**QUESTION, "x_task": "task_nope"}}},
        )
        assert unknown.status_code == 422
        assert unknown.json()["detail"][0]["loc"] == ["body", "questions", "q", "x_task"]
        other = {"type": "choice", "criteria": {"a": None, "b": None}, "x_task": kept["id"]}
        mismatch = http.post("/v1/systemone", json={"model": "jev-latest", "state": "x", "questions": {"q": other}})
        assert mismatch.status_code == 422 and "labels" in mismatch.json()["detail"][0]["msg"]
        assert http.get("/v1/tasks/task_nope").status_code == 404
        assert [row["id"] for row in http.get("/v1/tasks").json()["tasks"]] == [kept["id"]]


def test_an_equal_question_uses_its_task_only_when_the_setting_asks(
    serve_openjev, fake, qwen_tokenizer_dir, tmp_path
) -> None:
    tasks = tmp_path / "tasks"
    env = {"OPENJEV_TASK_WORKED_EXAMPLES": "0"}
    server = start(serve_openjev, fake, qwen_tokenizer_dir, tasks, **env)
    with server.client() as http:
        task = http.post("/v1/tasks", json={"question": QUESTION, "examples": EXAMPLES}).json()
        plain = ask(http, QUESTION)
    server.process.terminate()
    server.process.wait(timeout=15)
    matching = start(serve_openjev, fake, qwen_tokenizer_dir, tasks, OPENJEV_TASK_MATCH_QUESTIONS="true", **env)
    with matching.client() as http:
        expect_calibrated(plain, ask(http, QUESTION), task["calibration"]["biases"], task["calibration"]["temperature"])
        changed = {**QUESTION, "instructions": "Which team?"}
        assert ask(http, changed) != ask(http, {**changed, "x_task": task["id"]})


def test_a_task_fitted_for_another_model_is_refused_by_name(serve_openjev, fake, qwen_tokenizer_dir, tmp_path) -> None:
    tasks = tmp_path / "tasks"
    server = start(serve_openjev, fake, qwen_tokenizer_dir, tasks, OPENJEV_TASK_WORKED_EXAMPLES="0")
    with server.client() as http:
        task = http.post("/v1/tasks", json={"question": QUESTION, "examples": EXAMPLES[:4]}).json()
    server.process.terminate()
    server.process.wait(timeout=15)
    path = tasks / f"{task['id']}.json"
    document = json.loads(path.read_text())
    path.write_text(json.dumps({**document, "model": "another/model"}))
    (tasks / "task_broken.json").write_text("{not json")
    again = start(serve_openjev, fake, qwen_tokenizer_dir, tasks)
    with again.client() as http:
        refused = http.post(
            "/v1/systemone",
            json={"model": "jev-latest", "state": "x", "questions": {"q": {**QUESTION, "x_task": task["id"]}}},
        )
        assert refused.status_code == 422
        assert "another/model" in refused.json()["detail"][0]["msg"]
        assert [row["id"] for row in http.get("/v1/tasks").json()["tasks"]] == [task["id"]]
    assert "task_broken.json skipped" in again.log()
