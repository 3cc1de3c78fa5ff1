"""The decisions-dev position run: its requests show every rotation, the canonical and the reversed order;
its variants serve a reader without letter bias unchanged, remove a position bias from one that has it,
stop early only when the unread rotations cannot change the answer; flips under reversal are reported
wherever reversed readouts exist."""

from __future__ import annotations

import itertools
import math

import pytest

from evals.decisions_dev import dataset, positions, report
from evals.decisions_dev.position_report import build_position_report
from evals.decisions_dev.position_variants import POSITION_VARIANTS, adaptive, answered, cycle
from openjev.answering.debias import cycle_position_prior, settled
from openjev.prompting.option_order import canonical_keys

OPTIONS = {"keep": "Keep it.", "drop": "Drop it.", "wait": "Wait a day.", "ask": "Ask a human."}


def softmax(values: list[float]) -> list[float]:
    weights = [math.exp(v) for v in values]
    return [w / sum(weights) for w in weights]


def record(content: list[float], bias: list[float], gold: str = "keep", split: str = "dev") -> dict:
    """What a reader with `content` per option and `bias` per shown position reads in every view."""
    keys = list(OPTIONS)

    def read(view: str) -> dict[str, float]:
        shown = positions.shown_keys(keys, OPTIONS, view)
        by_position = softmax([content[keys.index(key)] + bias[j] for j, key in enumerate(shown)])
        return {key: by_position[shown.index(key)] for key in keys}

    views = {view: read(view) for view in positions.position_views(len(keys))}
    return {"id": "s/decision", "type": "choice", "gold": gold, "split": split, "probabilities": read("plain"),
            "views": views}  # fmt: skip


def test_the_request_shows_every_rotation_the_canonical_and_the_reversed_order() -> None:
    state = next(s for s in dataset.load_states() if len(s["questions"]["decision"]["criteria"]) == 4)
    asked = positions.position_request(state, "jev-latest")["questions"]
    options = state["questions"]["decision"]["criteria"]
    keys = list(options)
    assert set(asked) == {"decision", *(f"decision@{v}" for v in ("shift1", "shift2", "shift3", "canon", "rev"))}
    shown = {view: list(asked[f"decision@{view}"]["criteria"]) for view in ("shift1", "shift2", "shift3")}
    for position in range(4):  # every option in every position exactly once over the cycle
        assert {keys[position], *(shown[v][position] for v in shown)} == set(keys)
    assert list(asked["decision@canon"]["criteria"]) == canonical_keys(options)
    assert list(asked["decision@rev"]["criteria"]) == keys[::-1]
    assert all(asked[name]["criteria"][key] == options[key] for name in asked for key in keys)


def test_a_reader_without_letter_bias_is_served_its_readout_by_every_variant() -> None:
    unbiased = record([2.0, 0.5, 0.0, -1.0], [0.0, 0.0, 0.0, 0.0])
    for variant in POSITION_VARIANTS:
        served = answered(unbiased, variant)
        assert served["choice"] == "keep"
        if variant != "vote":
            assert list(served["probabilities"].values()) == pytest.approx(list(unbiased["probabilities"].values()))
    assert cycle_position_prior(cycle(unbiased)) == pytest.approx([0.25] * 4)


def test_the_full_cycle_removes_a_position_bias_that_fools_one_readout() -> None:
    biased = record([0.0, 0.6, -2.0, -2.0], [0.0, 0.0, 0.0, 3.0], gold="drop")
    assert answered(biased, "plain")["choice"] == "ask"  # shown last, favoured by the bias
    for variant in ("cycle-mean", "cycle-log", "cycle-prior", "adaptive", "vote"):
        assert answered(biased, variant)["choice"] == "drop", variant
    prior = cycle_position_prior(cycle(biased))
    assert max(range(4), key=prior.__getitem__) == 3


def test_adaptive_stopping_stops_only_when_the_answer_is_settled() -> None:
    assert settled([2.9, 0.05, 0.05], 1) and not settled([1.9, 0.9, 0.2], 1)
    sure = [[0.97, 0.02, 0.01]] * 3
    assert adaptive(sure)[1] == 2
    for rotations in itertools.product([[0.6, 0.3, 0.1], [0.1, 0.8, 0.1], [0.34, 0.33, 0.33]], repeat=3):
        mean, read = adaptive(list(rotations))
        full = [sum(column) / 3 for column in zip(*rotations, strict=True)]
        if read < 3:
            assert max(range(3), key=mean.__getitem__) == max(range(3), key=full.__getitem__)


def test_the_position_report_has_flips_under_reversal_and_readouts() -> None:
    records = [record([0.0, 0.6, -2.0, -2.0], [1.5, 0.0, 0.0, 0.0], gold="drop"), record([2, 0, 0, 0], [0] * 4)]
    figures = build_position_report(records)["by_split"]["dev"]
    assert figures["plain"]["flips_under_reversal"] == 0.5
    assert figures["canonical"]["flips_under_reversal"] == 0.0
    assert figures["cycle-mean"]["flips_under_reversal"] is None
    assert figures["cycle-mean"]["readouts"] == 4 and figures["plain"]["readouts"] == 1


def test_the_suite_report_counts_flips_under_reversal_of_score_readouts() -> None:
    def score(plain: list[float], reversed_back: list[float]) -> dict:
        as_levels = dict(enumerate(plain))
        return {"type": "score", "split": "dev", "probabilities": {str(k): v for k, v in as_levels.items()},
                "views": {"rev": {str(k): v for k, v in enumerate(reversed_back)}}}  # fmt: skip

    flips = report.reversal_flips([score([0.7, 0.2, 0.1], [0.6, 0.3, 0.1]), score([0.7, 0.2, 0.1], [0.1, 0.2, 0.7])])
    assert flips == {"score": {"all": {"n": 2, "share": 0.5}, "dev": {"n": 2, "share": 0.5}}}
