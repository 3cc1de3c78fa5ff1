"""The answers file on its own: which answers a run started again keeps, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openjev.batch.answers_file import ResumeRefused, compact, kept_answers, open_answers, run_header, run_path
from openjev.batch.rows import read_rows

CHOICE = {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "Payments", "technical": None}}


def test_an_answer_stands_only_for_its_own_row_and_server(tmp_path: Path) -> None:
    source = tmp_path / "rows.csv"
    source.write_text("id,state\na,Charged twice\nb,App crashes\nc,Refund please\n")
    rows = read_rows(source, question=CHOICE, need_gold=False)
    answer = {"type": "choice", "choice": "billing"}
    records = {
        "a": {"id": "a", "input": rows[0].digest, "server": "s1", "answer": answer},
        "b": {"id": "b", "input": rows[0].digest, "server": "s1", "answer": answer},
        "c": {"id": "c", "input": rows[2].digest, "server": "s0", "answer": answer},
    }
    assert kept_answers(records, rows, "s1") == ({"a"}, 1, 1)


def test_another_question_is_refused_and_restart_starts_over(tmp_path: Path) -> None:
    source, out = tmp_path / "rows.csv", tmp_path / "answers.jsonl"
    source.write_text("state\nCharged twice\n")
    rows = read_rows(source, question=CHOICE, need_gold=False)
    assert open_answers(out, run_header(source, rows), restart=False).lost == 0
    other = read_rows(source, question={**CHOICE, "instructions": "Who pays?"}, need_gold=False)
    with pytest.raises(
        ResumeRefused, match="choice question 'Which team\\?'; this run asks choice question 'Who pays\\?'"
    ):
        open_answers(out, run_header(source, other), restart=False)
    out.write_text(out.read_text() + '{"id": "x", "answer": {"ty')
    assert open_answers(out, run_header(source, other), restart=True).lost == 0
    assert out.read_text() == ""
    assert json.loads(run_path(out).read_text())["openjev_answers"]["file"] == "rows.csv"


def test_an_answers_file_whose_first_line_named_its_run_resumes_and_moves_it_beside(tmp_path: Path) -> None:
    source, out = tmp_path / "rows.csv", tmp_path / "answers.jsonl"
    source.write_text("id,state\na,Charged twice\n")
    rows = read_rows(source, question=CHOICE, need_gold=False)
    header = run_header(source, rows)
    record = {"id": "a", "input": rows[0].digest, "server": "s", "answer": {"type": "choice", "choice": "billing"}}
    out.write_text(json.dumps({"openjev_answers": header}) + "\n" + json.dumps(record) + "\n")
    assert open_answers(out, header, restart=False).records == {"a": record}
    compact(out, rows)
    assert [json.loads(line) for line in out.read_text().splitlines()] == [record]
    assert json.loads(run_path(out).read_text())["openjev_answers"] == header
