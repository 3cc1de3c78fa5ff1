"""The MMLU family of suites: vendored data checked on load, a fixed item order, and the request each item becomes.

Contract:
- Data comes only from `evals/data/` (evals/harness/data.py: each file's sha256 is checked before any
  item is built; a mismatch raises DataError).
- A suite is a fixed, ordered tuple of items; `--limit N` always means its first N.
  - `mmlu-pro-matched`: the published 1,000-question sample (`random.Random(42).sample(range(12032),
    1000)` over the MMLU-Pro test rows), in sample order.
  - `mmlu-pro-dev`: `random.Random(1).sample(eligible, 1000)`, where eligible are the test rows,
    in row order, that are not in the matched sample and have at least 2 options (the API's minimum;
    5 rows have one), in sample order. Disjoint from the matched sample by construction.
  - `mmlu`: all 14,042 MMLU questions in a subject-stratified order (`stratified_order`, seed 0):
    every prefix holds each of the 57 subjects within 2 items of its share of the whole set (tested),
    so `--limit 500` estimates the full-set accuracy on a fair subject mix.
- Every suite is asked with the same protocol (PROTOCOL): the published MMLU-Pro request. The gold
  answer is never part of a request.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.harness.data import DATA, Suite, read_verified

MMLU_PRO_TEST = DATA / "mmlu-pro" / "test.jsonl.gz"
MMLU_PRO_TEST_SHA256 = "df683355909f9ce3c4643075e503c2194bc07ede3731fc7200c9e10f82d680e7"
MMLU_PRO_MATCHED = DATA / "mmlu-pro" / "matched-1000.json"
MMLU_PRO_MATCHED_SHA256 = "7184c5300903759196e129b5f65394fdde6fa2d2cfc2463e38b4e02099e5ec47"
MMLU = DATA / "mmlu" / "mmlu.jsonl.gz"
MMLU_SHA256 = "9f954bf40f4d38d2e49ca20ebc2025ec6cd50510717adb511d075bbd5199396c"

DEV_SEED = 1
DEV_SIZE = 1000
MMLU_ORDER_SEED = 0

LETTERS = "ABCDEFGHIJ"
QUESTION_ID = "answer"
INSTRUCTIONS = "Choose the correct answer to the multiple-choice question in the state."
PROTOCOL: dict[str, str] = {
    "name": "jev-choice-zero-shot-v1",
    "model": "jev-latest",
    "state": "the question text",
    "question_id": QUESTION_ID,
    "type": "choice",
    "instructions": INSTRUCTIONS,
    "criteria": "the option letters A, B, ... in the original order, each described by its option text",
    "score": "exact match of the returned choice with the gold letter",
}


@dataclass(frozen=True)
class Item:
    """One multiple-choice question: `id` is stable across runs, `row` its line in the data file."""

    id: str
    row: int
    subject: str
    question: str
    options: tuple[str, ...]
    gold: str

    @property
    def letters(self) -> str:
        return LETTERS[: len(self.options)]

    def request(self) -> dict[str, Any]:
        """The Jev request for this item (PROTOCOL); it never contains the gold answer."""
        criteria = dict(zip(self.letters, self.options, strict=True))
        question = {"type": "choice", "instructions": INSTRUCTIONS, "criteria": criteria}
        return {"model": PROTOCOL["model"], "state": self.question, "questions": {QUESTION_ID: question}}

    def shifted_request(self, offsets: Sequence[int]) -> dict[str, Any]:
        """The request with one more question per extra rotation (`--shifts`), all over the same state.

        Offset 0 is the protocol's question, id `answer`, unchanged. Offset s is `answer@s`: the same
        options in cyclic order starting at option s, each still named by its original letter, so
        the returned probabilities need no mapping back. Question ids and names never reach the
        model, so each rotation is read exactly as a server reading that order itself would.
        """
        request = self.request()
        for offset in offsets:
            if offset:
                order = list(range(offset, len(self.options))) + list(range(offset))
                criteria = {self.letters[index]: self.options[index] for index in order}
                request["questions"][shift_id(offset)] = {**request["questions"][QUESTION_ID], "criteria": criteria}
        return request


def shift_id(offset: int) -> str:
    return QUESTION_ID if offset == 0 else f"{QUESTION_ID}@{offset}"


def read_jsonl(path: Path, sha256: str) -> list[dict[str, Any]]:
    # Split on newlines only: str.splitlines() would also cut at U+2028 and friends inside the questions.
    return [json.loads(line) for line in read_verified(path, sha256).decode().split("\n") if line]


def mmlu_pro_item(row: int, record: dict[str, Any]) -> Item:
    return Item(
        id=f"mmlu-pro/{record['question_id']}",
        row=row,
        subject=record["category"],
        question=record["question"],
        options=tuple(record["options"]),
        gold=record["answer"],
    )


def matched_rows() -> list[int]:
    """The matched sample's row indices, in sample order."""
    sample = json.loads(read_verified(MMLU_PRO_MATCHED, MMLU_PRO_MATCHED_SHA256))
    return [entry["index"] for entry in sample["items"]]


def mmlu_pro_suite(name: str) -> Suite:
    records = read_jsonl(MMLU_PRO_TEST, MMLU_PRO_TEST_SHA256)
    matched = matched_rows()
    if name == "mmlu-pro-matched":
        rows = matched
        description = "MMLU-Pro test, the published matched sample random.Random(42).sample(range(12032), 1000)"
    else:
        excluded = set(matched)
        eligible = [row for row, record in enumerate(records) if row not in excluded and len(record["options"]) >= 2]
        rows = random.Random(DEV_SEED).sample(eligible, DEV_SIZE)
        description = (
            f"MMLU-Pro test, random.Random({DEV_SEED}).sample(rows outside the matched sample with >= 2 options,"
            f" {DEV_SIZE})"
        )
    items = tuple(mmlu_pro_item(row, records[row]) for row in rows)
    return Suite(name=name, description=description, dataset_sha256=MMLU_PRO_TEST_SHA256, items=items)


def stratified_order(subjects: Sequence[str], seed: int) -> list[int]:
    """Indices ordered so that every prefix holds each subject in proportion to its share of the whole.

    Each subject's members are shuffled (random.Random(seed), subjects in sorted order); the j-th of a
    subject with m members gets the key (j + 0.5)/m, and indices are sorted by key, ties broken by a
    further seeded draw. A prefix that ends at key t then holds about t·m of every subject.
    """
    rng = random.Random(seed)
    members: dict[str, list[int]] = {}
    for index, subject in enumerate(subjects):
        members.setdefault(subject, []).append(index)
    keyed: list[tuple[float, float, int]] = []
    for subject in sorted(members):
        group = members[subject]
        rng.shuffle(group)
        keyed.extend(((j + 0.5) / len(group), rng.random(), index) for j, index in enumerate(group))
    return [index for _, _, index in sorted(keyed)]


def mmlu_suite() -> Suite:
    records = read_jsonl(MMLU, MMLU_SHA256)
    # The file carries two stray CSV header rows ({"question": "question", ...}) inside; they are not questions.
    items = [
        Item(
            id=f"mmlu/{row}",
            row=row,
            subject=record["topic"],
            question=record["question"],
            options=(record["answer_a"], record["answer_b"], record["answer_c"], record["answer_d"]),
            gold=record["correct_answer"],
        )
        for row, record in enumerate(records)
        if record["correct_answer"] != "answer"
    ]
    order = stratified_order([item.subject for item in items], MMLU_ORDER_SEED)
    return Suite(
        name="mmlu",
        description=f"MMLU, all questions (57 subjects, 4 options), subject-stratified order, seed {MMLU_ORDER_SEED}",
        dataset_sha256=MMLU_SHA256,
        items=tuple(items[index] for index in order),
    )


SUITES = ("mmlu-pro-matched", "mmlu-pro-dev", "mmlu")


def load_suite(name: str) -> Suite:
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r}; choose from {', '.join(SUITES)}")
    return mmlu_suite() if name == "mmlu" else mmlu_pro_suite(name)
