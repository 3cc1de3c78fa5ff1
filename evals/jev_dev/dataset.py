"""The `jev-dev` suite: Jev requests with rule-checked gold (evals/jev_dev/gen.py), and what each request asks.

Contract:
- The data is evals/data/jev-dev/jev-dev.jsonl, its sha256 checked on load (DataError otherwise).
  Synthetic: it catches biases and regressions; it is not a leaderboard.
- One request per state carries every question of the state (the `plain` view, under its own id)
  and the extra views below, all over the same state, so the prefix is read once. Question ids
  and option names never reach the model, so each view is read exactly as a server reading only
  that question in that form would read it.
  - score `q`: `q@rev`, the levels listed in reverse order (in every state: the `reverse` option);
  - in every LAW_EVERY-th state (the law states; the coherence laws need no more, and on a CPU
    every view costs a prefill): noul `q@score2`, the same instructions as a score question with
    levels (No, Yes); choice `q@rot` (options cyclically shifted by n // 2), `q@rev` (order
    reversed) and `q@revrot` (reversed, then shifted by n // 2), every option keeping its name;
    and one question (the state's index modulo its question count) also as `renamed@q`: a new id
    and, for a choice, new option names with the same descriptions; and that question alone in a
    second request (`alone_request`), for the batching law.
- Every readout becomes a distribution in the question's own terms (`distribution`): noul
  {yes, no}; choice {option name: p} in request order; score {"0": p, ...} in rubric order, low to
  high (a reversed view is mapped back).
- A content-free readout (contextual calibration) is the same question over the state
  CONTENT_FREE_STATE; `content_free_questions` lists each distinct question text once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.harness.data import DATA, read_verified

JEV_DEV = DATA / "jev-dev" / "jev-dev.jsonl"
JEV_DEV_SHA256 = "9389ec2c3263dbd6e3bcf8e6d816435c47309bbd7d12014791ad0e2fa1800b6b"
#: The protocol is part of every run's identity (run.json), so its text stays as the committed runs hold it:
#: "the extra views of evals/jev_dev.py" are this module's, evals/jev_dev/dataset.py since the suites got
#: their own packages.
PROTOCOL: dict[str, str] = {
    "name": "jev-dev-v2",
    "model": "jev-latest",
    "state": "the generated state text",
    "questions": "every question of the state, plus the extra views of evals/jev_dev.py, in one request",
    "score": "noul: p(yes) >= 0.5 against the gold yes/no; choice: the returned choice; score: the most "
    "probable level (ties to the lower) against the gold level",
}
#: The extra views of each question type in every state, and in the law states only, by suffix.
VIEWS = {"noul": (), "choice": (), "score": ("rev",)}
LAW_VIEWS = {"noul": ("score2",), "choice": ("rot", "rev", "revrot"), "score": ()}
#: The coherence laws are read in every LAW_EVERY-th state.
LAW_EVERY = 4


@dataclass(frozen=True)
class JevState:
    id: str
    domain: str
    state: str
    questions: dict[str, dict[str, Any]]
    gold: dict[str, dict[str, Any]]

    @property
    def index(self) -> int:
        return int(self.id.rsplit("/", 1)[1])

    @property
    def law_state(self) -> bool:
        return self.index % LAW_EVERY == 0

    @property
    def renamed(self) -> str | None:
        """The question also asked under a new id (and new option names) and alone, in a law state."""
        ids = list(self.questions)
        return ids[self.index % len(ids)] if self.law_state and ids else None

    def views(self, question_type: str) -> tuple[str, ...]:
        """The extra views of a question of this type in this state (module doc)."""
        return VIEWS[question_type] + (LAW_VIEWS[question_type] if self.law_state else ())


def load_states(path: Path = JEV_DEV, sha256: str = JEV_DEV_SHA256) -> tuple[JevState, ...]:
    lines = read_verified(path, sha256).decode().split("\n")
    return tuple(JevState(**json.loads(line)) for line in lines if line)


def choice_order(names: list[str], view: str) -> list[str]:
    order = names[::-1] if view in {"rev", "revrot"} else list(names)
    shift = len(names) // 2 if view in {"rot", "revrot"} else 0
    return order[shift:] + order[:shift]


def view_question(question: dict[str, Any], view: str) -> dict[str, Any]:
    """The question as shown in `view` (`plain` or one of VIEWS or LAW_VIEWS of its type)."""
    if view == "plain":
        return question
    if question["type"] == "noul":
        return {"type": "score", "instructions": question["instructions"], "criteria": ["No", "Yes"]}
    if question["type"] == "score":
        return {**question, "criteria": question["criteria"][::-1]}
    criteria = question["criteria"]
    return {**question, "criteria": {name: criteria[name] for name in choice_order(list(criteria), view)}}


def view_id(question_id: str, view: str) -> str:
    return question_id if view == "plain" else f"{question_id}@{view}"


def renamed_question(question: dict[str, Any]) -> dict[str, Any]:
    if question["type"] != "choice":
        return question
    return {**question, "criteria": {f"option {name}": text for name, text in question["criteria"].items()}}


def state_request(state: JevState, model: str = PROTOCOL["model"]) -> dict[str, Any]:
    """The one request of a state: every question in every view, and the renamed copy."""
    questions: dict[str, Any] = {}
    for question_id, question in state.questions.items():
        for view in ("plain", *state.views(question["type"])):
            questions[view_id(question_id, view)] = view_question(question, view)
    if state.renamed is not None:
        questions[f"renamed@{state.renamed}"] = renamed_question(state.questions[state.renamed])
    return {"model": model, "state": state.state, "questions": questions}


def alone_request(state: JevState, model: str = PROTOCOL["model"]) -> dict[str, Any] | None:
    """The batching law: the renamed question's plain form asked alone over the same state."""
    question_id = state.renamed
    if question_id is None:
        return None
    return {"model": model, "state": state.state, "questions": {question_id: state.questions[question_id]}}


def distribution(question: dict[str, Any], view: str, answer: dict[str, Any]) -> dict[str, float]:
    """A returned answer as a distribution in the question's own terms (module doc); ValueError if malformed."""
    try:
        kind = answer["type"]
        if question["type"] == "noul" and view == "plain":
            p_yes = float(answer["noul"])
            return {"yes": p_yes, "no": 1.0 - p_yes}
        probabilities = {key: float(value) for key, value in answer["probabilities"].items()}
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"malformed answer: {error!r}") from error
    if question["type"] == "noul":
        return {"yes": probabilities["1"], "no": probabilities["0"]}
    if question["type"] == "choice":
        if kind != "choice" or set(probabilities) != set(question["criteria"]):
            raise ValueError(f"answer breaks the contract: {json.dumps(answer)[:300]}")
        return {name: probabilities[name] for name in question["criteria"]}
    n = len(question["criteria"])
    if kind != "score" or set(probabilities) != {str(i) for i in range(n)}:
        raise ValueError(f"answer breaks the contract: {json.dumps(answer)[:300]}")
    if view == "rev":
        return {str(i): probabilities[str(n - 1 - i)] for i in range(n)}
    return {str(i): probabilities[str(i)] for i in range(n)}


def question_key(question: dict[str, Any]) -> str:
    """What the model sees of a question (its id and option names never reach it): the content-free cache key."""
    if question["type"] == "choice":
        return json.dumps([question["type"], question.get("instructions"), list(question["criteria"].values())])
    return json.dumps([question["type"], question.get("instructions"), question.get("criteria")])


def content_free_questions(states: Iterable[JevState]) -> dict[str, dict[str, Any]]:
    """Each distinct question text (plain views, and score `rev` views) once, by its key."""
    unique: dict[str, dict[str, Any]] = {}
    for state in states:
        for question in state.questions.values():
            views = ("plain", "rev") if question["type"] == "score" else ("plain",)
            for view in views:
                shown = view_question(question, view)
                unique.setdefault(question_key(shown), shown)
    return unique
