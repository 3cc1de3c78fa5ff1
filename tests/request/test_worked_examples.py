"""Criteria entries with worked examples (request/worked_examples.py): which objects are the worked
form, what they read as, and what a bad one is told."""

from __future__ import annotations

from openjev.request.schema import ChoiceQuestion, NoulQuestion, ScoreQuestion
from openjev.request.worked_examples import (
    Worked,
    criteria_entries,
    entry_issues,
    is_worked,
    question_issues,
    read_entry,
    worked_entry,
)


def test_only_objects_keyed_by_examples_and_what_are_the_worked_form() -> None:
    assert is_worked({"what": "a refund", "examples": ["Money back, please."]})
    assert is_worked({"examples": []})
    # Objects that were plain descriptions before keep their meaning.
    assert not is_worked({"what": "a refund"})
    assert not is_worked({"what": "a refund", "examples": ["x"], "note": "y"})
    assert not is_worked("examples")
    assert not is_worked(["examples"])
    assert not is_worked(None)


def test_an_entry_reads_as_its_description_and_examples() -> None:
    assert read_entry("Billing issues") == Worked("Billing issues")
    assert read_entry(None) == Worked(None)
    assert read_entry({"k": 1}) == Worked({"k": 1})
    assert read_entry({"what": "Billing", "examples": ["a", {"b": 1}]}) == Worked("Billing", ("a", {"b": 1}))
    assert read_entry({"examples": ["a"]}) == Worked(None, ("a",))
    assert read_entry(worked_entry("Billing", ["a"])) == Worked("Billing", ("a",))


def test_entries_are_named_by_their_key_below_criteria() -> None:
    choice = ChoiceQuestion(type="choice", criteria={"x": "X", "y": None})
    score = ScoreQuestion(type="score", criteria=["low", "high"])
    noul = NoulQuestion(type="noul", criteria={"true": "yes"})
    assert list(criteria_entries(choice)) == [("x", "X"), ("y", None)]
    assert list(criteria_entries(score)) == [(0, "low"), (1, "high")]
    assert list(criteria_entries(noul)) == [("true", "yes"), ("false", None)]
    assert list(criteria_entries(NoulQuestion(type="noul", instructions="?"))) == []


def test_bad_worked_entries_are_named_at_the_field() -> None:
    loc = ("questions", "q", "criteria", "a")

    def where(value: object, most: int = 2, most_bytes: int = 10) -> list[tuple]:
        return [(issue.loc, issue.type) for issue in entry_issues(value, loc, most, most_bytes)]

    assert where({"what": "ok", "examples": ["short", {"k": "v"}]}) == []
    assert where({"what": "plain", "note": 5}) == []
    assert where({"examples": "one"}) == [((*loc, "examples"), "list_type")]
    assert where({"examples": ["a", "b", "c"]}) == [((*loc, "examples"), "too_long")]
    assert where({"examples": ["a", 5, None]}, most=3) == [
        ((*loc, "examples", 1), "type_error"),
        ((*loc, "examples", 2), "type_error"),
    ]
    assert where({"examples": ["é" * 6]}) == [((*loc, "examples", 0), "too_long")]
    assert where({"examples": [{"k": "x" * 10}]}) == [((*loc, "examples", 0), "too_long")]
    assert where({"what": 3, "examples": []}) == [((*loc, "what"), "type_error")]


def test_every_entry_of_a_question_is_checked() -> None:
    score = ScoreQuestion(type="score", criteria=["low", {"what": "high", "examples": "x"}])
    issues = question_issues(score, ("questions", "s"), 4, 100)
    assert [issue.loc for issue in issues] == [("questions", "s", "criteria", 1, "examples")]
    noul = NoulQuestion(type="noul", criteria={"false": {"examples": [1]}})
    issues = question_issues(noul, ("questions", "n"), 4, 100)
    assert [issue.loc for issue in issues] == [("questions", "n", "criteria", "false", "examples", 0)]
