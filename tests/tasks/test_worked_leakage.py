"""Worked examples in a fit's readouts never show the label of an example the fit scores (`tasks/fitting.py`,
step 3): the examples shown and the examples scored at w > 0 are apart, and every worked readout shows
the very examples the task then serves, so the calibration is fitted on readouts of the prompt it is used with.

`fit_task` takes the path a readout goes by as its `answer`; here it is a model that records what each
readout showed: the plain question leans to the first label, and a question with worked examples
answers the gold label (as a model that learns from them would)."""

from __future__ import annotations

import asyncio
from typing import Any

from openjev.config import Settings
from openjev.request.schema import ChoiceQuestion
from openjev.tasks import fitting
from openjev.tasks.schema import LabelledState, TaskRequest

LABELS = ("billing", "shipping", "returns")
QUESTION = ChoiceQuestion(type="choice", criteria=dict.fromkeys(LABELS))
GOLD = {f"Ticket {i}": LABELS[i % 3] for i in range(30)}
TASK = TaskRequest(
    question=QUESTION, examples=[LabelledState(state=state, label=label) for state, label in GOLD.items()]
)


def shown(question: dict[str, Any]) -> dict[str, list[str]]:
    """The worked examples a question (as JSON) shows, by label (none for the plain question)."""
    return {label: entry["examples"] for label, entry in question["criteria"].items() if isinstance(entry, dict)}


def test_no_worked_readout_shows_a_scored_example_and_each_shows_what_the_task_serves() -> None:
    reads: list[tuple[str, dict[str, dict[str, list[str]]]]] = []

    async def model(request: Any, hidden: frozenset[str]) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        asked = {name: shown(question.model_dump()) for name, question in request.questions.items()}
        reads.append((request.state, asked))
        gold = GOLD[request.state]
        answers = {}
        for name, examples in asked.items():
            favoured = gold if examples else LABELS[0]
            leaning = {label: 0.8 if label == favoured else 0.1 for label in LABELS}
            answers[name] = {"type": "choice", "probabilities": leaning}
        return answers, {}  # no hidden states: the fit is told the backend has none

    settings = Settings(task_folds=3, task_worked_examples=2)
    document = asyncio.run(fitting.fit_task(TASK, settings, "model", model, concurrency=1))

    shown_lists = [states for _, asked in reads for examples in asked.values() for states in examples.values()]
    demonstrated = {state for states in shown_lists for state in states}
    scored_with_worked = {state for state, asked in reads if any(asked.values())}
    assert demonstrated and scored_with_worked
    assert demonstrated.isdisjoint(scored_with_worked), "a readout showed an example whose label the fit scores"
    chosen = document["worked_examples_per_label"]
    assert chosen >= 1 and document["report"]["nested"]["adopted"]
    served = shown(document["worked_question"])
    assert all(asked[f"w{chosen}"] == served for _, asked in reads if f"w{chosen}" in asked)
