"""The decisions-dev suite: reproducible from its generator, sha-checked, balanced, contrastive, and its
offline variants computed without any letter prior."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from evals.decisions_dev import dataset, gen, report, variants
from evals.decisions_dev.families import Family


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


def test_splits_permissive_gold_and_neutral_states(states) -> None:
    splits = {state["family"]: state["split"] for state in states}
    confirm = {family for family, split in splits.items() if split == "confirm"}
    assert len(confirm) == 4 and len(splits) - len(confirm) == 14
    assert sum(state["split"] == "confirm" for state in states) >= 90 and len(states) >= 400
    offered = [state for state in states if state["permissive"]]
    gold = [state for state in offered if state["gold"]["decision"]["gold"] == state["permissive"]]
    assert 0.2 <= len(gold) / len(offered) <= 0.35, len(gold) / len(offered)
    for state in states:
        assert state["permissive"] is None or state["permissive"] in state["questions"]["decision"]["criteria"]
        case_lines = set(state["state"].splitlines()) - set(state["neutral"].splitlines())
        assert case_lines and not case_lines & set(state["neutral"].splitlines())
        policy = state["state"].split("\n\n")[0]
        assert state["neutral"].startswith(policy) or "\n\n" not in state["state"]


def record(kind: str, plain: list[float], rot: list[float], priors: tuple[list[float], list[float]]) -> dict:
    names = ["a", "b", "c", "d"]
    views = {"rot": dict(zip(names, rot, strict=True))}
    priors_by_view = {"plain": priors[0], "rot": priors[1]}
    probabilities = dict(zip(names, plain, strict=True))
    return {
        "id": "x/00/0/decision",
        "type": kind,
        "probabilities": probabilities,
        "views": views,
        "content_free": priors_by_view,
        "gold": "a",
    }


def test_the_variants_combine_views_without_any_letter_prior() -> None:
    plain, rot = [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]
    priors = ([0.25, 0.25, 0.1, 0.4], [0.5, 0.2, 0.2, 0.1])
    item = record("choice", plain, rot, priors)
    assert variants.variant_distribution(item, "plain") == (plain, 1)
    assert variants.variant_distribution(item, "avg2") == ([0.25, 0.25, 0.25, 0.25], 2)
    cc, readouts = variants.variant_distribution(item, "cc+plain")
    assert readouts == 1 and cc == pytest.approx([0.4 / 5.2, 0.8 / 5.2, 3 / 5.2, 1 / 5.2])
    calibrated_rot = [0.8 / 4.3, 1.5 / 4.3, 1 / 4.3, 1 / 4.3]
    both, _ = variants.variant_distribution(item, "cc+avg2")
    assert both == pytest.approx([(a + b) / 2 for a, b in zip(cc, calibrated_rot, strict=True)])
    assert variants.variant_distribution(item, "gate0.5") == ([0.25, 0.25, 0.25, 0.25], 2)  # top 0.4: unsure
    assert variants.variant_distribution(record("choice", [0.1, 0.1, 0.2, 0.6], rot, priors), "gate0.5")[1] == 1
    with pytest.raises(ValueError, match="content_free_neutral"):
        variants.variant_distribution(item, "ccn+plain")
    (answered,) = report.variant_records({}, [item], "cc+plain")
    assert answered["choice"] == "c"  # d reads highest, but c has the lowest prior: 0.3 / 0.1 > 0.4 / 0.4


def test_a_reader_without_letter_bias_keeps_its_answer_under_every_variant() -> None:
    """When every view reads the same content (the same distribution in the question's own order) and the
    content-free readouts are flat, every variant serves the content's best option."""
    content = [0.05, 0.6, 0.3, 0.05]
    item = record("choice", content, content, ([0.25] * 4, [0.25] * 4))
    item["content_free_neutral"] = item["content_free"]
    for variant in variants.VARIANTS:
        (answered,) = report.variant_records({}, [item], variant)
        assert answered["choice"] == "b", variant


def test_the_report_counts_pairs_permissive_recall_and_same_answers() -> None:
    rows = []
    for half, (gold, read) in enumerate((("a", [0.7, 0.1, 0.1, 0.1]), ("b", [0.6, 0.2, 0.1, 0.1]))):
        row = record("choice", read, read, ([0.25] * 4, [0.25] * 4))
        rows.append(
            {
                **row,
                "id": f"f/00/{half}/decision",
                "pair": "f/00",
                "state": f"f/00/{half}",
                "family": "f",
                "split": "dev",
                "permissive": "b",
                "gold": gold,
            }
        )
    figures = report.type_figures(report.variant_records({}, rows, "plain"), report.variant_records({}, rows, "plain"))
    assert figures["accuracy"] == 0.5 and figures["pair_accuracy"] == 0.0 and figures["same_answer"] == 1.0
    assert figures["permissive"]["recall"] == 0.0 and figures["permissive"]["chosen"] == 0.0
    assert figures["position"]["worst_gap"] == 0.5
