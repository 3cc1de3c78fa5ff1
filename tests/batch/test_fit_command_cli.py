"""`openjev tasks fit` reads a file as `eval` does and speaks as it does: column flags, `gold` where no
`label`, problems and refusals as `openjev: FILE:LINE: ...` lines; against openjev over the fake SGLang."""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Sequence
from pathlib import Path

from openjev.batch.fit_command import calibration_warnings
from openjev.tasks.calibration import MAX_TEMPERATURE
from tests.batch.test_compare_prompts import QUICK_TASKS
from tests.batch.test_eval_cli import CHOICE, TEAMS
from tests.conftest import RunningOpenJev, ServeOpenJev
from tests.fake_sglang import FakeSGLang
from tests.test_cli_tasks import QUESTION, STATES, run_cli, write_jsonl


def reads_nothing(input_ids: Sequence[int], token_ids: Sequence[int]) -> list[float]:
    """A model whose readout is the same whatever the state: a function of the token alone."""
    return [-1.0 - (token_id % 7) / 4.0 for token_id in token_ids]


def test_fit_takes_eval_s_columns_and_says_each_problem_on_its_line(
    serve_openjev: ServeOpenJev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path, tmp_path: Path
) -> None:
    env = {"OPENJEV_TASKS_DIR": str(tmp_path / "tasks")}
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env=env)
    question = json.dumps(QUESTION)
    table = tmp_path / "refunds.csv"
    table.write_text("Text,gold\n" + "".join(f'"{state}",{str(label).lower()}\n' for state, label in STATES))
    done = run_cli(str(table), "--question", question, "--url", server.url, "--state-column", "text")
    assert done.returncode == 0, done.stderr
    assert "adopted by nested cross-validation" in done.stdout
    broken = tmp_path / "broken.csv"
    broken.write_text("state,label\nRefund me,true\nI paid, twice,true\n")
    done = run_cli(str(broken), "--question", question, "--url", server.url)
    assert done.returncode == 2 and f"openjev: {broken}:3: 3 fields where the header has 2" in done.stderr
    assert "│" not in done.stderr and "╭" not in done.stderr
    wrong = tmp_path / "wrong.jsonl"
    rows = [{"state": state, "label": label} for state, label in STATES] + [{"state": "Refund?", "label": "perhaps"}]
    wrong.write_text("\n" + "".join(json.dumps(row) + "\n" for row in rows))
    done = run_cli(str(wrong), "--question", question, "--url", server.url)
    assert done.returncode == 1, done.stderr
    assert f"openjev: {wrong}:{len(rows) + 1}: label: " in done.stderr and '"detail"' not in done.stderr


def test_a_calibration_at_its_cap_or_answering_one_label_is_warned_and_the_identity_is_named() -> None:
    report = {"nested": {"adopted": True}}
    identity = {
        "labels": ["yes", "no"],
        "calibration": {"temperature": 1.0, "biases": [0.0, 0.0]},
        "worked_examples_per_label": 0,
        "report": report,
    }
    assert calibration_warnings(identity) == [
        "adopted, but the calibration stored is the identity (temperature 1, no biases): the plain readout answers"
    ]
    assert calibration_warnings(identity | {"worked_examples_per_label": 2}) == []
    capped = identity | {"calibration": {"temperature": 100.0, "biases": [40.0, 0.0]}}
    said = calibration_warnings(capped)
    assert "temperature cap (100)" in said[0] and "it answers 'yes' for every state" in said[1]
    fitted = identity | {"calibration": {"temperature": 1.4, "biases": [0.3, -0.3]}}
    assert calibration_warnings(fitted) == []


def test_the_summary_says_what_was_stored_and_one_label_held_out_is_warned(
    serve_openjev: ServeOpenJev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path, tmp_path: Path
) -> None:
    """A readout that tells no state from another: whatever the fit stores answers one label for every
    held-out example, and the command says so from the report's own counts."""
    fake_sglang.logprobs = reads_nothing
    env = {"OPENJEV_TASKS_DIR": str(tmp_path / "tasks")}
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env=env)
    data = write_jsonl(tmp_path / "refunds.jsonl", STATES * 2)
    saved = tmp_path / "task.json"
    done = run_cli(str(data), "--question", json.dumps(QUESTION), "--url", server.url, "--json", str(saved))
    assert done.returncode == 0, done.stderr
    task = json.loads(saved.read_text())
    report, calibration = task["report"], task["calibration"]
    counts = report["chosen"]["answered"]["predicted_counts"]
    held = report["nested"].get("examples_scored", 12)  # the examples shown as worked ones are not scored
    assert report["examples"] == 12 and len(counts) == 2 and sum(counts) == held == max(counts)
    label = task["labels"][counts.index(held)]
    assert f"answers {label!r} for {held} of {held} (100%), where 50% of the examples have that label" in done.stderr
    nested = report["nested"]
    assert (
        f"held-out accuracy {nested['chosen']['accuracy']:.1%} with what was chosen, "
        f"{nested['plain']['accuracy']:.1%} without (the plain readout)"
    ) in done.stdout
    [stored] = [line for line in done.stdout.splitlines() if line.startswith("stored: ")]
    worked = task["worked_examples_per_label"]
    assert stored.startswith(f"stored: {worked} worked example(s) per label;" if worked else "stored: no worked")
    if calibration["temperature"] == 1 and not any(calibration["biases"]):
        assert "no calibration (the identity: temperature 1, no biases)" in stored
    else:
        assert f"calibration temperature {calibration['temperature']:.3f}, biases " in stored
    assert not re.search(r"adopted[^\n]*: yes$", done.stdout, re.MULTILINE)


def tickets(n: int) -> list[tuple[str, str]]:
    """`n` tickets, one team's label in turn, each naming two of its team's words and one of any team's
    (seeded: the same tickets every run)."""
    words = {
        "billing": ["invoice", "refund", "charged", "payment", "receipt"],
        "technical": ["crash", "error", "login", "bug", "slow"],
        "sales": ["seats", "upgrade", "pricing", "demo", "plan"],
    }
    every = [word for team in words.values() for word in team]
    draw, rows = random.Random(1), []
    for i in range(n):
        team = list(TEAMS)[i % 3]
        named = [*draw.sample(words[team], 2), *draw.sample(every, 1)]
        rows.append((f"Ticket {i}: {' '.join(named)} please help", team))
    return rows


def test_a_fit_that_ends_just_under_its_temperature_cap_is_warned(
    serve_openjev: ServeOpenJev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path, tmp_path: Path
) -> None:
    """The fake's hashed readout tells none of these tickets' teams apart: the calibration's search ends
    at its bound on 1/T, a temperature a hair under the cap, which is at the cap all the same."""
    env = {"OPENJEV_TASKS_DIR": str(tmp_path / "tasks"), **QUICK_TASKS}
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env=env)
    data = tmp_path / "tickets.csv"
    data.write_text("state,label\n" + "".join(f"{state},{team}\n" for state, team in tickets(60)))
    saved = tmp_path / "task.json"
    done = run_cli(str(data), "--question", json.dumps(CHOICE), "--url", server.url, "--json", str(saved))
    assert done.returncode == 0, done.stderr
    temperature = json.loads(saved.read_text())["calibration"]["temperature"]
    assert 0.99 * MAX_TEMPERATURE <= temperature < MAX_TEMPERATURE, temperature
    assert f"openjev: warning: the stored calibration is at its temperature cap ({MAX_TEMPERATURE:g})" in done.stderr


def test_fit_at_a_dead_bare_or_v1_url_is_told_at_once_and_no_password_is_shown(
    openjev_on_fake: RunningOpenJev, tmp_path: Path
) -> None:
    """As eval and classify: /health asked before the fit is posted, a URL without its scheme refused
    before anything is sent, and a URL's password never printed."""
    data = write_jsonl(tmp_path / "refunds.jsonl", STATES)
    question = json.dumps(QUESTION)
    secret = "pw-secret-123"
    for url, status, said in (
        (f"http://user:{secret}@127.0.0.1:9", 1, "no server answers at http://user:***@127.0.0.1:9"),
        (f"user:{secret}@{openjev_on_fake.url.removeprefix('http://')}", 2, "did you mean http://user:***@"),
        (openjev_on_fake.url + "/v1", 1, f"drop the /v1: --url {openjev_on_fake.url}"),
    ):
        started = time.monotonic()
        done = run_cli(str(data), "--question", question, "--url", url)
        assert done.returncode == status and said in done.stderr, (url, done.stderr)
        assert time.monotonic() - started < 15 and secret not in done.stderr + done.stdout
        assert "Traceback" not in done.stderr
    assert "/v1/v1/tasks" not in openjev_on_fake.log(), "a /v1 URL must not be posted the fit"
