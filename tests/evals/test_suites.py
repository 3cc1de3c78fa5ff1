"""The suites: vendored data checked by sha256, the published matched sample, a disjoint dev sample, MMLU's order."""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from pathlib import Path

import pytest

from evals.harness import data
from evals.mmlu import suites


@pytest.fixture(scope="module")
def matched() -> data.Suite:
    return suites.load_suite("mmlu-pro-matched")


def test_matched_is_the_published_sample_in_order(matched: data.Suite) -> None:
    assert [item.row for item in matched.items] == random.Random(42).sample(range(12032), 1000)
    published = json.loads(suites.MMLU_PRO_MATCHED.read_text())["items"]
    assert [item.id for item in matched.items] == [f"mmlu-pro/{entry['question_id']}" for entry in published]
    assert [item.subject for item in matched.items] == [entry["category"] for entry in published]
    # The subject counts given in the data README.
    assert Counter(item.subject for item in matched.items) == {
        "chemistry": 122, "physics": 113, "math": 103, "law": 102, "engineering": 81, "other": 72, "economics": 71,
        "psychology": 61, "business": 58, "health": 55, "biology": 48, "philosophy": 47, "history": 35,
        "computer science": 32,
    }  # fmt: skip


def test_the_request_is_exactly_the_published_one(matched: data.Suite) -> None:
    item = matched.items[0]
    request = item.request()
    assert request == {
        "model": "jev-latest",
        "state": item.question,
        "questions": {
            "answer": {
                "type": "choice",
                "instructions": "Choose the correct answer to the multiple-choice question in the state.",
                "criteria": dict(zip("ABCDEFGHIJ", item.options, strict=False)),
            }
        },
    }
    assert len(request["questions"]["answer"]["criteria"]) == len(item.options)


def test_dev_is_fixed_and_disjoint_from_matched(matched: data.Suite) -> None:
    dev = suites.load_suite("mmlu-pro-dev")
    rows = [item.row for item in dev.items]
    assert len(rows) == len(set(rows)) == 1000
    assert not set(rows) & {item.row for item in matched.items}
    assert not {item.id for item in dev.items} & {item.id for item in matched.items}
    assert all(len(item.options) >= 2 for item in dev.items)
    assert rows == [item.row for item in suites.load_suite("mmlu-pro-dev").items]
    assert dev.dataset_sha256 == matched.dataset_sha256 == suites.MMLU_PRO_TEST_SHA256


def test_mmlu_has_every_question_once_in_a_stratified_order() -> None:
    mmlu = suites.load_suite("mmlu")
    assert len(mmlu.items) == 14042
    assert len({item.id for item in mmlu.items}) == 14042
    assert all(item.gold in "ABCD" and len(item.options) == 4 for item in mmlu.items)
    assert "question" not in {item.question for item in mmlu.items}
    totals = Counter(item.subject for item in mmlu.items)
    assert len(totals) == 57
    seen: Counter[str] = Counter()
    worst = 0.0
    for size, item in enumerate(mmlu.items, start=1):
        seen[item.subject] += 1
        worst = max(worst, *(abs(seen[s] - size * total / 14042) for s, total in totals.items()))
    assert worst < 2


def test_stratified_order_is_seeded() -> None:
    subjects = ["a"] * 6 + ["b"] * 3
    order = suites.stratified_order(subjects, seed=0)
    assert sorted(order) == list(range(9))
    assert order == suites.stratified_order(subjects, seed=0)
    # Every prefix of 3 holds two of "a" and one of "b".
    assert [subjects[i] for i in order[:3]].count("b") == 1


def test_data_is_refused_when_its_sha256_differs(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"x": 1}\n'))
    with pytest.raises(data.DataError, match="sha256"):
        data.read_verified(path, suites.MMLU_SHA256)
    with pytest.raises(data.DataError, match="missing"):
        data.read_verified(tmp_path / "absent.jsonl.gz", suites.MMLU_SHA256)
