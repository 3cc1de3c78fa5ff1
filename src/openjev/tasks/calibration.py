"""A task's calibration: a per-label bias and a temperature fitted by maximum likelihood on labelled readouts.

For one question with n labels (noul: yes, no; choice: its options in request order; score: its
levels), a readout is a distribution p over the labels. The calibrated distribution is

    p'_i ∝ exp((log p_i + b_i) / T),

with p floored at 1e-12 before the logarithm. Written as a = 1/T and u_i = b_i / T the logits
a·log p_i + u_i are linear in (a, u): the fit is a multinomial logistic regression with one shared
slope and n intercepts, and its penalised negative log-likelihood

    L(a, u) = Σ_m [logsumexp_k(a·l_mk + u_k) - (a·l_m,y_m + u_y_m)] + (λ/2)·Σ_k u_k² + (λ/2)·(a - 1)²

(l_mk = log p_mk, y_m the gold label of example m) is strictly convex. `fit` minimises it by Newton's
method with a backtracking line search, a kept ≥ 1/`MAX_TEMPERATURE`. The penalty (λ = 1) is a
Gaussian prior centred on the identity (a = 1, u = 0): with one example per label it keeps the fit
near the raw readout, with twenty the data outweigh it. Then T = 1/a and b = u/a.

`quality` scores distributions against gold labels: accuracy (Wilson interval), pair accuracy,
Brier and ECE (`openjev.quality`). Cross-validation and adoption are `adoption.py`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from openjev.answering.answers import PROBABILITY_FLOOR, choice_answer, noul_answer, renormalise, score_answer
from openjev.options import ConfidenceMode
from openjev.quality import metrics

MAX_TEMPERATURE = 100.0
PENALTY = 1.0
ECE_BINS = 10


@dataclass(frozen=True, slots=True)
class LabelCalibration:
    """p'_i ∝ exp((log p_i + biases_i) / temperature); the identity is zero biases and T = 1."""

    biases: tuple[float, ...]
    temperature: float

    @classmethod
    def identity(cls, labels: int) -> LabelCalibration:
        return cls((0.0,) * labels, 1.0)

    def logits(self, probabilities: Sequence[float]) -> list[float]:
        if len(probabilities) != len(self.biases):
            raise ValueError(f"{len(probabilities)} probabilities for a calibration of {len(self.biases)} labels")
        return [
            (math.log(max(p, PROBABILITY_FLOOR)) + b) / self.temperature
            for p, b in zip(probabilities, self.biases, strict=True)
        ]

    def apply(self, probabilities: Sequence[float]) -> list[float]:
        return renormalise(self.logits(probabilities))


def _loss_and_derivatives(
    theta: np.ndarray, logs: np.ndarray, onehot: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """L(a, u), its gradient and Hessian (module doc), θ = (a, u_0..u_n-1)."""
    a, u = theta[0], theta[1:]
    z = a * logs + u
    z_max = z.max(axis=1, keepdims=True)
    weights = np.exp(z - z_max)
    total = weights.sum(axis=1, keepdims=True)
    q = weights / total
    loss = float(np.sum(np.log(total[:, 0]) + z_max[:, 0] - np.sum(z * onehot, axis=1)))
    loss += PENALTY / 2 * (float(u @ u) + (a - 1) ** 2)
    residual = q - onehot
    gradient = np.concatenate([[np.sum(residual * logs) + PENALTY * (a - 1)], residual.sum(axis=0) + PENALTY * u])
    # Per example the Hessian is the covariance of the features (l_k, e_k) under q.
    q_logs = q * logs
    mean_log = q_logs.sum(axis=1)
    n = logs.shape[1]
    hessian = np.empty((n + 1, n + 1))
    hessian[0, 0] = np.sum(q_logs * logs) - mean_log @ mean_log
    hessian[0, 1:] = hessian[1:, 0] = q_logs.sum(axis=0) - mean_log @ q
    hessian[1:, 1:] = np.diag(q.sum(axis=0)) - q.T @ q
    hessian += PENALTY * np.eye(n + 1)
    return loss, gradient, hessian


def fit(distributions: Sequence[Sequence[float]], gold: Sequence[int], iterations: int = 100) -> LabelCalibration:
    """The penalised maximum-likelihood calibration of `distributions` (one per example, n labels
    each) for the gold label indices `gold` (module doc)."""
    if not distributions or len(distributions) != len(gold):
        raise ValueError("fit: one gold label per distribution, at least one")
    logs = np.log(np.maximum(np.asarray(distributions, dtype=float), PROBABILITY_FLOOR))
    onehot = np.eye(logs.shape[1])[np.asarray(gold)]
    theta = np.concatenate([[1.0], np.zeros(logs.shape[1])])
    loss, gradient, hessian = _loss_and_derivatives(theta, logs, onehot)
    for _ in range(iterations):
        step = np.linalg.solve(hessian, gradient)
        decrease = float(gradient @ step)
        if decrease < 1e-12:
            break
        scale = 1.0
        while scale > 1e-6:
            candidate = theta - scale * step
            if candidate[0] >= 1 / MAX_TEMPERATURE:
                new_loss, new_gradient, new_hessian = _loss_and_derivatives(candidate, logs, onehot)
                if new_loss <= loss - 1e-4 * scale * decrease:
                    break
            scale /= 2
        else:
            break
        theta, loss, gradient, hessian = candidate, new_loss, new_gradient, new_hessian
    a = float(theta[0])
    return LabelCalibration(tuple(float(u) / a for u in theta[1:]), 1 / a)


def quality(
    distributions: Sequence[Sequence[float]], gold: Sequence[int], groups: Sequence[str | None]
) -> dict[str, Any]:
    """Accuracy (argmax, ties to the first label) with its Wilson interval, pair accuracy (None
    without pairs), multiclass Brier, ECE over equal-mass bins of the top probability, and how many
    examples each label is the argmax of (`predicted_counts`, in label order)."""
    top = [max(range(len(d)), key=lambda i, d=d: (d[i], -i)) for d in distributions]
    width = len(distributions[0]) if distributions else 0
    correct = [t == g for t, g in zip(top, gold, strict=True)]
    labelled = [{str(i): p for i, p in enumerate(d)} for d in distributions]
    return {
        **metrics.accuracy_of(correct),
        "pairs": metrics.pair_accuracy(correct, groups),
        "brier": metrics.brier(labelled, [str(g) for g in gold]),
        "ece": metrics.ece([max(d) for d in distributions], correct, ECE_BINS),
        "predicted_counts": [top.count(label) for label in range(width)],
    }


def answer_probabilities(answer: dict[str, Any]) -> list[float]:
    """A typed answer's distribution over its labels: noul (yes, no); choice and score in label order."""
    if answer["type"] == "noul":
        return [answer["noul"], 1.0 - answer["noul"]]
    return list(answer["probabilities"].values())


def calibrated_answer(answer: dict[str, Any], calibration: LabelCalibration, mode: ConfidenceMode) -> dict[str, Any]:
    """The answer rebuilt from its calibrated distribution: the choice, score, P(yes) and confidence follow."""
    return rebuilt_answer(answer, calibration.logits(answer_probabilities(answer)), mode)


def rebuilt_answer(answer: dict[str, Any], logits: Sequence[float], mode: ConfidenceMode) -> dict[str, Any]:
    """The answer rebuilt from logits over its labels (a calibration's, a head's log-probabilities)."""
    logits = list(logits)
    if answer["type"] == "noul":
        return noul_answer(logits, 1.0)
    if answer["type"] == "choice":
        return choice_answer(list(answer["probabilities"]), logits, 1.0, mode)
    return score_answer(list(answer["legend"].values()), logits, 1.0, mode)
