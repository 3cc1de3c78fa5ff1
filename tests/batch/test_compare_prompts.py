"""`openjev eval compare` as evaluators compare: two prompts, and a task against none, on one id-less
file's rows, against openjev over the fake SGLang (whose answers follow the prompt, so a reworded
question answers otherwise). Every figure is checked against the runs' own reports and answer files,
and McNemar's p against scipy's binomial test."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from scipy.stats import binomtest

from openjev.batch.answers_file import read_answers
from openjev.batch.rows import read_rows
from tests.batch.test_eval_cli import CHOICE, STATES, TEAMS, openjev_cli

REWORDED = {
    "type": "choice",
    "instructions": "Route this ticket: which team should pick it up?",
    "criteria": {"billing": "Money: invoices, refunds", "technical": "Anything broken", "sales": "Buying more"},
}
#: A server whose tasks fit in seconds on twelve examples.
QUICK_TASKS = {"OPENJEV_TASK_FOLDS": "2", "OPENJEV_TASK_WORKED_EXAMPLES": "0"}


def eval_run(rows: Path, question: Path, url: str, out: Path) -> dict[str, Any]:
    done = openjev_cli("eval", str(rows), "--question", str(question), "--url", url, "--out", str(out))
    assert done.returncode == 0, done.stderr
    return json.loads((out / "report.json").read_text())


def by_state(rows: Path, question: dict[str, object], out: Path) -> dict[str, dict[str, object]]:
    """Each state's judged record in `out`, found through the row id this run gave it."""
    records = read_answers(out / "answers.jsonl")
    return {row.state: records[row.id] for row in read_rows(rows, question=question, need_gold=True)}


def assert_figures_are_the_reports(entry: dict[str, Any], report_a: dict[str, Any], report_b: dict[str, Any]) -> None:
    """Every row is paired, so each run's macro-F1, Brier and ECE are the ones its own report gives."""
    for name, key in (("macro_f1", ("macro", "f1")), ("brier", ("brier",)), ("ece", ("ece",))):
        figure = entry["figures"][name]
        for side, report in (("a", report_a), ("b", report_b)):
            value = report["questions"][0]
            for part in key:
                value = value[part]
            assert figure[side] == pytest.approx(value, abs=1e-9), (name, side)
        assert figure["ci95"][0] <= figure["difference"] <= figure["ci95"][1]


def test_two_prompts_and_a_task_against_none_compare_on_the_same_rows(
    tmp_path: Path, serve_openjev, fake_sglang, qwen_tokenizer_dir
) -> None:
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env=QUICK_TASKS)
    rows = tmp_path / "tickets.csv"
    golds = [list(TEAMS)[i % 3] for i in range(len(STATES))]
    rows.write_text("state,gold\n" + "".join(f'"{s}",{g}\n' for s, g in zip(STATES, golds, strict=True)))
    examples = [{"state": s, "label": g} for s, g in zip(STATES, golds, strict=True)]
    fitted = httpx.post(f"{server.url}/v1/tasks", json={"question": CHOICE, "examples": examples}, timeout=120)
    assert fitted.status_code == 201, fitted.text
    questions = {"plain": CHOICE, "reworded": REWORDED, "task": {**CHOICE, "x_task": fitted.json()["id"]}}
    reports = {}
    for name, question in questions.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(question))
        reports[name] = eval_run(rows, tmp_path / f"{name}.json", server.url, tmp_path / name)

    done = openjev_cli(
        "eval", "compare", str(tmp_path / "plain"), str(tmp_path / "reworded"), "--out", str(tmp_path / "cmp")
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert result["overall"]["n"] == len(STATES) and result["only_a"] == result["only_b"] == 0
    assert f'instructions differs: A "{CHOICE["instructions"]}", B "{REWORDED["instructions"]}"' in done.stdout
    assert "options differs:" in done.stdout
    [entry] = result["questions"]
    assert_figures_are_the_reports(entry, reports["plain"], reports["reworded"])
    a, b = by_state(rows, CHOICE, tmp_path / "plain"), by_state(rows, REWORDED, tmp_path / "reworded")
    only_a = sum(a[s]["correct"] and not b[s]["correct"] for s in STATES)
    only_b = sum(b[s]["correct"] and not a[s]["correct"] for s in STATES)
    assert (entry["only_a_right"], entry["only_b_right"]) == (only_a, only_b)
    expected_p = binomtest(min(only_a, only_b), only_a + only_b, 0.5).pvalue if only_a + only_b else 1.0
    assert entry["mcnemar_p"] == pytest.approx(expected_p) and result["overall"]["mcnemar_p"] == entry["mcnemar_p"]
    # The changed rows: the states whose predicted label differs, by A's row id, in the CSV and the page.
    changed = {a[s]["id"] for s in STATES if a[s]["predicted"] != b[s]["predicted"]}
    assert changed, "the reworded prompt answered every row alike, so nothing was compared"
    with (tmp_path / "cmp" / "changed-rows.csv").open() as source:
        listed = list(csv.DictReader(source))
    assert {row["id"] for row in listed} == changed
    page = (tmp_path / "cmp" / "report.html").read_text()
    assert all(f"<td>{row_id}</td>" in page for row_id in changed)

    task = openjev_cli(
        "eval", "compare", str(tmp_path / "plain"), str(tmp_path / "task"), "--json", str(tmp_path / "t.json")
    )
    assert task.returncode == 0, task.stderr
    assert json.loads((tmp_path / "t.json").read_text())["overall"]["n"] == len(STATES)
    assert f'task differs: A null, B "{fitted.json()["id"]}"' in task.stdout
    strict = openjev_cli("eval", "compare", str(tmp_path / "plain"), str(tmp_path / "task"), "--strict")
    assert strict.returncode == 2 and "share no row with the same id, state, question and gold" in strict.stderr

    gate = ("eval", "compare", str(tmp_path / "plain"), str(tmp_path / "reworded"), "--fail-under")
    accuracy_b = result["overall"]["accuracy_b"]
    below = openjev_cli(*gate, str(accuracy_b + 0.01))
    assert below.returncode == 1 and "is under --fail-under" in below.stderr
    assert openjev_cli(*gate, str(accuracy_b)).returncode == 0
    onto = openjev_cli(
        "eval", "compare", str(tmp_path / "plain"), str(tmp_path / "reworded"), "--out", str(tmp_path / "plain")
    )
    assert onto.returncode == 2 and not (tmp_path / "plain" / "comparison.json").exists()
