"""How a question's criteria, with their worked examples, read in the question turn.

A criteria entry is a description, or Jev's worked form `{"what": description, "examples": [state]}`
(`request/worked_examples.py`). Its description is shown where a plain entry's is (`A: description`;
an option with no description shows its name; a level or outcome with examples and no description
shows its examples alone). Its examples are shown as demonstrations, each a solved state beside the
label that answers it, in one of two styles (OPENJEV_WORKED_EXAMPLES, chosen on
decisions-examples-dev, docs/answer-quality.md):

- `block`: after the options, `Solved examples:` then, for each example in option order,
  `Example: <state>` and `Answer: <label>` on the next line: the same form as the answer the model
  is asked for.
- `lines`: under each option's line, its examples as `  Example: <state>`.

A state is shown as the request's state is: a string as sent, an object or array as one line of
JSON. The label is the one the option, level or outcome has in the view being read (a rotated
choice's letters move with its options), so a demonstration always answers with the letter shown.
A question with no worked entry reads exactly as it did without this module.
"""

from __future__ import annotations

from collections.abc import Sequence

from openjev.options import WorkedExamples
from openjev.request.schema import FreeForm, render_value
from openjev.request.worked_examples import read_entry

#: One shown entry: its label, what stands for it when it has no description (a choice option's
#: name; None: nothing), and the criteria value as sent.
Shown = tuple[str, str | None, FreeForm | None]

BLOCK_HEAD = "Solved examples:"


def _description(fallback: str | None, value: FreeForm | None) -> str | None:
    what = read_entry(value).what
    if what is not None:
        return render_value(what)
    return fallback


def entry_lines(
    entries: Sequence[Shown], style: WorkedExamples, separator: str = ": ", keys: bool = False
) -> list[str]:
    """`label: description` for each entry (an entry with neither description nor name shows its label
    alone; `keys`: a described option shows `label: name - description`), each followed by its examples
    in the `lines` style."""
    lines = []
    for label, fallback, value in entries:
        description = _description(fallback, value)
        if keys and fallback is not None and description != fallback:
            description = f"{fallback} - {description}"
        lines.append(label if description is None else f"{label}{separator}{description}")
        if style is WorkedExamples.lines:
            lines += [f"  Example: {render_value(example)}" for example in read_entry(value).examples]
    return lines


def example_block(entries: Sequence[Shown], style: WorkedExamples) -> list[str]:
    """The `block` style's demonstrations: a blank line, the heading, then each example and its answer;
    nothing when no entry has an example or the style is another."""
    if style is not WorkedExamples.block:
        return []
    pairs = [(label, example) for label, _, value in entries for example in read_entry(value).examples]
    if not pairs:
        return []
    lines = ["", BLOCK_HEAD]
    for label, example in pairs:
        lines += [f"Example: {render_value(example)}", f"Answer: {label}"]
    return lines
