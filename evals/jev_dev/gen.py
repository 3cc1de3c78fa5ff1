"""Generate the `jev-dev` suite: Jev requests whose gold answers follow from the written facts by rule.

Usage: uv run evals/jev_dev/gen.py        (rewrites evals/data/jev-dev/jev-dev.jsonl; prints its sha256)

Contract: deterministic (`random.Random(SEED)`, no clock, no environment), so the checked-in file is
exactly what this script writes. STATES states cycle through the six domains of
evals/jev_dev/templates.py; each state holds 3 noul, 2 choice and 2 score questions:

- noul: two yes/no facts and one count-against-threshold fact. For each template the gold cycles
  yes, no; a no is written as a negation or left unstated, alternately (so "not stated" reads as no).
- choice: both of the domain's pick templates. The gold option cycles over the options (an option
  with no sentence is gold when nothing is stated) and, independently, its position cycles over
  the positions; the other options are shuffled around it.
- score: both of the domain's rubrics; the gold level cycles over the levels, the stated number is
  drawn uniformly inside the gold level's range.

Cycles start at a seeded offset per template, so golds are balanced (within one per template) without
lining up across templates. The state is the domain's intro, then the facts' sentences shuffled,
then a closing line. Each line of the output is one state: `id`, `domain`, `state`, `questions`
(the Jev questions, in a seeded order) and `gold` (per question id: `type`, `gold`, `fact`, where
fact is stated, negated, absent, count or level).
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

if __package__ in {None, ""}:  # run as a script: make the `evals` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evals.jev_dev.dataset import JEV_DEV
from evals.jev_dev.domains import DOMAINS
from evals.jev_dev.templates import Count, Domain, Flag, Pick, Rubric

SEED = 18
STATES = 162

NAMES = ("Dana Whitfield", "Ravi Menon", "Sofia Alvarez", "Tom Becker", "Aiko Tanaka", "Grace Okafor",
         "Luca Romano", "Nina Petrova", "Omar Haddad", "Chloe Martin", "Jonas Berg", "Priya Shah")  # fmt: skip
ORGS = ("Acme Logistics", "Northwind", "Bluebird Dental", "Harbor Foods", "Quill Legal", "Summit Schools",
        "Orbit Games", "Cedar Health", "Lumen Energy", "Pioneer Retail")  # fmt: skip
CLOSINGS = ("Thanks in advance.", "Please get back to me soon.", "Let me know if you need anything else.",
            "Sent from my phone.", "Regards.", "")  # fmt: skip


class Cycles:
    """Balanced draws: `next(key, n)` walks 0..n-1 from a seeded start, one step per call for that key."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.position: dict[str, int] = {}

    def next(self, key: str, n: int) -> int:
        if key not in self.position:
            self.position[key] = self.rng.randrange(n)
        value = self.position[key] % n
        self.position[key] += 1
        return value


def flag_question(flag: Flag, key: str, rng: random.Random, cycles: Cycles) -> tuple[str | None, dict, dict]:
    yes = cycles.next(key, 2) == 0
    if yes:
        return flag.yes, {"type": "noul", "instructions": flag.question}, {"gold": "yes", "fact": "stated"}
    negated = cycles.next(key + "/no", 2) == 0
    sentence = flag.negated if negated else None
    fact = "negated" if negated else "absent"
    return sentence, {"type": "noul", "instructions": flag.question}, {"gold": "no", "fact": fact}


def count_question(count: Count, key: str, rng: random.Random, cycles: Cycles) -> tuple[str, dict, dict]:
    yes = cycles.next(key, 2) == 0
    threshold = rng.randint(count.low, count.high - 1)
    n = rng.randint(threshold + 1, count.high) if yes else rng.randint(count.low, threshold)
    question = {"type": "noul", "instructions": count.question.format(t=f"{threshold:,}")}
    return count.sentence.format(n=f"{n:,}"), question, {"gold": "yes" if yes else "no", "fact": "count"}


def pick_question(pick: Pick, key: str, rng: random.Random, cycles: Cycles) -> tuple[str | None, dict, dict]:
    options = list(pick.options)
    gold = options[cycles.next(key, len(options))]
    position = cycles.next(key + "/position", len(options))
    others = [option for option in options if option is not gold]
    rng.shuffle(others)
    shown = [*others[:position], gold, *others[position:]]
    question = {
        "type": "choice",
        "instructions": pick.instructions,
        "criteria": {name: description for name, description, _ in shown},
    }
    return gold[2], question, {"gold": gold[0], "fact": "absent" if gold[2] is None else "stated"}


def rubric_question(rubric: Rubric, key: str, rng: random.Random, cycles: Cycles) -> tuple[str, dict, dict]:
    level = cycles.next(key, len(rubric.levels))
    _, low, high = rubric.levels[level]
    n = rng.randint(low, high)
    question = {
        "type": "score",
        "instructions": rubric.instructions,
        "criteria": [description for description, _, _ in rubric.levels],
    }
    return rubric.sentence.format(n=f"{n:,}"), question, {"gold": level, "fact": "level"}


def planned_questions(domain: Domain, rng: random.Random) -> list[tuple[str, Any]]:
    """(question id, template) for one state: two of the flags, one count, both picks, both rubrics."""
    flags = rng.sample(range(len(domain.flags)), 2)
    count = rng.randrange(len(domain.counts))
    return [
        *((f"flag{index + 1}", domain.flags[index]) for index in sorted(flags)),
        (f"count{count + 1}", domain.counts[count]),
        *((f"pick{index + 1}", pick) for index, pick in enumerate(domain.picks)),
        *((f"rubric{index + 1}", rubric) for index, rubric in enumerate(domain.rubrics)),
    ]


BUILDERS = {Flag: flag_question, Count: count_question, Pick: pick_question, Rubric: rubric_question}


def build_state(index: int, rng: random.Random, cycles: Cycles) -> dict[str, Any]:
    domain = DOMAINS[index % len(DOMAINS)]
    sentences, questions, gold = [], {}, {}
    for question_id, template in planned_questions(domain, rng):
        key = f"{domain.name}/{question_id}"
        sentence, question, answer = BUILDERS[type(template)](template, key, rng, cycles)
        if sentence is not None:
            sentences.append(sentence)
        questions[question_id] = question
        gold[question_id] = {"type": question["type"], **answer}
    rng.shuffle(sentences)
    intro = domain.intro.format(ref=f"#{rng.randint(10000, 99999)}", name=rng.choice(NAMES), org=rng.choice(ORGS))
    text = " ".join(part for part in [intro, *sentences, rng.choice(CLOSINGS)] if part)
    order = list(questions)
    rng.shuffle(order)
    return {
        "id": f"jev-dev/{index:04d}",
        "domain": domain.name,
        "state": text,
        "questions": {question_id: questions[question_id] for question_id in order},
        "gold": {question_id: gold[question_id] for question_id in order},
    }


def generate() -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    cycles = Cycles(rng)
    return [build_state(index, rng, cycles) for index in range(STATES)]


def serialise(states: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(state, ensure_ascii=False, sort_keys=False) + "\n" for state in states).encode()


def main() -> int:
    data = serialise(generate())
    JEV_DEV.parent.mkdir(parents=True, exist_ok=True)
    JEV_DEV.write_bytes(data)
    print(f"{JEV_DEV}: {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
