"""One rule reads a label of `POST /v1/tasks` and a gold answer of `openjev eval` (`task_schema.label_index`)."""

from __future__ import annotations

import pytest

from openjev.batch.rows import gold_label
from openjev.request.labelled_files import LabelledFileError
from openjev.request.schema import ChoiceQuestion, NoulQuestion, ScoreQuestion
from openjev.tasks.schema import label_index

NOUL = NoulQuestion(type="noul", instructions="Refund?")
CHOICE = ChoiceQuestion(type="choice", criteria={"billing": "Payments", "other": None})
SCORE = ScoreQuestion(type="score", criteria=["Routine", {"level": "Urgent"}, "Emergency"])


@pytest.mark.parametrize(
    ("question", "label", "index"),
    [
        (NOUL, True, 0),
        (NOUL, "yes", 0),
        (NOUL, "1", 0),
        (NOUL, " TRUE ", 0),
        (NOUL, False, 1),
        (NOUL, "no", 1),
        (NOUL, "0", 1),
        (NOUL, "maybe", None),
        (CHOICE, "billing", 0),
        (CHOICE, "other", 1),
        (CHOICE, "sales", None),
        (CHOICE, True, None),
        (SCORE, 2, 2),
        (SCORE, "1", 1),
        (SCORE, "Emergency", 2),
        (SCORE, '{"level": "Urgent"}', 1),
        (SCORE, 3, None),
        (SCORE, "Calm", None),
        (SCORE, True, None),
    ],
)
def test_a_label_is_read_by_one_rule(question, label, index) -> None:
    assert label_index(question, label) == index


def test_eval_reads_gold_by_the_same_rule_as_the_answers_keys() -> None:
    noul, choice, score = (q.model_dump(exclude_none=True) for q in (NOUL, CHOICE, SCORE))
    assert [gold_label(noul, gold, where="w") for gold in (True, "yes", 1, "0", False)] == [
        "yes",
        "yes",
        "yes",
        "no",
        "no",
    ]
    assert gold_label(choice, "other", where="w") == "other"
    assert [gold_label(score, gold, where="w") for gold in (0, "2", "Emergency")] == ["0", "2", "2"]
    with pytest.raises(LabelledFileError, match="w: gold 'sales' is not one of the question's options"):
        gold_label(choice, "sales", where="w")
