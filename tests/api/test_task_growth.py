"""Tasks that grow (`POST /v1/tasks/{id}/examples`, `tasks/growing.py`) and their learning curve, on the real
app under uvicorn over the fake SGLang (launched with `--return-hidden-states-mode last`, so fits read
hidden states and a head learns the tickets' words: `test_task_heads.py`)."""

from __future__ import annotations

import httpx

from tests.api.test_task_heads import EXAMPLES, QUESTION, asked_hidden, fakes, serve  # noqa: F401 (a fixture)


def fit(http: httpx.Client, examples: list[dict]) -> dict:
    created = http.post("/v1/tasks", json={"question": QUESTION, "examples": examples})
    assert created.status_code == 201, created.text
    return created.json()


def test_added_examples_are_fitted_again_reading_only_the_new_ones(
    serve_openjev,
    fakes,  # noqa: F811
    qwen_tokenizer_dir,
    tmp_path,
) -> None:
    fake, tasks = fakes("last"), tmp_path / "tasks"
    with serve(serve_openjev, fake, qwen_tokenizer_dir, tasks).client(timeout=120) as http:
        first = fit(http, EXAMPLES[:15])
        assert asked_hidden(fake) == 15 and (tasks / "readouts" / f"{first['id']}.jsonl").is_file()
        grown = http.post(f"/v1/tasks/{first['id']}/examples", json={"examples": EXAMPLES[15:]})
        assert grown.status_code == 201, grown.text
        task = grown.json()
        # A new task of all 30 (the content is its id); only the 15 new plain readouts were read.
        assert task["id"] != first["id"] and task["report"]["examples"] == 30
        assert asked_hidden(fake) == 30
        assert http.get(f"/v1/tasks/{first['id']}").status_code == 200
        # The learning curve at each count of examples per label the folds allow (3 folds of 10 per label).
        curve = http.get(f"/v1/tasks/{task['id']}").json()["report"]["learning_curve"]
        assert [point["per_label"] for point in curve["points"]] == [1, 2, 5]
        assert curve["points"][-1]["head"]["accuracy"] > curve["plain"]["accuracy"]
        # Scored: the examples not set apart as worked examples, where the fit read worked readouts.
        scored = task["report"]["nested"].get("examples_scored", 30)
        assert scored <= 30 and all(point["calibration"]["n"] == scored for point in curve["points"])
        # Posted in the background: a job, as POST /v1/tasks answers.
        more = [{"state": "Ticket 77: parcel courier delivery tracking van 3", "label": "shipping"}]
        job = http.post(f"/v1/tasks/{task['id']}/examples", params={"background": "true"}, json={"examples": more})
        assert job.status_code == 202 and job.headers["location"] == f"/v1/tasks/fits/{job.json()['id']}"
        # A deleted task's readouts go with it.
        assert http.delete(f"/v1/tasks/{first['id']}").status_code == 204
        assert not (tasks / "readouts" / f"{first['id']}.jsonl").exists()


def test_bad_examples_are_a_422_naming_the_posted_field_and_an_unknown_task_a_404(
    serve_openjev,
    fakes,  # noqa: F811
    qwen_tokenizer_dir,
    tmp_path,
) -> None:
    with serve(serve_openjev, fakes(None), qwen_tokenizer_dir, tmp_path / "tasks").client(timeout=120) as http:
        task = fit(http, EXAMPLES[:6])
        added = f"/v1/tasks/{task['id']}/examples"
        wrong = [EXAMPLES[6], {"state": "Ticket x", "label": "refunds"}]
        refused = http.post(added, json={"examples": wrong})
        assert refused.status_code == 422, refused.text
        [issue] = refused.json()["detail"]
        assert issue["loc"] == ["body", "examples", 1, "label"] and "refunds" in issue["msg"]
        for body, loc in (({"examples": []}, ["body", "examples"]), ({"examples": [{"state": "x"}]}, None)):
            empty = http.post(added, json=body)
            assert empty.status_code == 422, empty.text
            assert loc is None or empty.json()["detail"][0]["loc"] == loc
        extra = http.post(added, json={"examples": EXAMPLES[6:7], "question": QUESTION})
        assert extra.status_code == 422 and extra.json()["detail"][0]["loc"] == ["body", "question"]
        unknown = http.post("/v1/tasks/task_000000000000000000000000/examples", json={"examples": EXAMPLES[:1]})
        assert unknown.status_code == 404 and unknown.json()["detail"]["error_type"] == "not_found"
        assert [row["id"] for row in http.get("/v1/tasks").json()["tasks"]] == [task["id"]]
