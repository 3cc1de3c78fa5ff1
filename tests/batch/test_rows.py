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


def test_jsonl_rows_without_an_id_are_named_by_their_content_and_their_gold_in_the_answer_s_keys(
    tmp_path: Path,
) -> None:
    path = write_jsonl(
        tmp_path / "rows.jsonl",
        [
            {"state": "charged twice", "question": CHOICE, "gold": "billing", "pair": "p1"},
            {"state": "app crashes", "question": SCORE, "gold": "Urgent"},
            {"id": "x", "state": "refund?", "question": {"type": "noul"}, "gold": True},
        ],
    )
    rows = read_rows(path, need_gold=True)
    assert [(row.id, row.line, row.gold, row.pair) for row in rows] == [
        (rows[0].digest[:12], 1, "billing", "p1"),
        (rows[1].digest[:12], 2, "1", None),
        ("x", 3, "yes", None),
    ]


def test_a_csv_with_one_question_file(tmp_path: Path) -> None:
    question = tmp_path / "q.json"
    question.write_text(json.dumps(CHOICE))
    path = tmp_path / "rows.csv"
    path.write_text('state,gold\n"Charged twice, refund",billing\nApp crashes,technical\n')
    rows = read_rows(path, question=read_question(question), need_gold=True)
    assert [(row.line, row.state, row.gold) for row in rows] == [
        (2, "Charged twice, refund", "billing"),
        (3, "App crashes", "technical"),
    ]


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([], "no rows in it"),
        ([{"state": "s", "question": CHOICE, "gold": "sales"}], "rows.jsonl:1: gold 'sales' is not one of"),
        ([{"state": "s", "question": SCORE, "gold": 3}], "neither a level index 0-2"),
        ([{"state": "s", "question": {"type": "noul"}, "gold": "maybe"}], "is not yes or no"),
        ([{"state": "s", "question": {"type": "rank"}, "gold": "a"}], "not a Jev question"),
        ([{"state": "s", "question": CHOICE}], "rows.jsonl: no row has a gold answer"),
        ([{"question": CHOICE, "gold": "billing"}], "no row has a state"),
        ([{"state": "s", "gold": "billing"}], "no row has a question"),
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
    with pytest.raises(LabelledFileError, match="has no 'state' column"):
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


def test_an_inserted_row_moves_no_other_row_s_id_and_a_repeat_is_numbered(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("state\nCharged twice\nApp crashes\nApp crashes\n")
    before = [row.id for row in read_rows(path, question=CHOICE, need_gold=False)]
    path.write_text("state\nWant more seats\nCharged twice\nApp crashes\nApp crashes\n")
    after = [row.id for row in read_rows(path, question=CHOICE, need_gold=False)]
    assert after[1:] == before and before[2] == before[1] + "#2"


def test_gold_spellings_people_write(tmp_path: Path) -> None:
    """Choice and level names up to case and spaces; 1-based ratings only with --score-gold rating."""
    assert gold_label(CHOICE, " Billing ") == "billing"
    assert gold_label(SCORE, "urgent") == "1"
    assert [gold_label(SCORE, rating, score_gold="rating") for rating in (1, "3")] == ["0", "2"]
    with pytest.raises(LabelledFileError, match="levels count from 0; 1-based ratings: --score-gold rating"):
        gold_label(SCORE, 3)
    with pytest.raises(LabelledFileError, match="not a rating 1-3"):
        gold_label(SCORE, 0, score_gold="rating")
    with pytest.raises(LabelledFileError, match="not a level index 0-2"):
        gold_label(SCORE, "Urgent", score_gold="index")


def test_classify_reads_no_gold(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "rows.jsonl", [{"state": "s", "question": CHOICE, "gold": "not an option"}])
    assert read_rows(path, need_gold=False)[0].gold is None
