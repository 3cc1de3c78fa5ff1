"""The task calibration's maths: the likelihood fit, the folds, held-out scoring, answers rebuilt."""

from __future__ import annotations

import math

import numpy as np
import pytest

from openjev.options import ConfidenceMode
from openjev.tasks import calibration as tc


def synthetic(count: int, bias: list[float], temperature: float, seed: int = 0) -> tuple[list[list[float]], list[int]]:
    """Readouts whose true calibration is known: gold drawn from p' ∝ exp((log p + b)/T)."""
    rng = np.random.default_rng(seed)
    truth = tc.LabelCalibration(tuple(bias), temperature)
    distributions, gold = [], []
    for _ in range(count):
        logits = rng.normal(0, 1.5, len(bias))
        p = np.exp(logits - logits.max())
        p = list(p / p.sum())
        distributions.append(p)
        gold.append(int(rng.choice(len(bias), p=truth.apply(p))))
    return distributions, gold


def test_fit_recovers_a_known_bias_and_temperature_from_many_examples() -> None:
    distributions, gold = synthetic(4000, [1.0, 0.0, -1.0], 2.0)
    fitted = tc.fit(distributions, gold)
    assert fitted.temperature == pytest.approx(2.0, rel=0.15)
    # Biases are known up to a shared shift (softmax ignores it): compare differences.
    assert fitted.biases[0] - fitted.biases[2] == pytest.approx(2.0, abs=0.4)
    assert fitted.biases[1] - fitted.biases[2] == pytest.approx(1.0, abs=0.4)


def test_fit_is_a_likelihood_minimum_the_data_move_it_from_the_identity() -> None:
    distributions, gold = synthetic(300, [0.0, 1.5], 1.0, seed=3)
    fitted = tc.fit(distributions, gold)

    def penalised_nll(calibration: tc.LabelCalibration) -> float:
        a = 1 / calibration.temperature
        u = [b * a for b in calibration.biases]
        nll = -sum(math.log(calibration.apply(d)[g]) for d, g in zip(distributions, gold, strict=True))
        return nll + tc.PENALTY / 2 * (sum(x * x for x in u) + (a - 1) ** 2)

    best = penalised_nll(fitted)
    assert best < penalised_nll(tc.LabelCalibration.identity(2))
    for nudge in ((0.05, 0.0, 0.0), (0.0, 0.05, 0.0), (0.0, 0.0, 0.05), (-0.05, 0.0, 0.0), (0.0, 0.0, -0.05)):
        moved = tc.LabelCalibration(
            (fitted.biases[0] + nudge[0], fitted.biases[1] + nudge[1]), fitted.temperature + nudge[2]
        )
        assert penalised_nll(moved) >= best - 1e-9


def test_one_example_per_label_stays_near_the_identity() -> None:
    fitted = tc.fit([[0.9, 0.1], [0.8, 0.2]], [0, 1])
    assert 0.5 < fitted.temperature < 2.0
    assert all(abs(b) < 1.5 for b in fitted.biases)


def test_fit_refuses_mismatched_input() -> None:
    with pytest.raises(ValueError):
        tc.fit([], [])
    with pytest.raises(ValueError):
        tc.fit([[0.5, 0.5]], [0, 1])


def test_calibrated_answers_are_rebuilt_from_the_calibrated_distribution() -> None:
    calibration = tc.LabelCalibration((0.0, math.log(4.0)), 1.0)
    choice = {"type": "choice", "choice": "a", "probabilities": {"a": 0.6, "b": 0.4}, "confidence": 0.2}
    answer = tc.calibrated_answer(choice, calibration, ConfidenceMode.typesafe)
    # 0.6 : 0.4·4 = 0.6 : 1.6
    assert answer["choice"] == "b"
    assert answer["probabilities"]["b"] == pytest.approx(1.6 / 2.2)
    noul = tc.calibrated_answer({"type": "noul", "noul": 0.6}, calibration, ConfidenceMode.typesafe)
    assert noul["noul"] == pytest.approx(0.6 / 2.2)
    score = {
        "type": "score",
        "score": 0.4,
        "legend": {"0": "low", "1": "high"},
        "probabilities": {"0": 0.6, "1": 0.4},
        "confidence": 0.2,
    }
    rebuilt = tc.calibrated_answer(score, calibration, ConfidenceMode.typesafe)
    assert rebuilt["score"] == pytest.approx(1.6 / 2.2)
    assert rebuilt["legend"] == score["legend"]
