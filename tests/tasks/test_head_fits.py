"""A fit that adopts a head (`tasks/fitting.py`), its task file checked on load (`tasks/document.py`,
`tasks/store.py`), and its kept readouts reused with their hidden states.

`fit_task` takes the path a readout goes by as its `answer` (module doc of `tasks/fitting.py`); here it
is a model whose readout knows nothing (it favours the first label) while its hidden state carries the
ticket's team, as a model's does where its letter probabilities fail it."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import numpy as np
import pytest

from openjev.config import Settings
from openjev.request.schema import ChoiceQuestion
from openjev.tasks import fitting
from openjev.tasks.head import head_fits
from openjev.tasks.schema import LabelledState, TaskRequest
from openjev.tasks.store import TaskStore

TEAMS = ("billing", "shipping", "other")
QUESTION = ChoiceQuestion(type="choice", criteria=dict.fromkeys(TEAMS))
TASK = TaskRequest(
    question=QUESTION,
    examples=[LabelledState(state=f"Ticket {i} team {i % 3}", label=TEAMS[i % 3]) for i in range(30)],
)
WIDTH = 16


def state_of(text: str) -> np.ndarray:
    """A hidden state whose first three values say the team, over noise seeded by the text."""
    rng = np.random.default_rng(int(text.split()[1]))
    state = rng.normal(size=WIDTH)
    state[int(text.split()[-1])] += 4.0
    return state


class Model:
    """Answers every readout alike (the first label, most), with the hidden state where asked; counts both."""

    def __init__(self) -> None:
        self.readouts = self.hidden = 0

    async def __call__(self, request, hidden: frozenset[str]) -> tuple[dict, dict]:
        self.readouts += 1
        self.hidden += len(hidden)
        answer = {"type": "choice", "probabilities": {"billing": 0.6, "shipping": 0.25, "other": 0.15}}
        return dict.fromkeys(request.questions, answer), {name: state_of(request.state) for name in hidden}


def fit(model: Model, kept: dict | None = None, hidden: bool = True) -> dict:
    settings = Settings(task_folds=3, task_worked_examples=1)
    return asyncio.run(fitting.fit_task(TASK, settings, "model", model, kept=kept, hidden=hidden))


def test_a_head_is_adopted_only_from_the_plain_readouts_hidden_states_and_kept_whole() -> None:
    model, kept = Model(), {}
    document = fit(model, kept)
    # 30 plain readouts with the hidden state, then one worked example per label (the first of each, set
    # apart: never scored) for the other 27, without.
    assert (model.readouts, model.hidden) == (30 + 27, 30)
    nested = document["report"]["nested"]
    assert nested["adopted"] and nested["chosen"]["accuracy"] >= 0.9 and nested["plain"]["accuracy"] < 0.4
    assert document["head"]["hidden_size"] == WIDTH and document["worked_examples_per_label"] == 0
    # The learning curve, from the readouts the fit read: the head learns, the plain readout does not.
    curve = document["report"]["learning_curve"]
    assert [point["per_label"] for point in curve["points"]] == [1, 2, 5]
    # (over the 27 examples scored: 24 of them right at 5 per label)
    assert curve["points"][-1]["head"]["accuracy"] >= 0.85 > 0.4 > curve["plain"]["accuracy"]
    # A fit asked again reads nothing: its readouts, hidden states included, are kept.
    again = Model()
    assert fit(again, kept)["head"] == document["head"] and again.readouts == 0


def test_without_hidden_states_no_readout_asks_and_no_head_is_fitted() -> None:
    model = Model()
    document = fit(model, hidden=False)
    assert model.hidden == 0 and "head" not in document
    assert document["report"]["head_left_out"] == "the backend returns no hidden states"


def test_a_head_too_large_for_the_task_file_is_no_candidate() -> None:
    assert head_fits(WIDTH, 3, 1024 * 1024) is None
    assert "OPENJEV_TASK_MAX_BYTES" in head_fits(8192, 30, 1024 * 1024)
    assert "over 300000" in head_fits(65536, 8, 1024 * 1024)


def test_a_task_file_with_a_broken_head_is_skipped_on_load(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    document = {**fit(Model()), "answer_settings": {}}
    store = TaskStore(tmp_path, 10, 4 * 1024 * 1024)
    task = store.put(document)
    assert task.head is not None and task.public["head"]["layer"] == "final"
    assert TaskStore(tmp_path, 10, 4 * 1024 * 1024).get(task.id).head is not None
    broken = {
        "shape": {**document["head"], "bias": [0.0]},
        "layer": {**document["head"], "layer": "middle"},
        "infinite": {**document["head"], "temperature": 1e400},
    }
    for name, head in broken.items():
        (tmp_path / f"{task.id}.json").write_text(json.dumps({**document, "head": head}))
        with caplog.at_level(logging.WARNING, logger="openjev"):
            assert TaskStore(tmp_path, 10, 4 * 1024 * 1024).get(task.id) is None, name
    worked = {**document, "worked_examples_per_label": 1}
    (tmp_path / f"{task.id}.json").write_text(json.dumps(worked))
    assert TaskStore(tmp_path, 10, 4 * 1024 * 1024).get(task.id) is None
    assert "plain question's readout" in caplog.text and "final layer" in caplog.text
