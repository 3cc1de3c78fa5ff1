"""Hugging Face `datasets` files as they come, and slices of a file: `openjev eval` and `classify` as a user
runs them, against openjev over the fake SGLang (or with `--dry-run`, which sends nothing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow
import pyarrow.parquet

from tests.batch.test_eval_cli import CHOICE, STATES, TEAMS, answers_of, openjev_cli, requests_with_status, write_rows
from tests.conftest import RunningOpenJev

NAMES = list(TEAMS)


def question_file(tmp_path: Path) -> Path:
    path = tmp_path / "team.json"
    path.write_text(json.dumps(CHOICE))
    return path


def test_a_class_label_parquet_is_read_as_its_names(tmp_path: Path) -> None:
    table = pyarrow.table({"text": STATES[:4], "label": [0, 1, 2, 0]})
    features = {"text": {"dtype": "string", "_type": "Value"}, "label": {"names": NAMES, "_type": "ClassLabel"}}
    metadata = {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
    path = tmp_path / "train.parquet"
    pyarrow.parquet.write_table(table.replace_schema_metadata(metadata), path)
    question = str(question_file(tmp_path))
    done = openjev_cli("eval", str(path), "--state-column", "text", "--question", question, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "gold: billing 2, technical 1, sales 1" in done.stderr


def test_integer_labels_by_label_names_nested_columns_and_any_header_case_are_evaluated(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    rows = [{"input": {"text": state}, "Label": n % 3} for n, state in enumerate(STATES[:6])]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps({"version": "1.0", "data": rows}, indent=2))
    out = tmp_path / "eval"
    url, question = openjev_on_fake.url, str(question_file(tmp_path))
    flags = ["--state-column", "input.text", "--label-names", ",".join(NAMES), "--question", question]
    done = openjev_cli("eval", str(path), *flags, "--url", url, "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["questions"][0]["n"] == 6 and report["errors"]["n"] == 0
    golds = [json.loads(line).get("gold") for line in (out / "answers.jsonl").read_text().splitlines()]
    assert sorted(gold for gold in golds if gold) == sorted(NAMES * 2)
    csv = tmp_path / "upper.csv"
    csv.write_text("State,Gold\nCharged twice,billing\nApp crashes,technical\n")
    done = openjev_cli("eval", str(csv), "--question", question, "--dry-run")
    assert done.returncode == 0 and "gold: billing 1, technical 1" in done.stderr, done.stderr


def test_limit_sample_dry_run_stdin_and_concurrency(tmp_path: Path, openjev_on_fake: RunningOpenJev) -> None:
    path = write_rows(tmp_path / "in.jsonl", [{"state": state, "question": CHOICE} for state in STATES])
    url = openjev_on_fake.url
    dry = openjev_cli("classify", str(path), "--url", url, "--dry-run", "--out", str(tmp_path / "dry.jsonl"))
    assert dry.returncode == 0 and f"{len(STATES)} rows to ask" in dry.stderr and "nothing sent" in dry.stderr
    assert requests_with_status(openjev_on_fake, 200) == 0 and not (tmp_path / "dry.jsonl").exists()
    limited = openjev_cli("classify", str(path), "--url", url, "--limit", "3", "--out", str(tmp_path / "l.jsonl"))
    assert limited.returncode == 0 and sorted(r["line"] for r in answers_of(tmp_path / "l.jsonl").values()) == [1, 2, 3]
    table = tmp_path / "l.csv"
    named = openjev_cli("classify", str(path), "--url", url, "--limit", "2", "--out", str(table))
    assert named.returncode == 0 and named.stderr.strip().splitlines()[-1].startswith(f"answers written to {table}")
    drawn = []
    for name, seed in (("a", "7"), ("b", "7"), ("c", "8")):
        out = tmp_path / f"{name}.jsonl"
        done = openjev_cli("classify", str(path), "--url", url, "--sample", "4", "--seed", seed, "--out", str(out))
        assert done.returncode == 0, done.stderr
        drawn.append(sorted(r["line"] for r in answers_of(out).values()))
    assert len(drawn[0]) == 4 and drawn[0] == drawn[1] and drawn[0] != drawn[2]
    piped = subprocess.run(
        [sys.executable, "-m", "openjev", "classify", "-", "--url", url, "--out", str(tmp_path / "s.jsonl")],
        input=path.read_text(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert piped.returncode == 0 and len(answers_of(tmp_path / "s.jsonl")) == len(STATES), piped.stderr
    zero = openjev_cli("classify", str(path), "--url", url, "--concurrency", "0")
    assert zero.returncode == 2 and "--concurrency" in zero.stderr


def test_help_lists_what_each_command_reads_and_eval_out_on_a_file_is_refused(tmp_path: Path) -> None:
    wide = {"COLUMNS": "200"}
    eval_help = openjev_cli("eval", "--help", env=wide).stdout
    assert all(flag in eval_help for flag in ("compare", "--label-column", "--score-gold", "--dry-run", "--out"))
    classify_help = openjev_cli("classify", "--help", env=wide).stdout
    assert "--dry-run" in classify_help
    assert not any(flag in classify_help for flag in ("--label-column", "--score-gold", "--label-names"))
    taken = tmp_path / "report.txt"
    taken.write_text("mine")
    rows = write_rows(tmp_path / "in.jsonl", [{"state": "s", "question": CHOICE, "gold": "billing"}])
    done = openjev_cli("eval", str(rows), "--out", str(taken), "--url", "http://127.0.0.1:9")
    assert done.returncode == 2 and "is a file" in done.stderr and "Traceback" not in done.stderr
    assert taken.read_text() == "mine"
