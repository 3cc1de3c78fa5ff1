"""A returns-policy decision written by rule (no published data): three options, contrastive pairs.

Policy: an unused item returned within 30 days is refunded; an unused item returned after 31 to 60 days
gets store credit; a used item, or any item after 60 days, is refused. Each pair shares the item and
customer and differs in one detail (the day count across a limit, or used/unused), which flips the
answer. Seeded, so the same seed gives the same items.
"""

from __future__ import annotations

import random
from typing import Any

QUESTION: dict[str, Any] = {
    "type": "choice",
    "instructions": "Under the store's returns policy: an unused item returned within 30 days of purchase is "
    "refunded; an unused item returned 31 to 60 days after purchase gets store credit; a used item, or any "
    "item returned more than 60 days after purchase, is refused. What should happen with this return?",
    "criteria": {
        "refund": "Refund the money",
        "store_credit": "Give store credit",
        "refuse": "Refuse the return",
    },
}
ITEMS = ["kettle", "desk lamp", "rain jacket", "blender", "backpack", "phone case", "toaster", "board game",
         "yoga mat", "coffee grinder", "bike helmet", "wool scarf", "headphones", "alarm clock"]  # fmt: skip
NAMES = ["Ana", "Bilal", "Chen", "Dara", "Emeka", "Fatima", "Goran", "Hana", "Ivo", "Jun", "Kemal", "Lea"]


def answer(days: int, used: bool) -> str:
    if used or days > 60:
        return "refuse"
    return "refund" if days <= 30 else "store_credit"


def state(name: str, item: str, days: int, used: bool) -> str:
    condition = "has clearly been used, with scuffs and wear" if used else "is unused, still sealed in its box"
    return f"{name} brings back a {item} bought {days} days ago. The {item} {condition}. {name} asks to return it."


def _pair(rng: random.Random, kind: str) -> list[tuple[int, bool]]:
    """Two (days, used) that differ in one detail and in their answer."""
    if kind == "early":  # refund vs store credit
        return [(rng.randint(5, 30), False), (rng.randint(31, 60), False)]
    if kind == "late":  # store credit vs refuse
        return [(rng.randint(31, 60), False), (rng.randint(61, 120), False)]
    days = rng.randint(3, 60)  # unused vs used
    return [(days, False), (days, True)]


def items(pairs: int, seed: int) -> list[dict[str, Any]]:
    """`pairs` contrastive pairs (kinds in turn), each a {state, label, pair} per half."""
    rng = random.Random(seed)
    rows = []
    for number in range(pairs):
        name, item = rng.choice(NAMES), rng.choice(ITEMS)
        for days, used in _pair(rng, ("early", "late", "used")[number % 3]):
            rows.append(
                {"state": state(name, item, days, used), "label": answer(days, used), "pair": f"p{seed}-{number}"}
            )
    return rows


def per_label(rows: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """The first `count` rows of each label, in order (a pair may be split)."""
    taken: dict[str, int] = {}
    chosen = []
    for row in rows:
        if taken.get(row["label"], 0) < count:
            taken[row["label"]] = taken.get(row["label"], 0) + 1
            chosen.append(row)
    return chosen
