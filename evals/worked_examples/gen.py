"""Generate `decisions-examples-dev`: decisions asked zero-shot and with one worked example per option.

Usage: uv run evals/worked_examples/gen.py   (rewrites evals/data/decisions-examples-dev/items.jsonl;
prints its sha256)

Contract: deterministic (no randomness, no clock), from the hand-written families of `families.py`.
Every item is one state with the same question asked twice: `plain`, criteria `{key: description}`
(a score: the list of level descriptions), and `worked`, each description in Jev's worked form
`{"what": description, "examples": [state]}` with the option's one worked example (its detail in
the family's example frame, never a test state). Items come in contrastive pairs: the two states
share a frame and differ by the detail that decides the gold answer.
- choice: PAIRS_PER_FAMILY pairs per family; pair j's halves are options j and j + 1 + (j // n) mod (n - 1)
  (mod n), so every option is gold as often as any other; the options are shown rotated so that
  the first half's gold sits at position j + f + 1 + j // n (mod n), f the family's index: golds sit
  at every position, in every round of families.
- noul: NOUL_PAIRS per choice family, "does it fall under option X": yes for a detail of X, no for
  one of another option in the same frame; the false side's example is that other option's.
- score: SCORE_PAIRS per rubric, the halves two levels that cycle over every pair of levels.
Items are written round-robin over families (pair by pair), so `--limit N` is a fair mix.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in {None, ""}:  # run as a script: make the `evals` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evals.worked_examples.families import CHOICE_FAMILIES, Family, Option
from evals.worked_examples.rubrics import RUBRICS, Rubric

DATA = Path(__file__).resolve().parents[1] / "data" / "decisions-examples-dev" / "items.jsonl"
PAIRS_PER_FAMILY = 8
NOUL_PAIRS = 3
SCORE_PAIRS = 6
OTHERWISE = "Anything else."


def worked(option: Option, frame: str) -> dict[str, Any]:
    return {"what": option.what, "examples": [frame.format(detail=option.details[0])]}


def pair_of(
    name: str, kind: str, j: int, plain: dict[str, Any], examples: dict[str, Any], halves: list[tuple[str, str, int]]
) -> list[dict[str, Any]]:
    """A contrastive pair's two items: one question asked `plain` and `worked`, over each half's
    (state, gold, the gold's position)."""
    pair = f"{name}/{kind}/{j}"
    return [
        {
            "id": f"{pair}/{half}",
            "pair": pair,
            "family": name,
            "type": kind,
            "state": state,
            "plain": plain,
            "worked": examples,
            "gold": gold,
            "position": position,
        }
        for half, (state, gold, position) in enumerate(halves)
    ]


def choice_pair(family: Family, j: int, f: int) -> list[dict[str, Any]]:
    n = len(family.options)
    golds = (family.options[j % n], family.options[(j + 1 + (j // n) % (n - 1)) % n])
    rotation = (j % n - (j + f + 1 + j // n)) % n  # the first gold shown at position (j + f + 1 + j // n) mod n
    shown = family.options[rotation:] + family.options[:rotation]
    frame = family.frames[j % len(family.frames)]
    question = {"type": "choice", "instructions": family.instructions}
    plain = {**question, "criteria": {option.key: option.what for option in shown}}
    examples = {**question, "criteria": {option.key: worked(option, family.example_frame) for option in shown}}
    return pair_of(
        family.name,
        "choice",
        j,
        plain,
        examples,
        [
            (frame.format(detail=gold.details[1 + (j + half) % (len(gold.details) - 1)]), gold.key, shown.index(gold))
            for half, gold in enumerate(golds)
        ],
    )


def noul_pair(family: Family, j: int) -> list[dict[str, Any]]:
    n = len(family.options)
    target, other = family.options[(2 * j) % n], family.options[(2 * j + 1) % n]
    frame = family.frames[(j + 1) % len(family.frames)]
    instructions = f"{family.instructions}\nDoes it fall under: {target.what}"
    plain = {"type": "noul", "instructions": instructions, "criteria": {"true": target.what, "false": OTHERWISE}}
    sides = {"true": worked(target, family.example_frame), "false": worked(other, family.example_frame)}
    sides["false"]["what"] = OTHERWISE
    return pair_of(
        family.name,
        "noul",
        j,
        plain,
        {**plain, "criteria": sides},
        [
            (frame.format(detail=option.details[1 + j % (len(option.details) - 1)]), gold, 1 - half)
            for half, (option, gold) in enumerate([(target, "yes"), (other, "no")])
        ],
    )


def score_pair(rubric: Rubric, j: int) -> list[dict[str, Any]]:
    pairs = list(itertools.combinations(range(len(rubric.levels)), 2))
    low, high = pairs[j % len(pairs)]
    frame = rubric.frames[j % len(rubric.frames)]
    plain = {"type": "score", "instructions": rubric.instructions, "criteria": [level.what for level in rubric.levels]}
    examples = {**plain, "criteria": [worked(level, rubric.example_frame) for level in rubric.levels]}
    return pair_of(
        rubric.name,
        "score",
        j,
        plain,
        examples,
        [(frame.format(detail=rubric.levels[level].details[1 + j % 3]), str(level), level) for level in (low, high)],
    )


def items() -> list[dict[str, Any]]:
    groups = [
        *([choice_pair(family, j, f) for j in range(PAIRS_PER_FAMILY)] for f, family in enumerate(CHOICE_FAMILIES)),
        *([noul_pair(family, j) for j in range(NOUL_PAIRS)] for family in CHOICE_FAMILIES),
        *([score_pair(rubric, j) for j in range(SCORE_PAIRS)] for rubric in RUBRICS),
    ]
    rounds = itertools.zip_longest(*groups)
    return [item for pairs in rounds for pair in pairs if pair is not None for item in pair]


def main() -> None:
    text = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items())
    DATA.write_text(text)
    print(hashlib.sha256(text.encode()).hexdigest())


if __name__ == "__main__":
    main()
