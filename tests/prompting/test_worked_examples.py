"""How worked examples in criteria read in the question turn (prompting/worked_examples.py via prompts.py)."""

from __future__ import annotations

from openjev.options import WorkedExamples
from openjev.prompting.question_texts import choice_text, noul_text, score_text
from openjev.request.schema import ChoiceQuestion, NoulQuestion, ScoreQuestion

BILLING = {"what": "Payments", "examples": ["Charged twice.", {"msg": "Refund please"}]}
QUESTION = ChoiceQuestion(type="choice", instructions="Which team?", criteria={"billing": BILLING, "sales": None})


def test_the_block_shows_each_example_with_its_answer_after_the_options() -> None:
    text = choice_text(QUESTION, ["A", "B"])
    assert text == (
        "Which team?\n\nOptions:\nA: Payments\nB: sales\n\nSolved examples:\n"
        'Example: Charged twice.\nAnswer: A\nExample: {"msg": "Refund please"}\nAnswer: A\n\n'
        "Answer with the letter of the best option."
    )
    assert '"what"' not in text and '"examples"' not in text


def test_a_rotated_view_answers_its_examples_with_the_letter_shown() -> None:
    text = choice_text(QUESTION, ["A", "B"], offset=1)
    assert "A: sales\nB: Payments" in text
    assert "Example: Charged twice.\nAnswer: B" in text


def test_the_lines_style_puts_examples_under_their_option() -> None:
    text = choice_text(QUESTION, ["A", "B"], style=WorkedExamples.lines)
    assert 'A: Payments\n  Example: Charged twice.\n  Example: {"msg": "Refund please"}\nB: sales' in text
    assert "Answer: A" not in text


def test_noul_and_score_entries_show_their_examples() -> None:
    noul = NoulQuestion(type="noul", instructions="Refund?", criteria={"true": {"examples": ["Money back!"]}})
    assert noul_text(noul) == "Refund?\nYes\n\nSolved examples:\nExample: Money back!\nAnswer: Yes\n\nAnswer Yes or No."
    score = ScoreQuestion(type="score", criteria=["Calm", {"what": "Angry", "examples": ["Outrageous!"]}])
    text = score_text(score, ["1", "2"])
    assert "1: Calm\n2: Angry\n\nSolved examples:\nExample: Outrageous!\nAnswer: 2\n" in text
    assert "Example: Outrageous!\nAnswer: 1" in score_text(score, ["1", "2"], reverse=True)


def test_plain_criteria_read_as_before() -> None:
    plain = ChoiceQuestion(type="choice", criteria={"billing": {"what": "Payments"}, "sales": "Deals"})
    assert choice_text(plain, ["A", "B"]) == (
        'Choose the best option.\n\nOptions:\nA: {"what": "Payments"}\nB: Deals\n\n'
        "Answer with the letter of the best option."
    )
