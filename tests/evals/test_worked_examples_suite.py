"""The decisions-examples-dev suite: reproducible from its generator, balanced, pairs that differ by one
detail, worked examples that are never a test state, and a report built from answered lines."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

from evals.worked_examples import asking, gen, report


def test_the_generator_writes_exactly_the_checked_in_file() -> None:
    text = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in gen.items())
    assert text.encode() == asking.ITEMS.read_bytes()
    assert hashlib.sha256(text.encode()).hexdigest() == asking.ITEMS_SHA256


def test_items_are_contrastive_pairs_with_one_worked_example_per_option() -> None:
    items = asking.load_suite().items
    pairs: dict[str, list[dict]] = {}
    for item in items:
        pairs.setdefault(item["pair"], []).append(item)
    assert all(len(halves) == 2 for halves in pairs.values())
    states = {item["state"] for item in items}
    for first, second in pairs.values():
        assert first["gold"] != second["gold"] and first["plain"] == second["plain"]
        assert first["state"] != second["state"]
    for item in items:
        criteria = item["worked"]["criteria"]
        entries = criteria if isinstance(criteria, list) else list(criteria.values())
        assert all(len(entry["examples"]) == 1 and entry["examples"][0] not in states for entry in entries)
        if item["type"] == "choice":
            assert list(criteria) == list(item["plain"]["criteria"])
            assert list(criteria).index(item["gold"]) == item["position"]
            assert 3 <= len(criteria) <= 6
    choice = Counter(item["position"] for item in items if item["type"] == "choice")
    assert set(choice) == set(range(6))
    assert Counter(item["gold"] for item in items if item["type"] == "noul") == {"yes": 21, "no": 21}


def test_the_report_pairs_the_arms_and_measures_position_error() -> None:
    def line(item: str, arm: str, choice: str, gold: str = "a") -> dict:
        return {
            "item": item,
            "pair": item[0],
            "arm": arm,
            "type": "choice",
            "gold": gold,
            "gold_position": 0,
            "choice": choice,
            "probabilities": {"a": 0.5, "b": 0.5},
            "latency_s": 1.0,
            "model": "m",
        }

    answered = [
        line("p1", "plain", "b"),
        line("p1", "worked", "a"),
        line("p2", "plain", "b"),
        line("p2", "worked", "a"),
    ]
    meta = {"suite": asking.NAME, "url": "u", "protocol": {}, "dataset_sha256": "x"}
    built = report.build_report(meta, answered)
    row = built["by_type"]["choice"]
    assert (row["plain"]["accuracy"], row["worked"]["accuracy"], row["difference"]) == (0.0, 1.0, 1.0)
    assert row["plain"]["position_error"] == 100.0 and row["worked"]["position_error"] == 0.0
    assert row["worked"]["pairs"]["pair_accuracy"] == 1.0
