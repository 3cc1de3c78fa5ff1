"""A task's question with worked examples in its criteria: which examples, and the object form."""

from __future__ import annotations

from openjev.request.schema import ChoiceQuestion, NoulQuestion, ScoreQuestion
from openjev.tasks.examples import demonstrations, pick, showable, worked_question


def test_pick_takes_the_first_showable_examples_of_each_label_among_the_allowed() -> None:
    gold = [0, 1, 0, 0, 1, 2]
    shown = [True, True, False, True, True, True]
    # Index 2 is too long to show; index 5 is not allowed (its own fold).
    assert pick(gold, [0, 1, 2, 3, 4], 3, 2, shown) == [[0, 3], [1, 4], []]
    assert pick(gold, [0, 1, 2, 3, 4], 3, 0, shown) == [[], [], []]
    assert showable(["short", "x" * 50, {"k": "y" * 10}], 20) == [True, False, True]


def test_choice_entries_take_the_object_form_and_a_label_without_examples_stays() -> None:
    question = ChoiceQuestion(type="choice", criteria={"a": "Alpha", "b": None, "c": "Gamma"}, x_task="task_x")
    worked = worked_question(question, [["s1"], ["s2", "s3"], []])
    assert worked.criteria == {
        "a": {"what": "Alpha", "examples": ["s1"]},
        "b": {"what": None, "examples": ["s2", "s3"]},
        "c": "Gamma",
    }
    assert worked.x_task is None and worked.instructions == question.instructions


def test_noul_and_score_entries() -> None:
    noul = NoulQuestion(type="noul", instructions="Late?", criteria={"true": "It is late"})
    worked = worked_question(noul, [["late state"], []])
    assert worked.criteria is not None
    assert worked.criteria.true == {"what": "It is late", "examples": ["late state"]}
    assert worked.criteria.false is None
    both = worked_question(noul, [[], ["on time"]])
    assert both.criteria is not None and both.criteria.false == {"what": None, "examples": ["on time"]}
    score = ScoreQuestion(type="score", criteria=["low", "high"])
    assert worked_question(score, [["s"], []]).criteria == [{"what": "low", "examples": ["s"]}, "high"]


def test_demonstrations_set_the_shown_examples_and_their_pair_mates_apart_leaving_each_label_two() -> None:
    gold = [0, 1, 0, 1, 0, 1, 0, 1]
    units = ["p", "p", "i2", "i3", "i4", "i5", "i6", "i7"]  # 0 and 1 a contrastive pair
    shown = [True] * 8
    assert demonstrations(gold, units, 2, 1, shown, 2) == (1, [[0], [1]], [2, 3, 4, 5, 6, 7])
    assert demonstrations(gold, units, 2, 2, shown, 2) == (2, [[0, 2], [1, 3]], [4, 5, 6, 7])
    assert demonstrations(gold, units, 2, 3, shown, 2) == (2, [[0, 2], [1, 3]], [4, 5, 6, 7])  # 3 would leave one
    assert demonstrations(gold[:4], units[:4], 2, 2, shown, 2) == (0, [[], []], [0, 1, 2, 3])
