"""A fit's readouts refused as overloaded: asked again within a bound, then the fit fails with that 529.

`fit_task` takes the path a readout goes by as its `answer` (module doc of `tasks/fitting.py`); here it
is a server that answers every readout with the refusal its admission gives when full, which the
fits' own slots keep the real one from giving (`tests/api/test_fit_tenants.py`)."""

from __future__ import annotations

import asyncio

import pytest

from openjev.config import Settings
from openjev.errors import Overloaded
from openjev.request.schema import ChoiceQuestion
from openjev.tasks import fitting
from openjev.tasks.schema import LabelledState, TaskRequest

QUESTION = ChoiceQuestion(type="choice", criteria={"billing": None, "shipping": None})
TASK = TaskRequest(
    question=QUESTION,
    examples=[LabelledState(state=f"Ticket {i}", label=("billing", "shipping")[i % 2]) for i in range(6)],
)


def test_an_overloaded_readout_is_asked_again_a_bounded_number_of_times_then_the_fit_fails(monkeypatch) -> None:
    """It waited and asked again forever: a server that stayed full held the fit, and its retries, for good."""
    monkeypatch.setattr(fitting, "OVERLOAD_WAIT", 0.001)
    asked = []

    async def full(request: object, hidden: frozenset[str]) -> tuple[dict, dict]:
        asked.append(request)
        raise Overloaded("16 evaluations are in progress (OPENJEV_MAX_CONCURRENT_REQUESTS=16); retry shortly")

    settings = Settings(task_folds=2, task_worked_examples=0)
    fit = fitting.fit_task(TASK, settings, "model", full, concurrency=1)
    with pytest.raises(Overloaded) as refused:
        asyncio.run(asyncio.wait_for(fit, timeout=30))
    assert len(asked) == fitting.OVERLOAD_RETRIES + 1
    assert "refused as overloaded 7 times" in refused.value.message
    assert "OPENJEV_MAX_CONCURRENT_REQUESTS=16" in refused.value.message


def test_a_readout_refused_a_few_times_is_read_once_the_server_has_room(monkeypatch) -> None:
    monkeypatch.setattr(fitting, "OVERLOAD_WAIT", 0.001)
    refusals = {"left": fitting.OVERLOAD_RETRIES}

    async def busy_then_free(request: object, hidden: frozenset[str]) -> tuple[dict, dict]:
        if refusals["left"]:
            refusals["left"] -= 1
            raise Overloaded("busy")
        text = request.state  # the fake model: "billing" for even tickets, with some doubt
        billing = 0.8 if int(text.split()[-1]) % 2 == 0 else 0.3
        answer = {"type": "choice", "probabilities": {"billing": billing, "shipping": 1 - billing}}
        return dict.fromkeys(request.questions, answer), {}

    settings = Settings(task_folds=2, task_worked_examples=0)
    document = asyncio.run(fitting.fit_task(TASK, settings, "model", busy_then_free, concurrency=1))
    assert document["report"]["examples"] == 6 and refusals["left"] == 0
