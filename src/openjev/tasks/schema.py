"""The wire contract of `POST /v1/tasks`: a question as Jev defines it and labelled states, and their checks.

A body is `{"question": <noul | choice | score question>, "examples": [{"state", "label", "pair"?}, ...]}`.
Pydantic enforces the shape (an unknown question type is a 422 naming `question`); `check_task` adds
the rules that need the question: the question itself passes the `/v1/systemone` checks, at most
OPENJEV_TASK_MAX_EXAMPLES examples, and each label is one of the question's:

- noul: `true`/`false` (JSON booleans, or the strings `true`, `false`, `yes`, `no`), labels (yes, no);
- choice: an option's name as in `criteria` (or equal to one up to case and surrounding spaces), labels
  in `criteria` order;
- score: a level index 0..n-1 (an integer or its decimal string) or the level's text (matched as an
  option's name is), labels in level order.

Every issue names its field (`examples.3.label`), as the other 422s do.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from openjev.config import Settings
from openjev.endpoints import COMPAT_MODEL_ALIAS
from openjev.errors import Issue
from openjev.request.schema import ChoiceQuestion, FreeForm, NoulQuestion, ScoreQuestion, SystemOneRequest
from openjev.request.validation import check_request

TaskQuestion = Annotated[NoulQuestion | ChoiceQuestion | ScoreQuestion, Field(discriminator="type")]
NOUL_LABELS = ("true", "false")
_NOUL_WORDS = {"true": 0, "yes": 0, "1": 0, "false": 1, "no": 1, "0": 1}


class LabelledState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: FreeForm = Field(..., description="A state, as `/v1/systemone` takes it.")
    label: str | int | bool = Field(
        ..., description="Its gold answer: noul true/false, a choice's option name, a score's level index."
    )
    pair: Annotated[str, StringConstraints(min_length=1)] | None = Field(
        None, description="Contrastive pairs: states sharing an id are kept in one fold and scored together."
    )


class TaskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: TaskQuestion = Field(..., description="The recurring question (noul, choice or score), as Jev takes it.")
    examples: list[LabelledState] = Field(..., min_length=1, description="Labelled states of that question.")


def label_names(question: TaskQuestion) -> list[str]:
    """The question's labels in readout order: noul (true, false), a choice's options, a score's level indices."""
    if isinstance(question, NoulQuestion):
        return list(NOUL_LABELS)
    if isinstance(question, ChoiceQuestion):
        return list(question.criteria)
    return [str(level) for level in range(len(question.criteria))]


def label_index(question: TaskQuestion, label: str | int | bool) -> int | None:
    """The label's index among `label_names(question)`, or None when it is not one of them: a noul's
    `true`/`yes`/`1` (0) or `false`/`no`/`0` (1), a choice's option name, a score's level index (a
    number or its decimal string) or the level's own text (an object or array level as its JSON);
    a name matches exactly, else up to case and surrounding spaces when that leaves one name."""
    if isinstance(question, NoulQuestion):
        if isinstance(label, bool):
            return 0 if label else 1
        return _NOUL_WORDS.get(label.strip().lower()) if isinstance(label, str) else None
    if isinstance(question, ChoiceQuestion):
        return _named(list(question.criteria), label) if isinstance(label, str) else None
    if isinstance(label, bool):
        return None
    if isinstance(label, str) and not label.strip().isdecimal():
        return _named([level if isinstance(level, str) else json.dumps(level) for level in question.criteria], label)
    level = int(label)
    return level if 0 <= level < len(question.criteria) else None


def _named(names: list[str], label: str) -> int | None:
    """The name's index: written exactly, else the one name equal to it up to case and surrounding spaces."""
    if label in names:
        return names.index(label)
    folded = [index for index, name in enumerate(names) if name.strip().casefold() == label.strip().casefold()]
    return folded[0] if len(folded) == 1 else None


def canonical_examples(task: TaskRequest) -> list[dict[str, Any]]:
    """The examples with each label written as its label name (`true`, an option's name, `"2"`), so a
    label spelled another way (`yes`, `2`) is the same content; a checked task only."""
    names = label_names(task.question)
    rows = []
    for example in task.examples:
        index = label_index(task.question, example.label)
        if index is None:
            raise ValueError("canonical_examples: every label must be the question's (check_task first)")
        row = {"state": example.state, "label": names[index]}
        rows.append(row if example.pair is None else {**row, "pair": example.pair})
    return rows


def question_request(question: TaskQuestion, state: FreeForm, model: str = COMPAT_MODEL_ALIAS) -> SystemOneRequest:
    return SystemOneRequest(model=model, state=state, questions={"question": question})


def check_task(task: TaskRequest, settings: Settings) -> list[Issue]:
    """Every issue of a task (module doc), each naming its field below the body."""
    issues = [
        Issue(("question", *issue.loc[2:]), issue.msg, issue.type, issue.ctx)
        for issue in check_request(question_request(task.question, ""), settings)
        if issue.loc[:2] == ("questions", "question")
    ]
    if len(task.examples) > settings.task_max_examples:
        issues.append(
            Issue(
                ("examples",),
                f"{len(task.examples)} examples; a task takes at most {settings.task_max_examples} "
                "(OPENJEV_TASK_MAX_EXAMPLES)",
                "too_long",
            )
        )
    names = label_names(task.question)
    shown = ", ".join(json.dumps(name, ensure_ascii=False) for name in names)
    for index, example in enumerate(task.examples):
        if label_index(task.question, example.label) is None:
            label = json.dumps(example.label, ensure_ascii=False)
            issues.append(Issue(("examples", index, "label"), f"label {label} is not one of the question's: {shown}"))
    return issues
