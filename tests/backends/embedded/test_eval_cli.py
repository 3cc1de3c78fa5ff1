"""`openjev eval` without `--url`: the embedded default started for the run, asked, judged and stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.backends.embedded.conftest import TEST_MODEL

pytestmark = pytest.mark.embedded

TEAMS = {"billing": "Payments, charges and refunds", "technical": "Software bugs and outages"}
ROWS = [
    {
        "id": "1",
        "state": "I was charged twice this month.",
        "question": {"type": "choice", "criteria": TEAMS},
        "gold": "billing",
        "pair": "a",
    },
    {
        "id": "2",
        "state": "The app crashes on start.",
        "question": {"type": "choice", "criteria": TEAMS},
        "gold": "technical",
        "pair": "a",
    },
    {
        "id": "3",
        "state": "Please refund me.",
        "question": {"type": "noul", "instructions": "Is a refund asked for?"},
        "gold": "yes",
    },
    {
        "id": "4",
        "state": "The site is down for everyone.",
        "question": {"type": "score", "instructions": "How urgent?", "criteria": ["Routine", "Urgent", "Emergency"]},
        "gold": 2,
    },
]


def test_eval_on_the_embedded_default_writes_figures_that_match_its_answers(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    out = tmp_path / "out"
    env = {
        **os.environ,
        "OPENJEV_LOCAL_MODEL": TEST_MODEL,
        "OPENJEV_CACHE_DIR": os.environ.get("OPENJEV_CACHE_DIR", ""),
    }
    env = {key: value for key, value in env.items() if value}
    done = subprocess.run(
        [sys.executable, "-m", "openjev", "eval", str(rows), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # One record per row in the answers file; the run that made them is named beside it.
    assert "openjev_answers" in json.loads((out / "answers.run.json").read_text())
    answers = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert sorted(record["id"] for record in answers) == ["1", "2", "3", "4"]
    report = json.loads((out / "report.json").read_text())
    by_id = {record["id"]: record for record in answers}
    choice = [by_id[row_id]["answer"]["choice"] for row_id in ("1", "2")]
    right = sum(answer == row["gold"] for answer, row in zip(choice, ROWS[:2], strict=True))
    choice, noul, score = report["questions"][0], report["questions"][1], report["questions"][2]
    assert choice["accuracy"] == right / 2 and choice["pairs"]["pair_accuracy"] == (right == 2)
    assert [choice["type"], noul["type"], score["type"]] == ["choice", "noul", "score"] and report["errors"]["n"] == 0
    assert all(record["correct"] == (record["predicted"] == record["gold"]) for record in answers)
    assert report["run"]["served_model"] and report["run"]["answer_settings"]
    assert (out / "reliability.png").stat().st_size > 1000 and "weighted avg" in done.stdout
    # The server it started is gone with the run.
    (line,) = [line for line in done.stderr.splitlines() if "serves this run at" in line]
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{line.split()[-1]}/health/live", timeout=2)
