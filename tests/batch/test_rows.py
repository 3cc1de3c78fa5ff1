"""Reading a user's labelled file: every problem is a LabelledFileError naming the file, the line and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openjev.batch.rows import gold_label, read_question, read_rows
from openjev.request.labelled_files import LabelledFileError

CHOICE = {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "Payments", "technical": None}}
SCORE = {"type": "score", "instructions": "How urgent?", "criteria": ["Routine", "Urgent", "Emergency"]}


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def test_jsonl_rows_take_their_line_numbers_as_ids_and_their_gold_in_the_answer_s_keys(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "rows.jsonl",
        [
            {"state": "charged twice", "question": CHOICE, "gold": "billing", "pair": "p1"},
            {"state": "app crashes", "question": SCORE, "gold": "Urgent"},
            {"id": "x", "state": "refund?", "question": {"type": "noul"}, "gold": True},
        ],
    )
    rows = read_rows(path, need_gold=True)
    assert [(row.id, row.gold, row.pair) for row in rows] == [
        ("1", "billing", "p1"),
        ("2", "1", None),
        ("x", "yes", None),
    ]


def test_a_csv_with_one_question_file(tmp_path: Path) -> None:
    question = tmp_path / "q.json"
    question.write_text(json.dumps(CHOICE))
    path = tmp_path / "rows.csv"
    path.write_text('state,gold\n"Charged twice, refund",billing\nApp crashes,technical\n')
    rows = read_rows(path, question=read_question(question), need_gold=True)
    assert [(row.id, row.state, row.gold) for row in rows] == [
        ("2", "Charged twice, refund", "billing"),
        ("3", "App crashes", "technical"),
    ]


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([], "no rows in it"),
        ([{"state": "s", "question": CHOICE, "gold": "sales"}], "rows.jsonl:1: gold: gold 'sales' is not one of"),
        ([{"state": "s", "question": SCORE, "gold": 3}], "neither a level index 0-2"),
        ([{"state": "s", "question": {"type": "noul"}, "gold": "maybe"}], "is not yes or no"),
        ([{"state": "s", "question": {"type": "rank"}, "gold": "a"}], "not a Jev question"),
        ([{"state": "s", "question": CHOICE}], "rows.jsonl:1: gold is missing"),
        ([{"question": CHOICE, "gold": "billing"}], "state is missing"),
        ([{"state": "s", "gold": "billing"}], "question is missing"),
        ([{"id": 1, "state": "s", "question": CHOICE, "gold": "billing"}] * 2, "used twice"),
    ],
)
def test_bad_rows_are_refused_before_anything_is_sent(tmp_path: Path, records: list[object], message: str) -> None:
    path = write_jsonl(tmp_path / "rows.jsonl", records)
    with pytest.raises(LabelledFileError, match=message):
        read_rows(path, need_gold=True)


def test_a_missing_file_and_a_csv_without_state(tmp_path: Path) -> None:
    with pytest.raises(LabelledFileError, match="cannot be read"):
        read_rows(tmp_path / "absent.jsonl", need_gold=False)
    path = tmp_path / "rows.csv"
    path.write_text("text,gold\nhello,billing\n")
    with pytest.raises(LabelledFileError, match="needs a state column"):
        read_rows(path, question=CHOICE, need_gold=True)


def test_noul_gold_spellings() -> None:
    noul = {"type": "noul"}
    assert [gold_label(noul, value, where="w") for value in (True, "yes", "TRUE", 1, False, "no", "0")] == [
        "yes",
        "yes",
        "yes",
        "yes",
        "no",
        "no",
        "no",
    ]
