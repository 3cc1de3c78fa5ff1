"""A task's head: a closed-form ridge classifier on what the model computed at the answer position.

Features of an example (`features`): its final hidden state h (width d) and the plain readout's label
log-probabilities l (K labels), each standardized on the fitted examples (z = (v - mean) / sd, sd
floored at `MIN_SD`), the log-probability block then scaled by sqrt(d / K) so that both blocks carry the
same total variance (else K numbers would drown among d).

Ridge, one-vs-rest on centred one-hot targets Y (n x K), features X centred (n x p): the weights
W = Xᵀ (X Xᵀ + λ I)⁻¹ Y (the dual form: n examples are far fewer than p features), the scores s = x W + b
with b the mean target. With K = U diag(e) Uᵀ the eigendecomposition of X Xᵀ, every λ of `STRENGTHS`
costs one product: a(λ) = U diag(1 / (e + λ)) Uᵀ Y. Ridge rather than multinomial logistic regression:
closed form (no iterations, no convergence to check), and every strength from one decomposition, so
the inner folds that choose λ cost little more than one fit.

Strength and temperature (`fit_head`): each λ is scored by the accuracy of the scores it gives the
examples of each inner fold, fitted on the others (the largest λ among the most accurate: the simplest);
the temperature τ of the probabilities softmax(s / τ) minimises the log-loss of those held-out scores
(a grid, `TEMPERATURES`). Then W is fitted on every example with the chosen λ.

A head is stored in its task (`to_json`: its arrays as float32, little-endian, in base64, 5.3 bytes a
number; `head_fits` says whether it fits a task file): bounded (`MAX_VALUES` numbers at most, checked before any
array is built on load), every value finite, its shapes consistent, tied to the layer it reads; a
head that fails any check is refused on load with the reason (`HeadError`).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The ridge strengths tried, relative to the mean diagonal of X Xᵀ (the features' total variance), so
#: the grid fits any width.
STRENGTHS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
#: The temperatures tried for the probabilities (multiplying the scores by 1/τ).
TEMPERATURES = tuple(round(0.02 * 1.25**i, 5) for i in range(30))
#: The floor of a feature's deviation: 2^-20 (about 1e-6), which float32 keeps exactly, as a stored head does.
MIN_SD = 2.0**-20
#: The most numbers a stored head may hold: weights (d + K) x K, biases K, means and deviations 2 (d + K);
#: 8,192 wide with 32 labels is about 280,000.
MAX_VALUES = 300_000
#: Bytes a head's number takes in its task file: float32, in base64.
HEAD_NUMBER_BYTES = 4 * 4 / 3


class HeadError(ValueError):
    """A stored head that cannot be used (the reason is the message)."""


@dataclass(frozen=True)
class RidgeHead:
    """A fitted head (module doc); `layer`: which hidden state it reads ("final")."""

    mean: np.ndarray
    sd: np.ndarray
    hidden_size: int
    weights: np.ndarray
    bias: np.ndarray
    temperature: float
    strength: float
    layer: str = "final"

    def probabilities(self, hidden: np.ndarray, logprobs: Sequence[float]) -> list[float]:
        """softmax((x W + b) / τ) for one example."""
        if hidden.shape != (self.hidden_size,):
            raise HeadError(f"the head reads a hidden state of {self.hidden_size} values, not {hidden.shape}")
        scores = _features(hidden[None, :], np.asarray([logprobs], np.float64), self.mean, self.sd) @ self.weights
        return _softmax((scores[0] + self.bias) / self.temperature).tolist()

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "ridge",
            "layer": self.layer,
            "hidden_size": self.hidden_size,
            "strength": self.strength,
            "temperature": self.temperature,
            **{name: _packed(getattr(self, name)) for name in ("mean", "sd", "weights", "bias")},
        }

    @classmethod
    def from_json(cls, stored: Any, labels: int) -> RidgeHead:
        """The head a task file stores, every check made (module doc); HeadError with the reason."""
        if not isinstance(stored, dict) or stored.get("kind") != "ridge":
            raise HeadError("a head must be an object of kind 'ridge'")
        width = stored.get("hidden_size")
        if not isinstance(width, int) or isinstance(width, bool) or width < 1:
            raise HeadError("a head's hidden_size must be a positive integer")
        features = width + labels
        if features * labels + labels + 2 * features > MAX_VALUES:
            raise HeadError(f"a head of {width} x {labels} holds more than {MAX_VALUES} numbers")
        shapes = {"mean": (features,), "sd": (features,), "weights": (features, labels), "bias": (labels,)}
        arrays = {name: _array(stored.get(name), shape, name) for name, shape in shapes.items()}
        temperature, strength = stored.get("temperature"), stored.get("strength")
        for name, value in (("temperature", temperature), ("strength", strength)):
            if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value < math.inf:
                raise HeadError(f"a head's {name} must be a positive number")
        if not (arrays["sd"] >= MIN_SD).all():
            raise HeadError(f"a head's sd must be at least {MIN_SD}")
        layer = stored.get("layer")
        if layer != "final":
            raise HeadError(f"a head reads the final layer's hidden state, not {layer!r}")
        weights, bias = arrays["weights"], arrays["bias"]
        return cls(arrays["mean"], arrays["sd"], width, weights, bias, float(temperature), float(strength), layer)


def head_fits(width: int, labels: int, max_bytes: int) -> str | None:
    """Why a head of this width and these labels cannot be kept in a task file, or None (`fitting.py`, step 4)."""
    values = (width + labels) * labels + labels + 2 * (width + labels)
    if values > MAX_VALUES:
        return f"a head of {width} x {labels} holds {values} numbers, over {MAX_VALUES}"
    if values * HEAD_NUMBER_BYTES > max_bytes // 2:
        return f"a head of {values} numbers takes over half of OPENJEV_TASK_MAX_BYTES={max_bytes}"
    return None


def _packed(array: np.ndarray) -> str:
    return base64.b64encode(np.asarray(array, "<f4").tobytes()).decode("ascii")


def _array(value: Any, shape: tuple[int, ...], name: str) -> np.ndarray:
    """A stored array (module doc), its length checked before it is decoded."""
    size = 4 * math.prod(shape)
    if not isinstance(value, str) or len(value) != 4 * math.ceil(size / 3):
        raise HeadError(f"a head's {name} must be {shape} float32 numbers, little-endian, in base64")
    try:
        data = base64.b64decode(value, validate=True)
    except ValueError:
        raise HeadError(f"a head's {name} must be {shape} float32 numbers, little-endian, in base64") from None
    array = np.frombuffer(data, "<f4").astype(np.float64).reshape(shape)
    if not np.isfinite(array).all():
        raise HeadError(f"a head's {name} must be {shape} finite numbers")
    return array


def _softmax(scores: np.ndarray) -> np.ndarray:
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def standardizer(hidden: np.ndarray, logprobs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mean and scale (module doc) of the features of these examples."""
    raw = np.hstack([hidden, logprobs])
    mean, sd = raw.mean(axis=0), np.maximum(raw.std(axis=0), MIN_SD)
    block = math.sqrt(hidden.shape[1] / logprobs.shape[1])
    sd[hidden.shape[1] :] /= block  # dividing by a smaller sd scales the block up
    # Floored again: a constant log-probability (sd at the floor, divided) scales nothing, and a stored
    # head is checked for sd >= MIN_SD.
    return mean, np.maximum(sd, MIN_SD)


def _features(hidden: np.ndarray, logprobs: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    return (np.hstack([hidden, logprobs]) - mean) / sd


def _targets(gold: Sequence[int], labels: int) -> np.ndarray:
    onehot = np.zeros((len(gold), labels))
    onehot[np.arange(len(gold)), list(gold)] = 1.0
    return onehot


def _dual_solutions(train: np.ndarray, targets: np.ndarray, strengths: Sequence[float]) -> list[np.ndarray]:
    """a(λ) for each λ (relative to the mean diagonal of X Xᵀ) from one eigendecomposition; X centred."""
    gram = train @ train.T
    values, vectors = np.linalg.eigh(gram)
    scale = max(float(np.trace(gram)) / len(gram), MIN_SD)
    projected = vectors.T @ (targets - targets.mean(axis=0))
    return [vectors @ (projected / (values + strength * scale)[:, None]) for strength in strengths]


def held_out_scores(
    hidden: np.ndarray, logprobs: np.ndarray, gold: Sequence[int], labels: int, folds: Sequence[Sequence[int]]
) -> list[np.ndarray]:
    """Per strength of `STRENGTHS`, every example's scores fitted on the other folds (n x K each)."""
    scores = [np.zeros((len(gold), labels)) for _ in STRENGTHS]
    targets = _targets(gold, labels)
    for fold in folds:
        train = np.setdiff1d(np.arange(len(gold)), fold)
        mean, sd = standardizer(hidden[train], logprobs[train])
        x = _features(hidden[train], logprobs[train], mean, sd)
        centre = x.mean(axis=0)
        held = _features(hidden[fold], logprobs[fold], mean, sd) - centre
        for index, alpha in enumerate(_dual_solutions(x - centre, targets[train], STRENGTHS)):
            scores[index][fold] = held @ ((x - centre).T @ alpha) + targets[train].mean(axis=0)
    return scores


def _temperature(scores: np.ndarray, gold: Sequence[int]) -> float:
    rows = np.arange(len(gold))

    def loss(tau: float) -> float:
        return float(-np.log(np.maximum(_softmax(scores / tau)[rows, list(gold)], 1e-12)).mean())

    return min(TEMPERATURES, key=loss)


def fit_head(
    hidden: np.ndarray, logprobs: np.ndarray, gold: Sequence[int], labels: int, inner: Sequence[Sequence[int]]
) -> RidgeHead:
    """The head of these examples, its strength and temperature chosen on `inner` folds (module doc).
    `hidden`: n x d float; `logprobs`: n x K label log-probabilities; `inner`: at least two folds."""
    if len(inner) < 2:
        raise ValueError("fit_head: the strength is chosen on two inner folds at least")
    hidden, logprobs = np.asarray(hidden, np.float64), np.asarray(logprobs, np.float64)
    found = held_out_scores(hidden, logprobs, gold, labels, inner)
    accuracy = [float((scores.argmax(axis=1) == np.asarray(gold)).mean()) for scores in found]
    best = max(range(len(STRENGTHS)), key=lambda i: (accuracy[i], i))
    temperature = _temperature(found[best], gold)
    mean, sd = standardizer(hidden, logprobs)
    x = _features(hidden, logprobs, mean, sd)
    centre = x.mean(axis=0)
    targets = _targets(gold, labels)
    [alpha] = _dual_solutions(x - centre, targets, [STRENGTHS[best]])
    weights = (x - centre).T @ alpha
    bias = targets.mean(axis=0) - centre @ weights
    return RidgeHead(mean, sd, hidden.shape[1], weights, bias, temperature, STRENGTHS[best])
