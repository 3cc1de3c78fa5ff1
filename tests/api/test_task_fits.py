"""Fits on the real app under uvicorn over the fake SGLang: refused when they cannot be cross-validated,
never refused by their own readouts on an idle server, and run as jobs (progress, cancel, resume, shared)."""

from __future__ import annotations

import httpx
import pytest

from tests.api import test_tasks
from tests.api.test_tasks import EXAMPLES, MANY, QUESTION, start
from tests.conftest import eventually

#: The fake SGLang these fits read: test_tasks.py's, letter-biased.
fake = test_tasks.fake
ASKED = {"model": "jev-latest", "questions": {"q": QUESTION}}


def refusal(response: httpx.Response) -> str:
    assert response.status_code == 422, response.text
    (entry,) = response.json()["detail"]
    assert entry["loc"] == ["body", "examples"]
    return entry["msg"]


def test_one_label_or_too_few_per_label_is_a_422_that_says_so(serve_openjev, fake, qwen_tokenizer_dir, tmp_path):
    server = start(serve_openjev, fake, qwen_tokenizer_dir, tmp_path / "tasks", OPENJEV_TASK_WORKED_EXAMPLES="0")
    same = [{"state": f"Ticket {i}: parcel late", "label": "shipping"} for i in range(3)]
    lone = [*EXAMPLES[:4], {"state": "Ticket: invoice wrong", "label": "billing"}]
    with server.client() as http:
        assert "every example is labelled 'shipping'" in refusal(
            http.post("/v1/tasks", json={"question": QUESTION, "examples": same})
        )
        assert "too few examples to cross-validate: {'billing': 1}" in refusal(
            http.post("/v1/tasks", json={"question": QUESTION, "examples": lone})
        )
        assert http.get("/v1/tasks").json()["tasks"] == []


def test_an_idle_server_finishes_fits_of_large_states_and_of_many_options(
    serve_openjev, fake, qwen_tokenizer_dir, tmp_path
):
    """Once a readout is too large to prepare inline, a fit asking more at once than the preparation
    slots hold collided with itself (529 within 0.1 s); it reads at what the slots hold now."""
    server = start(serve_openjev, fake, qwen_tokenizer_dir, tmp_path / "tasks", OPENJEV_TASK_WORKED_EXAMPLES="0")
    noul = {"type": "noul", "instructions": "Is the parcel late?"}
    large = [{"state": f"Ticket {i}: " + "the parcel is late again. " * 120, "label": i % 2 == 0} for i in range(20)]
    options = {f"team {n}": None for n in range(255)}
    many = {"type": "choice", "instructions": "Which team?", "criteria": options}
    routed = [{"state": f"Ticket {i}: parcel {i} went astray", "label": f"team {i % 10}"} for i in range(20)]
    with server.client(timeout=300) as http:
        for question, examples in ((noul, large), (many, routed)):
            fitted = http.post("/v1/tasks", json={"question": question, "examples": examples})
            assert fitted.status_code == 201, fitted.text
            assert fitted.json()["report"]["examples"] == 20
    assert " 529" not in server.log()


def follow(http: httpx.Client, job: str, until, timeout: float = 120) -> dict:
    found: dict = {}

    def seen() -> bool:
        found.update(http.get(f"/v1/tasks/fits/{job}").json())
        return until(found)

    assert eventually(seen, timeout=timeout), found
    return found


def test_a_fit_job_shows_progress_a_cancel_removes_its_readouts_and_a_left_fit_resumes_from_them(
    serve_openjev, fake, qwen_tokenizer_dir, tmp_path
):
    """A cancelled fit's readout file went with it; only one whose waiting client left keeps its own."""
    tasks = tmp_path / "tasks"
    server = start(serve_openjev, fake, qwen_tokenizer_dir, tasks, OPENJEV_TASK_WORKED_EXAMPLES="0")
    fake.generate_delay = 0.5
    body = {"question": QUESTION, "examples": EXAMPLES}
    readouts = tasks / "fits"
    with server.client() as http:
        posted = http.post("/v1/tasks", params={"background": "true"}, json=body)
        assert posted.status_code == 202, posted.text
        job = posted.json()["id"]
        assert posted.headers["location"] == f"/v1/tasks/fits/{job}" and posted.json()["status"] == "running"
        running = follow(http, job, lambda seen: seen["progress"]["readouts_done"] >= 2)
        assert running["progress"]["readouts_planned"] == len(EXAMPLES)
        assert (readouts / f"{job}.jsonl").is_file()
        cancelled = http.delete(f"/v1/tasks/fits/{job}").json()
        assert cancelled["status"] == "cancelled" and "readouts removed" in cancelled["events"][-1]["event"]
        assert not (readouts / f"{job}.jsonl").exists()
        assert http.get(f"/v1/tasks/{job}").status_code == 404

        with pytest.raises(httpx.ReadTimeout):  # a waiting client that leaves: the job stops, its readouts kept
            http.post("/v1/tasks", json=body, timeout=2.5)
        left = follow(http, job, lambda seen: seen["status"] == "cancelled")
        kept = len((readouts / f"{job}.jsonl").read_text().splitlines()) - 1  # its first line: the answer settings
        assert 2 <= kept < len(EXAMPLES) and "kept for a fit posted again" in left["events"][-1]["event"]

        fake.generate_delay = 0.0
        again = http.post("/v1/tasks", params={"background": "true"}, json=body).json()
        assert again["id"] == job and again["events"][0]["event"].startswith(f"started; {kept} readouts kept")
        done = follow(http, job, lambda seen: seen["status"] == "done")
        assert done["task"]["id"] == job and done["progress"]["readouts_done"] == len(EXAMPLES)
        assert http.get(f"/v1/tasks/{job}").json() == done["task"]
    assert not (readouts / f"{job}.jsonl").exists()


def test_identical_fits_share_one_job(serve_openjev, fake, qwen_tokenizer_dir, tmp_path):
    server = start(serve_openjev, fake, qwen_tokenizer_dir, tmp_path / "tasks", OPENJEV_TASK_WORKED_EXAMPLES="0")
    fake.generate_delay = 0.2
    body = {"question": QUESTION, "examples": EXAMPLES}
    with server.client(timeout=120) as http:
        first = http.post("/v1/tasks", params={"background": "true"}, json=body).json()
        second = http.post("/v1/tasks", params={"background": "true"}, json=body).json()
        assert second["id"] == first["id"] and second["status"] == "running"
        assert any("shares this job" in event["event"] for event in second["events"])
        waited = http.post("/v1/tasks", json=body)  # the synchronous form waits on the same job
        assert waited.status_code == 201 and waited.json()["id"] == first["id"]
        done = http.get(f"/v1/tasks/fits/{first['id']}").json()
        assert done["status"] == "done" and done["progress"]["readouts_done"] == len(EXAMPLES)
        assert len([line for line in server.log().splitlines() if "POST /v1/tasks" in line]) == 3


def test_a_background_that_is_not_a_boolean_is_the_route_s_422_on_either_path(
    serve_openjev, fake, qwen_tokenizer_dir, tmp_path
):
    server = start(serve_openjev, fake, qwen_tokenizer_dir, tmp_path / "tasks", OPENJEV_TASK_WORKED_EXAMPLES="0")
    body = {"question": QUESTION, "examples": EXAMPLES}
    with server.client() as http:
        answers = [
            http.post("/v1/tasks?background=maybe", json=body, headers={"content-type": content_type})
            for content_type in ("application/json", "application/vnd.openjev+json")
        ]
        assert http.get("/v1/tasks").json()["tasks"] == []  # nothing was fitted
    for answer in answers:
        assert answer.status_code == 422, answer.text
        (entry,) = answer.json()["detail"]
        assert entry["loc"] == ["query", "background"] and entry["type"] == "bool_parsing"
    assert answers[0].json() == answers[1].json()


def test_worked_questions_over_the_token_budget_refuse_the_fit_before_any_readout(
    serve_openjev, fake, qwen_tokenizer_dir, tmp_path
):
    """The plain readouts fit the budget and the worked questions do not: the fit was refused only
    after every plain readout had been read (1,000 of them for a 0.98 MiB fit)."""
    server = start(serve_openjev, fake, qwen_tokenizer_dir, tmp_path / "tasks", OPENJEV_MAX_INPUT_TOKENS="600")
    long = [
        {**example, "state": example["state"] + " The parcel was meant to come on Monday." * 12} for example in MANY
    ]  # enough of each label that worked examples can be set apart (`fitting`, step 3)
    with server.client() as http:
        assert http.post("/v1/systemone", json={**ASKED, "state": long[0]["state"]}).status_code == 200
        before = len(fake.generate_calls)
        refused = http.post("/v1/tasks", json={"question": QUESTION, "examples": long})
        assert len(fake.generate_calls) == before  # nothing was read
    assert refused.status_code == 422, refused.text
    (entry,) = refused.json()["detail"]
    assert entry["loc"][:2] == ["body", "examples"] and entry["loc"][3] == "state"
    assert "worked examples per label (OPENJEV_TASK_WORKED_EXAMPLES)" in entry["msg"]
    assert "OPENJEV_MAX_INPUT_TOKENS" in entry["msg"]
