"""The `decisions-dev` position run (`evals/run.py decisions-dev --position-views`): every state's choice
question read in every order the position variants need (position_variants.py).

Contract: one request per state carrying only its choice question(s): the given order under the
question's own id, then under `id@VIEW` each view of `position_views(n)`:
- `shiftK` (K = 1 .. n-1): the options cyclically shifted by K (position j shows option (j + K) mod n,
  as OPENJEV_OPTION_SHIFTS shows them), so with the given order (K = 0) every option is read in every
  position exactly once (the full cycle);
- `canon`: the options in the server's canonical order (`openjev.prompting.option_order`, sorted by
  text then key: OPENJEV_OPTION_ORDER=canonical);
- `rev`: the options in reverse order.
Every option keeps its key and description in every view; each readout is recorded as a distribution
in the question's own option order (`dataset.distribution`), so `shown_keys` gives where each option was
shown. No content-free readouts are read: no variant of this run divides by one.
"""

from __future__ import annotations

from typing import Any

from openjev.prompting.option_order import canonical_keys

POSITION_PROTOCOL: dict[str, str] = {
    "name": "decisions-dev-positions-v1",
    "model": "jev-latest",
    "request": "one request per state, its choice question only: the given order under its own id, and under "
    "`id@shiftK` (K = 1..n-1, options cyclically shifted by K), `id@canon` (sorted by text then key, the server's "
    "canonical order) and `id@rev` (reversed); names and descriptions kept; no content-free readouts",
}


def position_views(option_count: int) -> tuple[str, ...]:
    return (*(f"shift{k}" for k in range(1, option_count)), "canon", "rev")


def shown_keys(keys: list[str], options: dict[str, Any], view: str) -> list[str]:
    """The option keys in the order `view` shows them (`plain`: as given)."""
    if view.startswith("shift"):
        shift = int(view.removeprefix("shift"))
        return keys[shift:] + keys[:shift]
    if view == "canon":
        return canonical_keys(options)
    if view == "rev":
        return keys[::-1]
    return list(keys)


def choice_questions(state: dict[str, Any]) -> dict[str, Any]:
    return {qid: question for qid, question in state["questions"].items() if question["type"] == "choice"}


def viewed(question: dict[str, Any], view: str) -> dict[str, Any]:
    options = question["criteria"]
    return {**question, "criteria": {key: options[key] for key in shown_keys(list(options), options, view)}}


def position_request(state: dict[str, Any], model: str) -> dict[str, Any]:
    asked: dict[str, Any] = {}
    for question_id, question in choice_questions(state).items():
        asked[question_id] = question
        for view in position_views(len(question["criteria"])):
            asked[f"{question_id}@{view}"] = viewed(question, view)
    return {"model": model, "state": state["state"], "questions": asked}
