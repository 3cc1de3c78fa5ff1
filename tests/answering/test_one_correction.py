"""One implementation of the corrections: what `evals/decisions_dev` scores for a variant is what the
server answers from the same readouts (its `QuestionViews.answer`), a choice read in two rotations and
a score read forward and reversed, each view divided by its own content-free readout."""

from __future__ import annotations

import math

import pytest

from evals.decisions_dev import variants
from openjev.answering.answers import by_option, renormalise
from openjev.answering.debias import mirrored
from openjev.answering.readouts import QuestionViews
from openjev.config import Settings
from openjev.prompting.tokenizer import ChatTokenizer
from openjev.request.schema import ChoiceQuestion, ScoreQuestion

#: Label logprobs by shown position: the readouts, and the content-free readouts of the same views.
FIRST, SECOND = [-2.3, -0.9, -1.2, -3.0], [-0.4, -2.2, -1.9, -2.6]
FIRST_PRIOR, SECOND_PRIOR = [-1.0, -1.6, -2.3, -1.4], [-0.7, -1.9, -1.5, -2.4]


@pytest.fixture(scope="module")
def views(qwen_tokenizer_dir) -> QuestionViews:
    settings = Settings(
        option_shifts=2, score_reverse=True, contextual_calibration="choice,score", score_temperature=None
    )
    return QuestionViews(settings, ChatTokenizer(qwen_tokenizer_dir))


def record(kind: str, first: list[float], second: list[float], priors: tuple[list[float], list[float]]) -> dict:
    """A decisions-dev record: each view, and each view's content-free readout, in the question's own order."""
    keys = ["a", "b", "c", "d"]
    named = lambda values: dict(zip(keys, values, strict=True))  # noqa: E731
    return {
        "id": "x",
        "type": kind,
        "probabilities": named(first),
        "views": {"rot": named(second)},
        "content_free": {"plain": priors[0], "rot": priors[1]},
    }


def test_the_choice_variant_and_the_server_agree(views: QuestionViews) -> None:
    question = ChoiceQuestion(type="choice", instructions="Pick.", criteria={k: None for k in "abcd"})
    first_view, second_view = views.views(question)
    served = views.answer(question, [(first_view, FIRST, FIRST_PRIOR), (second_view, SECOND, SECOND_PRIOR)])
    readouts = ((FIRST, first_view), (SECOND, second_view), (FIRST_PRIOR, first_view), (SECOND_PRIOR, second_view))
    own = [by_option(values, view) for values, view in readouts]
    scored, count = variants.variant_distribution(record("choice", *own[:2], (own[2], own[3])), "cc+avg2")
    assert count == 2
    assert list(served["probabilities"].values()) == pytest.approx(scored)
    assert list(served["probabilities"].values()) != pytest.approx(by_option(FIRST, first_view))


def test_the_score_variant_and_the_server_agree(views: QuestionViews) -> None:
    question = ScoreQuestion(type="score", instructions="Rate.", criteria=[f"level {i}" for i in range(4)])
    forward_view, reversed_view = views.views(question)
    served = views.answer(question, [(forward_view, FIRST, FIRST_PRIOR), (reversed_view, SECOND, SECOND_PRIOR)])
    own = [
        renormalise(FIRST),
        mirrored(renormalise(SECOND)),
        renormalise(FIRST_PRIOR),
        mirrored(renormalise(SECOND_PRIOR)),
    ]
    scored, _ = variants.variant_distribution(record("score", *own[:2], (own[2], own[3])), "cc+avg2")
    assert list(served["probabilities"].values()) == pytest.approx(scored)
    assert math.fsum(scored) == pytest.approx(1.0)
