"""Generate the `decisions-dev` suite: decisions under written policies in contrastive pairs, gold by rule.

Usage: uv run evals/decisions_dev/gen.py   (rewrites evals/data/decisions-dev/decisions-dev.jsonl; prints its sha256)

Contract: deterministic (`random.Random(SEED)`, no clock, no environment). For each family
(`families.py`, `tickets.py`) every case of its attribute space is enumerated, and every pair of
cases that differ in one attribute and have different gold options is a candidate. `family.pairs`
pairs are drawn greedily so that the gold options stay balanced (each draw keeps the spread of gold
counts smallest, then reuses the fewest cases; seeded ties), never reusing a pair. Both halves of a
pair share one drawn surface, so their texts differ only where the flipped attribute shows. Pairs
are interleaved across families (the first pair of each family, then the second, ...). Each half is
one state (one line):

- `decision` (choice): the family's question, options in the family's order; gold by rule.
- `check` (noul), in pairs whose index modulo 5 is 0 or 1: "would this be correct: <one half's
  gold option>", yes for that half and no for the other; which half alternates.
- `level` (score), in every pair of a family with a rubric (`Ordinal`): described levels, low to high.

A line holds `id`, `family`, `pair` (the pair id), `half` (0/1), `split` (`dev`: defaults are
chosen on it; `confirm`: the held-out families of `held_out.py`, to check them), `permissive` (the
family's permissive / no-action option key, or null), `state` (the policy, then the case),
`neutral` (the family's neutral content-free state: the policy, then the case with no details),
`questions` and `gold` (per question id: `type`, `gold`: an option key, yes/no, or the level
index as a string).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import sys
from pathlib import Path
from typing import Any

if __package__ in {None, ""}:  # run as a script: make the `evals` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evals.decisions_dev.dataset import DECISIONS_DEV
from evals.decisions_dev.families import ACTIONS, CLAIMS, MODERATION, RETURNS, SENTIMENT, Attrs, Family
from evals.decisions_dev.held_out import DELIVERY, INSURANCE, ISSUES, MAIL
from evals.decisions_dev.policies import ACCESS, ALERTS, EXPENSES, LEAVE, MERGES, SELLERS
from evals.decisions_dev.tickets import INTENT, ROUTING, TRIAGE

SEED = 39
FAMILIES = (RETURNS, ACTIONS, MODERATION, CLAIMS, SENTIMENT, ROUTING, INTENT, TRIAGE,
            EXPENSES, ACCESS, MERGES, LEAVE, SELLERS, ALERTS, INSURANCE, MAIL, ISSUES, DELIVERY)  # fmt: skip

Pair = tuple[Attrs, Attrs]


def candidates(family: Family) -> list[Pair]:
    """Every pair of cases that differ in one attribute and whose gold options differ."""
    names = list(family.attributes)
    cases = [dict(zip(names, values, strict=True)) for values in itertools.product(*family.attributes.values())]
    found = []
    for case in cases:
        for name in names:
            for value in family.attributes[name]:
                other = {**case, name: value}
                if value != case[name] and family.rule(case) != family.rule(other):
                    found.append((case, other))
    return found


def draw_pairs(family: Family, rng: random.Random) -> list[Pair]:
    """`family.pairs` candidate pairs, gold options kept balanced, no case used twice."""
    pool = candidates(family)
    rng.shuffle(pool)
    counts = dict.fromkeys(family.options, 0)
    used: set[str] = set()
    chosen: list[Pair] = []
    while len(chosen) < family.pairs:

        def cost(pair: Pair) -> tuple[int, int, int]:
            after = dict(counts)
            for case in pair:
                after[family.rule(case)] += 1
            reused = sum(json.dumps(case, sort_keys=True) in used for case in pair)
            return max(after.values()) - min(after.values()), max(after.values()), reused

        best = min((pair for pair in pool if pair not in chosen), key=cost)
        chosen.append(best)
        for case in best:
            counts[family.rule(case)] += 1
            used.add(json.dumps(case, sort_keys=True))
    return chosen


def state_text(family: Family, case: Attrs, surface: dict[str, str]) -> str:
    text = family.render(case, surface)
    return text if family.policy is None else f"{family.policy}\n\n{text}"


def neutral_state(family: Family) -> str:
    """The family's in-domain content-free state: its policy, then a case with every detail left out."""
    return family.blank if family.policy is None else f"{family.policy}\n\n{family.blank}"


def half_lines(family: Family, index: int, pair: Pair, surface: dict[str, str]) -> list[dict[str, Any]]:
    """Both halves of one pair as suite lines."""
    choice = {"type": "choice", "instructions": family.instructions, "criteria": dict(family.options)}
    golds = [family.rule(case) for case in pair]
    checked = index % 2  # which half's gold the noul names
    check = {
        "type": "noul",
        "instructions": f"{family.instructions} Would this be correct: {family.options[golds[checked]]}",
    }
    lines = []
    for half, case in enumerate(pair):
        questions: dict[str, Any] = {"decision": choice}
        gold: dict[str, Any] = {"decision": {"type": "choice", "gold": golds[half]}}
        if index % 5 in (0, 1):
            questions["check"] = check
            gold["check"] = {"type": "noul", "gold": "yes" if half == checked else "no"}
        if family.ordinal is not None:
            ordinal = family.ordinal
            questions["level"] = {
                "type": "score",
                "instructions": ordinal.instructions,
                "criteria": list(ordinal.levels),
            }
            gold["level"] = {"type": "score", "gold": str(ordinal.level(case))}
        lines.append(
            {
                "id": f"{family.name}/{index:02d}/{half}",
                "family": family.name,
                "pair": f"{family.name}/{index:02d}",
                "half": half,
                "split": family.split,
                "permissive": family.permissive,
                "state": state_text(family, case, surface),
                "neutral": neutral_state(family),
                "questions": questions,
                "gold": gold,
            }
        )
    return lines


def generate() -> list[dict[str, Any]]:
    """Every family's pairs, interleaved pair by pair (so that `--limit N` is a mix of families)."""
    rng = random.Random(SEED)
    per_family = []
    for family in FAMILIES:
        lines = []
        for index, pair in enumerate(draw_pairs(family, rng)):
            surface = {name: rng.choice(values) for name, values in family.surfaces.items()}
            lines.append(half_lines(family, index, pair, surface))
        per_family.append(lines)
    interleaved = itertools.chain.from_iterable(itertools.zip_longest(*per_family))
    return [line for pair in interleaved if pair is not None for line in pair]


def serialise(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()


def main() -> None:
    data = serialise(generate())
    DECISIONS_DEV.parent.mkdir(parents=True, exist_ok=True)
    DECISIONS_DEV.write_bytes(data)
    print(hashlib.sha256(data).hexdigest())


if __name__ == "__main__":
    main()
