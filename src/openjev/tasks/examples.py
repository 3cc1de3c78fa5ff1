"""A task's question with worked examples in its criteria, in the object form Jev documents.

Each label's criteria entry becomes `{"what": <its description>, "examples": [<state>, ...]}`
(`request.worked_examples.worked_entry`: what a client would send; `what` null where the question gave
none: a null choice description, a noul side left out), so:

- choice: `{"billing": {"what": "...", "examples": [...]}, "sales": {"what": null, "examples": [...]}}`;
- noul: `{"true": {"what": "...", "examples": [...]}, "false": {...}}` (a side with no examples and
  no description stays out);
- score: `[{"what": "Calm", "examples": [...]}, ...]`, one entry per level.

A label with no examples keeps its entry as it was. `pick` chooses the examples: the first
`per_label` of each label among the allowed ones, in the order given, leaving out states too long to
be shown as an example (more than OPENJEV_MAX_EXAMPLE_BYTES of text).

`demonstrations` sets a fit's shown examples apart from its scored ones: the first w of each label
(`pick` over every example, so the served question's for any count up to w) are shown, and only the
examples of no unit (contrastive pair) with one shown are scored at w > 0. w is the largest count up to
the one asked for that leaves each label `least` scored examples (0: none can be spared).
"""

from __future__ import annotations

from collections.abc import Sequence

from openjev.request.schema import ChoiceQuestion, FreeForm, NoulCriteria, NoulQuestion
from openjev.request.sizes import text_bytes
from openjev.request.worked_examples import worked_entry
from openjev.tasks.schema import TaskQuestion


def pick(
    gold: Sequence[int], allowed: Sequence[int], labels: int, per_label: int, showable: Sequence[bool]
) -> list[list[int]]:
    """Per label, the first `per_label` example indices among `allowed` whose gold is that label and
    whose state is `showable` (short enough to be a worked example)."""
    chosen: list[list[int]] = [[] for _ in range(labels)]
    for index in allowed:
        if showable[index] and len(chosen[gold[index]]) < per_label:
            chosen[gold[index]].append(index)
    return chosen


def showable(states: Sequence[FreeForm], most_bytes: int) -> list[bool]:
    """Whether each state is within OPENJEV_MAX_EXAMPLE_BYTES of text, as a worked example must be."""
    return [text_bytes(state, most_bytes) <= most_bytes for state in states]


def _entry(description: FreeForm | None, examples: list[FreeForm]) -> FreeForm | None:
    return worked_entry(description, examples) if examples else description


def worked_question(question: TaskQuestion, examples: Sequence[list[FreeForm]]) -> TaskQuestion:
    """`question` with `examples[i]` (states of label i) in label i's criteria entry (module doc)."""
    if isinstance(question, ChoiceQuestion):
        criteria = {
            name: _entry(description, list(states))
            for (name, description), states in zip(question.criteria.items(), examples, strict=True)
        }
        return question.model_copy(update={"criteria": criteria, "x_task": None})
    if isinstance(question, NoulQuestion):
        sides = question.criteria or NoulCriteria()
        entries = {
            side: _entry(getattr(sides, side), list(states))
            for side, states in zip(("true", "false"), examples, strict=True)
        }
        criteria = NoulCriteria(**{side: value for side, value in entries.items() if value is not None})
        return question.model_copy(update={"criteria": criteria, "x_task": None})
    levels = [_entry(level, list(states)) for level, states in zip(question.criteria, examples, strict=True)]
    return question.model_copy(update={"criteria": levels, "x_task": None})


def demonstrations(
    gold: Sequence[int], units: Sequence[str], labels: int, most: int, shown: Sequence[bool], least: int
) -> tuple[int, list[list[int]], list[int]]:
    """(w, the examples shown per label, the examples scored) as the module doc says."""
    for per_label in range(most, 0, -1):
        picked = pick(gold, range(len(gold)), labels, per_label, shown)
        units_shown = {units[index] for chosen in picked for index in chosen}
        scored = [index for index in range(len(gold)) if units[index] not in units_shown]
        left = [sum(gold[index] == label for index in scored) for label in sorted(set(gold))]
        if min(left) >= least:
            return per_label, picked, scored
    return 0, [[] for _ in range(labels)], list(range(len(gold)))
