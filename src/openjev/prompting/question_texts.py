"""The prompt texts: each question's turn as the model reads it, and the answer cues that close it.

- A noul lists what Yes and what No mean, then asks for Yes or No.
- A choice lists its options lettered by position (`A: description`; a null description shows the
  option's name; `keys`, OPENJEV_OPTION_KEYS: `A: name - description`), in `offset`'s rotation:
  position j shows option (j + offset) mod n.
- A score lists its levels from lowest to highest (`reverse`: in reverse order, each level keeping its
  text), lettered or numbered; a `{label, description}` level reads `label: description`.
- A box asks for the target's bounding box in the model's own grounding format.
Worked examples in the criteria are shown as `worked_examples.py` lays them out. Where each text goes
in the conversation is `prompts.py`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from openjev.options import WorkedExamples
from openjev.prompting.worked_examples import entry_lines, example_block
from openjev.request.schema import BoxQuestion, ChoiceQuestion, NoulQuestion, ScoreQuestion, render_value
from openjev.request.score_levels import level_text

#: What ends the question turn, right before the label (OPENJEV_ANSWER_CUE and per type).
ANSWER_CUES = {"plain": "Answer:\n", "json": '{"answer": "'}
ANSWER_CUE = ANSWER_CUES["plain"]


def noul_text(question: NoulQuestion, style: WorkedExamples = WorkedExamples.block) -> str:
    """`style`: how worked examples in the criteria are shown (`worked_examples.py`)."""
    lines = []
    if question.instructions is not None:
        lines.append(render_value(question.instructions))
    criteria = question.criteria
    sides = [] if criteria is None else [("Yes", criteria.true), ("No", criteria.false)]
    shown = [(label, None, value) for label, value in sides if value is not None]
    lines += entry_lines(shown, style, " means: ")
    lines += example_block(shown, style)
    lines.append("")
    lines.append("Answer Yes or No.")
    return "\n".join(lines)


def choice_text(
    question: ChoiceQuestion,
    labels: Sequence[str],
    offset: int = 0,
    style: WorkedExamples = WorkedExamples.block,
    keys: bool = False,
) -> str:
    """The options lettered in `offset`'s rotation; `keys`: each described option shows its key before
    its description (`A: refund - The user asks for money back`)."""
    head = render_value(question.instructions) if question.instructions is not None else "Choose the best option."
    items = list(question.criteria.items())
    shown = [
        (label, name, value) for label, (name, value) in zip(labels, items[offset:] + items[:offset], strict=False)
    ]
    options = entry_lines(shown, style, keys=keys)
    return "\n".join(
        [head, "", "Options:", *options, *example_block(shown, style), "", "Answer with the letter of the best option."]
    )


def score_text(
    question: ScoreQuestion, labels: Sequence[str], reverse: bool = False, style: WorkedExamples = WorkedExamples.block
) -> str:
    """The rubric as levels from lowest to highest; `reverse` lists them in reverse order (each level
    keeping its text), exactly as a client sending the reversed rubric would see it."""
    head = render_value(question.instructions) if question.instructions is not None else "Rate the content."
    levels = [level_text(level) for level in (question.criteria[::-1] if reverse else question.criteria)]
    shown = [(label, None, level) for label, level in zip(labels, levels, strict=False)]
    word = "number" if labels and labels[0].isdigit() else "letter"
    return "\n".join(
        [
            head,
            "",
            "Levels, from lowest to highest:",
            *entry_lines(shown, style),
            *example_block(shown, style),
            "",
            f"Answer with the {word} of the level that fits.",
        ]
    )


def box_text(question: BoxQuestion) -> str:
    """A box question's turn: what to locate, and the model's own grounding format, whose opening the
    answer cue writes (`box_grammar.CUE`)."""
    target = render_value(question.instructions) if question.instructions is not None else "the main subject"
    return f'Locate {target} in the image.\n\nAnswer with its bounding box as JSON: {{"bbox_2d": [x1, y1, x2, y2]}}.'
