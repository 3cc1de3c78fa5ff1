"""`openjev eval`'s report as a user reads it, against openjev over the fake SGLang: figures per question
(two questions of one type apart), the classification report and confusion matrix printed, the run's
metadata, answers marked right or wrong, the plots, and `classify --out` in the format its suffix names.

Every figure is checked against a count made here from the answers the server gave, not against the
code under test.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import re
from pathlib import Path

import httpx
import pyarrow.parquet
from PIL import Image

from openjev.batch.answers_file import read_answers
from tests.batch.test_eval_cli import CHOICE, SCORE, STATES, TEAMS, openjev_cli, requests_with_status, write_rows
from tests.conftest import RunningOpenJev

URGENT = {"type": "choice", "instructions": "Is it urgent?", "criteria": {"urgent": "Now", "later": "It can wait"}}


def labelled_rows(server: RunningOpenJev, tmp_path: Path) -> list[dict[str, object]]:
    """Two choice questions (three and two options) and a score question over the same states, with gold
    set from a first classify run so that some rows are right and some wrong."""
    rows = [{"id": f"t{i}", "state": state, "question": CHOICE} for i, state in enumerate(STATES)]
    rows += [{"id": f"u{i}", "state": state, "question": URGENT} for i, state in enumerate(STATES)]
    rows += [{"id": f"s{i}", "state": state, "question": SCORE} for i, state in enumerate(STATES[:6])]
    first = openjev_cli(
        "classify",
        str(write_rows(tmp_path / "in.jsonl", rows)),
        "--url",
        server.url,
        "--out",
        str(tmp_path / "first.jsonl"),
    )
    assert first.returncode == 0, first.stderr
    answers = {key: record["answer"] for key, record in read_answers(tmp_path / "first.jsonl").items()}
    for index, row in enumerate(rows):
        answer = answers[row["id"]]
        if row["question"]["type"] == "score":
            row["gold"] = min(round(answer["score"]), 2)
        else:
            options = list(row["question"]["criteria"])
            # Every third row gets another option than the server's, so each question has misses.
            row["gold"] = answer["choice"] if index % 3 else next(k for k in options if k != answer["choice"])
    return rows


def hand_counts(records: list[dict[str, object]], label: str) -> tuple[int, int, int]:
    """True positives, predicted and gold counts of `label` among answered choice records."""
    predicted = [record["answer"]["choice"] for record in records]
    gold = [record["gold"] for record in records]
    hits = sum(p == g == label for p, g in zip(predicted, gold, strict=True))
    return hits, predicted.count(label), gold.count(label)


def test_eval_reports_each_question_apart_with_its_labels_confusion_metadata_and_plots(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    url = openjev_on_fake.url
    rows = labelled_rows(openjev_on_fake, tmp_path)
    gold_file = write_rows(tmp_path / "gold.jsonl", rows)
    out = tmp_path / "eval"
    done = openjev_cli("eval", str(gold_file), "--url", url, "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "report.json").read_text())
    teams, urgent, score = report["questions"]
    assert [q["type"] for q in (teams, urgent, score)] == ["choice", "choice", "score"]
    assert (teams["n"], urgent["n"], score["n"]) == (12, 12, 6)
    # The 2-option question has its own 2x2 confusion, never the 3-option question's.
    assert set(urgent["confusion"]["labels"]) <= {"urgent", "later"} and set(teams["confusion"]["labels"]) <= set(TEAMS)
    assert sum(map(sum, urgent["confusion"]["matrix"])) == 12
    by_id = read_answers(out / "answers.jsonl")
    records = list(by_id.values())
    gold_of = {row["id"]: str(row["gold"]) for row in rows}
    assert all(record["gold"] == gold_of[record["id"]] for record in records)
    teams_records = [by_id[f"t{i}"] for i in range(12)]
    assert all(r["correct"] == (r["answer"]["choice"] == r["gold"]) for r in teams_records)
    assert teams["accuracy"] == sum(r["correct"] for r in teams_records) / 12
    for label, figures in teams["labels"].items():
        hits, predicted, gold = hand_counts(teams_records, label)
        assert figures["support"] == gold
        assert figures["precision"] == (hits / predicted if predicted else 0.0)
        assert figures["recall"] == (hits / gold if gold else 0.0)
    macro_recall = sum(f["recall"] for f in teams["labels"].values()) / len(teams["labels"])
    assert abs(teams["macro"]["recall"] - macro_recall) < 1e-12
    # The printed report: one classification report and one confusion matrix per question, labels named.
    assert done.stdout.count("weighted avg") == 3 and done.stdout.count("confusion (rows: gold") == 3
    assert done.stdout.count("macro avg") == 3 and "0 Routine" in done.stdout
    for name in teams["labels"]:
        assert re.search(rf"^ +{name} +\d\.\d{{3}} +\d\.\d{{3}} +\d\.\d{{3}} +\d+$", done.stdout, re.MULTILINE)
    run = report["run"]
    health = httpx.get(f"{url}/health").json()
    limits = httpx.get(f"{url}/v1/limits").json()
    assert (run["served_model"], run["openjev_version"]) == (health["model"], health["version"])
    assert run["answer_settings"] == limits["answer_settings"] and run["server_url"] == url
    assert run["file"] == "gold.jsonl" and run["file_sha256"] == hashlib.sha256(gold_file.read_bytes()).hexdigest()
    assert run["rows"] == {"rows": 30, "answered": 30, "errors": 0} and run["retries"] == "0 retries"
    assert f"served model: {health['model']}" in done.stdout and run["file_sha256"] in done.stdout
    page = (out / "report.html").read_text()
    for name in ("reliability", "confusion"):
        embedded = re.search(rf"alt='{name}' src='data:image/png;base64,([^']+)'", page)
        assert embedded and base64.b64decode(embedded.group(1)) == (out / f"{name}.png").read_bytes()
        with Image.open(out / f"{name}.png") as image:
            assert image.format == "PNG" and image.width >= 2 * 400
    assert not re.search(r"src='(?!data:)", page)


def test_classify_writes_the_format_its_out_suffix_names(tmp_path: Path, openjev_on_fake: RunningOpenJev) -> None:
    rows = write_rows(
        tmp_path / "in.jsonl", [{"id": f"r{i}", "state": s, "question": CHOICE} for i, s in enumerate(STATES[:5])]
    )
    url = openjev_on_fake.url
    refused = openjev_cli("classify", str(rows), "--url", url, "--out", str(tmp_path / "x.txt"))
    assert refused.returncode == 2 and ".csv" in refused.stderr and ".parquet" in refused.stderr
    assert requests_with_status(openjev_on_fake, 200) == 0
    for name in ("x.csv", "x.parquet"):
        done = openjev_cli("classify", str(rows), "--url", url, "--out", str(tmp_path / name))
        assert done.returncode == 0, done.stderr
    journal = read_answers(tmp_path / "x.csv.answers.jsonl").values()
    chosen = {record["id"]: record["answer"]["choice"] for record in journal}
    with (tmp_path / "x.csv").open(newline="") as source:
        table = list(csv.DictReader(source))
    assert [row["id"] for row in table] == [f"r{i}" for i in range(5)]
    assert {row["id"]: row["label"] for row in table} == chosen and table[0]["state"] == STATES[0]
    parquet = pyarrow.parquet.read_table(tmp_path / "x.parquet").to_pylist()
    assert [row["id"] for row in parquet] == [f"r{i}" for i in range(5)]
    assert all(row["label"] in TEAMS and 0 < row["value"] <= 1 for row in parquet)
    assert (tmp_path / "x.parquet").read_bytes()[:4] == b"PAR1"


def test_without_the_reports_extra_eval_completes_and_parquet_is_refused_first(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    """matplotlib and pyarrow made unimportable, as in an install without the `reports` extra."""
    blocked = tmp_path / "blocked"
    for package in ("matplotlib", "pyarrow"):
        (blocked / package).mkdir(parents=True)
        (blocked / package / "__init__.py").write_text(f"raise ImportError('no {package} in this install')\n")
    env = {"PYTHONPATH": str(blocked)}
    rows = write_rows(tmp_path / "in.jsonl", [{"state": s, "question": SCORE, "gold": 1} for s in STATES[:3]])
    url = openjev_on_fake.url
    refused = openjev_cli("classify", str(rows), "--url", url, "--out", str(tmp_path / "x.parquet"), env=env)
    assert refused.returncode == 2 and "--extra reports" in refused.stderr
    assert requests_with_status(openjev_on_fake, 200) == 0
    done = openjev_cli("eval", str(rows), "--url", url, "--out", str(tmp_path / "eval"), env=env)
    assert done.returncode == 0, done.stderr
    assert "--extra reports" in done.stderr and "weighted avg" in done.stdout
    assert not (tmp_path / "eval" / "reliability.png").exists()
    assert "--extra reports" in json.loads((tmp_path / "eval" / "report.json").read_text())["plots"]
