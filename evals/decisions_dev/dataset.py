"""The `decisions-dev` suite's data (evals/decisions_dev/gen.py) and what each request asks.

Contract:
- The data is evals/data/decisions-dev/decisions-dev.jsonl, its sha256 checked on load (DataError
  otherwise). Synthetic, written by rule: it is a dev set to choose defaults on, not a leaderboard.
- One request per state carries every question of the state (the `plain` view, under its own id)
  and these views over the same state, so the state is read once: the choice `decision@rot`, its
  options cyclically shifted by n // 2 (the second rotation of OPENJEV_OPTION_SHIFTS=2), every
  option keeping its name; the score `level@rev`, its levels in reverse order.
- Content-free readouts: every distinct choice and score question view over CONTENT_FREE_STATE (`N/A`), and over
  the family's neutral state (the line's `neutral`: its policy, then a case with every detail left
  out), one request per family and content-free state (`content_free_request`).
- Every readout becomes a distribution in the question's own terms (`distribution`): noul
  {yes, no}; choice {option key: p} in the family's option order; score {"0": p, ...} low to high
  (a reversed view mapped back).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from evals.harness.data import DATA, read_verified
from openjev.answering.debias import CONTENT_FREE_STATE

DECISIONS_DEV = DATA / "decisions-dev" / "decisions-dev.jsonl"
DECISIONS_DEV_SHA256 = "c1523cc88bc549718f3c2602dd8448c2792c7239c998d595891236a5e3a09480"
PROTOCOL: dict[str, str] = {
    "name": "decisions-dev-v2",
    "model": "jev-latest",
    "request": "one request per state: every question under its own id, plus `decision@rot` (options shifted by "
    "n // 2, names kept) and `level@rev` (levels reversed); content-free readouts of every choice and score view "
    "over 'N/A' and over the family's neutral state (its policy, then a case with no details), one request per "
    "family and state",
}
VIEWS = {"choice": ("rot",), "score": ("rev",), "noul": ()}


def load_states() -> tuple[dict[str, Any], ...]:
    data = read_verified(DECISIONS_DEV, DECISIONS_DEV_SHA256)
    return tuple(json.loads(line) for line in data.decode().splitlines())


def view_question(question: dict[str, Any], view: str) -> dict[str, Any]:
    """The question as shown in `view` (plain, rot, rev)."""
    if view == "rot":
        items = list(question["criteria"].items())
        half = len(items) // 2
        return {**question, "criteria": dict(items[half:] + items[:half])}
    if view == "rev":
        return {**question, "criteria": question["criteria"][::-1]}
    return question


def asked_questions(questions: dict[str, Any]) -> dict[str, Any]:
    """Every question under its own id, and each extra view under `id@view`."""
    asked = dict(questions)
    for question_id, question in questions.items():
        for view in VIEWS[question["type"]]:
            asked[f"{question_id}@{view}"] = view_question(question, view)
    return asked


def state_request(state: dict[str, Any], model: str) -> dict[str, Any]:
    return {"model": model, "state": state["state"], "questions": asked_questions(state["questions"])}


CONTENT_FREE_KINDS = ("na", "neutral")


def calibrated_questions(state: dict[str, Any]) -> dict[str, Any]:
    """The questions read over the content-free states: choice and score. A noul check names one pair's
    option, so each family has several; reading them all would cost more than the noul is worth here."""
    return {qid: question for qid, question in state["questions"].items() if question["type"] != "noul"}


def content_free_request(states: Sequence[dict[str, Any]], family: str, model: str, kind: str) -> dict[str, Any]:
    """Every distinct question view of a family over a content-free state: `na` (CONTENT_FREE_STATE) or
    `neutral` (the family's own neutral state)."""
    questions: dict[str, Any] = {}
    neutral = ""
    for state in states:
        if state["family"] == family:
            questions.update(asked_questions(calibrated_questions(state)))
            neutral = state["neutral"]
    return {"model": model, "state": CONTENT_FREE_STATE if kind == "na" else neutral, "questions": questions}


def distribution(question: dict[str, Any], view: str, answer: dict[str, Any]) -> dict[str, float]:
    """An answer's distribution in the question's own terms (module doc)."""
    probabilities = answer["probabilities"] if question["type"] != "noul" else None
    if question["type"] == "noul":
        return {"yes": answer["noul"], "no": 1.0 - answer["noul"]}
    if question["type"] == "choice":
        return {key: probabilities[key] for key in question["criteria"]}
    values = [probabilities[str(index)] for index in range(len(question["criteria"]))]
    ordered = values[::-1] if view == "rev" else values
    return {str(index): value for index, value in enumerate(ordered)}
