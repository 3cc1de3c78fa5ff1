"""The decisions-dev suite: reproducible from its generator, sha-checked, balanced, contrastive, and its
offline variants computed with the server's own maths."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from evals.decisions_dev import dataset, gen, report
from evals.decisions_dev.families import Family
from openjev.answering.answers import combine_shifts
from openjev.answering.debias import divide_prior


@pytest.fixture(scope="module")
def states() -> tuple[dict, ...]:
    return dataset.load_states()


def test_the_generator_writes_exactly_the_checked_in_file() -> None:
    data = gen.serialise(gen.generate())
    assert data == dataset.DECISIONS_DEV.read_bytes()
    assert hashlib.sha256(data).hexdigest() == dataset.DECISIONS_DEV_SHA256


def test_sizes_and_gold_balance(states) -> None:
    kinds = Counter(gold["type"] for state in states for gold in state["gold"].values())
    assert kinds["choice"] >= 150 and kinds["noul"] >= 60 and kinds["score"] >= 60
    for family in gen.FAMILIES:
        golds = Counter(s["gold"]["decision"]["gold"] for s in states if s["family"] == family.name)
        assert set(golds) == set(family.options), family.name
        assert max(golds.values()) - min(golds.values()) <= 2, (family.name, golds)
        assert 3 <= len(family.options) <= 6
    nouls = Counter(s["gold"]["check"]["gold"] for s in states if "check" in s["gold"])
    assert nouls["yes"] == nouls["no"]


def by_id(family: Family, states: tuple[dict, ...]) -> dict[str, list[dict]]:
    pairs: dict[str, list[dict]] = {}
    for state in states:
        if state["family"] == family.name:
            pairs.setdefault(state["pair"], []).append(state)
    return pairs


def test_each_pair_differs_in_one_detail_that_flips_the_answer(states) -> None:
    for family in gen.FAMILIES:
        for pair in by_id(family, states).values():
            first, second = pair
            assert first["gold"]["decision"]["gold"] != second["gold"]["decision"]["gold"]
            assert first["questions"] == second["questions"]
            changed = set(first["state"].splitlines()) ^ set(second["state"].splitlines())
            assert 0 < len(changed) <= 2, changed  # one line differs


def test_the_gold_follows_the_family_rule_for_every_candidate() -> None:
    for family in gen.FAMILIES:
        for first, second in gen.candidates(family):
            assert family.rule(first) != family.rule(second)
            assert sum(first[name] != second[name] for name in family.attributes) == 1


def record(kind: str, plain: list[float], rot: list[float], priors: tuple[list[float], list[float]]) -> dict:
    names = ["a", "b", "c", "d"]
    views = {"rot": dict(zip(names, rot, strict=True))}
    priors_by_view = {"plain": priors[0], "rot": priors[1]}
    probabilities = dict(zip(names, plain, strict=True))
    return {"type": kind, "probabilities": probabilities, "views": views, "content_free": priors_by_view, "gold": "a"}


def test_the_variants_are_the_servers_maths() -> None:
    plain, rot = [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]
    priors = ([0.25, 0.25, 0.1, 0.4], [0.3, 0.2, 0.2, 0.3])
    item = record("choice", plain, rot, priors)
    assert report.variant_distribution(item, "plain") == plain
    assert report.variant_distribution(item, "cc") == divide_prior(plain, priors[0])
    assert report.variant_distribution(item, "prior2") == combine_shifts([plain, rot], [0, 2], prior=True)
    calibrated = [divide_prior(plain, priors[0]), divide_prior(rot, priors[1])]
    assert report.variant_distribution(item, "cc+prior2") == combine_shifts(calibrated, [0, 2], prior=True)
    (answered,) = report.variant_records({}, [item], "cc")
    assert answered["choice"] == "c"  # d reads highest, but c has the lowest prior: 0.3 / 0.1 > 0.4 / 0.4
