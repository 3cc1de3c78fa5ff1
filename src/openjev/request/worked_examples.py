"""Criteria entries that carry worked examples: Jev's documented object form, and plain descriptions.

Any criteria description (a choice option's, a noul outcome's, a score level's) is either
- a plain description: a string, null (a choice option's name speaks), or any other object or array,
  shown as sent; or
- a worked entry: an object whose keys are `examples` and optionally `what`,
  `{"what": description, "examples": [state, ...]}`. `what` is the description (absent or null: the
  option's name speaks, a level or outcome is shown by its examples alone); each example is a solved
  state, one for which this option, outcome or level is the answer: a string, an object or an array,
  as a request's `state` is.

An object with any other key is a plain description, as it always was, so no request that worked
before changes meaning. A worked entry is checked (`entry_issues`): `examples` is a list of at most
OPENJEV_MAX_EXAMPLES_PER_OPTION states, each at most OPENJEV_MAX_EXAMPLE_BYTES of text (UTF-8 bytes of
its strings, `sizes.text_bytes`), and `what` is a description (a string, object, array or null); each
issue names the field, e.g. `("questions", "team", "criteria", "billing", "examples", 2)`.
`worked_entry` builds the object form, so code that writes examples into criteria writes what a
client would send.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openjev.errors import Issue, Loc
from openjev.request.schema import ChoiceQuestion, FreeForm, NoulQuestion, ScoreQuestion
from openjev.request.sizes import text_bytes

#: The keys of a worked entry; `examples` is the one that makes an object one.
WORKED_KEYS = frozenset({"what", "examples"})


@dataclass(frozen=True, slots=True)
class Worked:
    """A criteria entry read as a description and its solved examples (none for a plain one)."""

    what: FreeForm | None
    examples: tuple[FreeForm, ...] = ()


def is_worked(value: Any) -> bool:
    """Whether a criteria description is in the worked-example object form."""
    return isinstance(value, Mapping) and "examples" in value and WORKED_KEYS.issuperset(value)


def read_entry(value: FreeForm | None) -> Worked:
    """A criteria description as (description, examples); a plain one has no examples. Assumes a
    checked request (`entry_issues` found nothing)."""
    if not is_worked(value):
        return Worked(value)
    assert isinstance(value, Mapping)
    return Worked(value.get("what"), tuple(value["examples"]))


def worked_entry(what: FreeForm | None, examples: Sequence[FreeForm]) -> dict[str, Any]:
    """The documented object form of a description with its solved examples."""
    return {"what": what, "examples": list(examples)}


def criteria_entries(question: NoulQuestion | ChoiceQuestion | ScoreQuestion) -> Iterator[tuple[str | int, Any]]:
    """Each criteria description of a question with its key below `criteria`: a choice's option name, a
    noul's `true`/`false`, a score level's index."""
    if isinstance(question, ChoiceQuestion):
        yield from question.criteria.items()
    elif isinstance(question, ScoreQuestion):
        yield from enumerate(question.criteria)
    elif question.criteria is not None:
        yield from (("true", question.criteria.true), ("false", question.criteria.false))


def _is_state(value: Any) -> bool:
    return isinstance(value, str | dict | list)


def entry_issues(value: Any, loc: Loc, most: int, most_bytes: int) -> list[Issue]:
    """Why a worked entry at `loc` cannot be shown: `examples` not a list or longer than `most`, an
    example that is not a state or has more than `most_bytes` of text, or `what` that is not a
    description. A plain description has none."""
    if not is_worked(value):
        return []
    issues = []
    what = value.get("what")
    if what is not None and not _is_state(what):
        message = f"what must be a description (a string, an object, an array or null), got {type(what).__name__}"
        issues.append(Issue((*loc, "what"), message, "type_error"))
    examples = value["examples"]
    if not isinstance(examples, list):
        message = f"examples must be a list of solved states, got {type(examples).__name__}"
        return [*issues, Issue((*loc, "examples"), message, "list_type")]
    if len(examples) > most:
        message = f"at most {most} examples per option, got {len(examples)}"
        ctx = {"max_length": most, "actual_length": len(examples)}
        issues.append(Issue((*loc, "examples"), message, "too_long", ctx))
    for index, example in enumerate(examples[:most]):
        if not _is_state(example):
            message = f"an example is a solved state (a string, an object or an array), got {type(example).__name__}"
            issues.append(Issue((*loc, "examples", index), message, "type_error"))
        elif text_bytes(example, most_bytes) > most_bytes:
            message = f"an example may hold at most {most_bytes} bytes of text, got more"
            issues.append(Issue((*loc, "examples", index), message, "too_long", {"max_bytes": most_bytes}))
    return issues


def question_issues(
    question: NoulQuestion | ChoiceQuestion | ScoreQuestion, loc: Loc, most: int, most_bytes: int
) -> list[Issue]:
    """`entry_issues` of every criteria description of a question at `loc`."""
    return [
        issue
        for key, value in criteria_entries(question)
        for issue in entry_issues(value, (*loc, "criteria", key), most, most_bytes)
    ]
