"""Plain, calibration or head: which one a task answers with, decided by nested cross-validation.

The candidates, simplest first: `plain` (the readout as it is), `calibration` (a bias per label and a
temperature on the readout, `calibration.fit`) and `head` (`head.fit_head` on the hidden state beside
the readout's log-probabilities). For each outer fold the choice is made on the other folds alone:
each candidate answers every example of the inner folds fitted on the others (the head's strength
chosen on those same inner folds, which the outer fold then judges), and the most accurate candidate
that is no less accurate than plain and does not answer one label for every example is picked (the
simplest on a tie). The pick, fitted on all the other folds, answers the outer fold.

The procedure is adopted only when, on the outer folds, it is no less accurate than plain and does not
answer one label for everything; the report carries both accuracies and the paired bootstrap interval
of their difference. Then `choose` on every example names what the task answers with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from openjev.quality import metrics
from openjev.tasks.adoption import cut, unit_ids
from openjev.tasks.calibration import fit
from openjev.tasks.head import STRENGTHS, fit_head, held_out_scores

CANDIDATES = ("plain", "calibration", "head")


def _top(distributions: np.ndarray) -> np.ndarray:
    return np.asarray(distributions).argmax(axis=1)


def one_label(answers: np.ndarray, gold: Sequence[int]) -> bool:
    """Whether every example gets the same label although the gold has several."""
    return len(set(answers.tolist())) == 1 and len(set(gold)) > 1


def _inner_answers(
    readouts: np.ndarray, hidden: np.ndarray, gold: Sequence[int], labels: int, folds: Sequence[Sequence[int]]
) -> dict[str, np.ndarray]:
    """Each candidate's top label for every example of `folds`, fitted on the other folds."""
    logprobs = np.log(np.maximum(readouts, 1e-12))
    calibrated = np.zeros(len(gold), dtype=int)
    for fold in folds:
        train = np.setdiff1d(np.arange(len(gold)), fold)
        calibration = fit(readouts[train].tolist(), [gold[i] for i in train])
        calibrated[fold] = _top(np.asarray([calibration.apply(row) for row in readouts[fold].tolist()]))
    scores = held_out_scores(hidden, logprobs, gold, labels, folds)
    best = max(range(len(STRENGTHS)), key=lambda i: (float((_top(scores[i]) == np.asarray(gold)).mean()), i))
    return {"plain": _top(readouts), "calibration": calibrated, "head": _top(scores[best])}


def choose(
    readouts: np.ndarray, hidden: np.ndarray, gold: Sequence[int], labels: int, folds: Sequence[Sequence[int]]
) -> str:
    """The candidate these folds pick (module doc); plain with fewer than two folds."""
    if len(folds) < 2:
        return "plain"
    answers = _inner_answers(readouts, hidden, gold, labels, folds)
    accuracy = {name: float((found == np.asarray(gold)).mean()) for name, found in answers.items()}
    allowed = [
        name for name in CANDIDATES if accuracy[name] >= accuracy["plain"] and not one_label(answers[name], gold)
    ]
    return max(allowed or ["plain"], key=lambda name: (accuracy[name], -CANDIDATES.index(name)))


def answer(
    name: str,
    readouts: np.ndarray,
    hidden: np.ndarray,
    gold: Sequence[int],
    labels: int,
    train: Sequence[int],
    test: Sequence[int],
    k: int,
) -> np.ndarray:
    """The distributions candidate `name`, fitted on `train` (inner folds cut from it, `k` at most), gives `test`."""
    train = list(train)
    if name == "plain":
        return readouts[test]
    if name == "calibration":
        calibration = fit(readouts[train].tolist(), [gold[i] for i in train])
        return np.asarray([calibration.apply(row) for row in readouts[test].tolist()])
    inner = cut([gold[i] for i in train], [f"item:{i}" for i in train], k)
    folds = [[train[position] for position in fold] for fold in inner]
    local = {index: position for position, index in enumerate(train)}
    logprobs = np.log(np.maximum(readouts, 1e-12))
    head = fit_head(
        hidden[train], logprobs[train], [gold[i] for i in train], labels, [[local[i] for i in fold] for fold in folds]
    )
    return np.asarray([head.probabilities(hidden[i], logprobs[i]) for i in test])


def nested(
    readouts: Sequence[Sequence[float]],
    hidden: np.ndarray,
    gold: Sequence[int],
    groups: Sequence[str | None],
    outer: Sequence[Sequence[int]],
    k: int,
) -> dict[str, Any]:
    """The choice procedure scored on the outer folds against plain, and whether it is adopted."""
    readouts, hidden = np.asarray(readouts, np.float64), np.asarray(hidden, np.float64)
    labels, units = readouts.shape[1], unit_ids(groups)
    procedure = np.zeros(len(gold), dtype=int)
    picks = []
    for held, fold in enumerate(outer):
        train = [i for number, other in enumerate(outer) if number != held for i in other]
        inner = cut([gold[i] for i in train], [units[i] for i in train], k)
        local = [[train[position] for position in one] for one in inner]
        sub = {index: position for position, index in enumerate(train)}
        inner_folds = [[sub[i] for i in one] for one in local]
        pick = choose(readouts[train], hidden[train], [gold[i] for i in train], labels, inner_folds)
        picks.append(pick)
        procedure[fold] = _top(answer(pick, readouts, hidden, gold, labels, train, fold, k))
    order = sorted(i for fold in outer for i in fold)
    truth = np.asarray(gold)[order]
    plain_right, chosen_right = _top(readouts)[order] == truth, procedure[order] == truth
    difference = metrics.paired_bootstrap(plain_right.tolist(), chosen_right.tolist())
    single = one_label(procedure[order], [gold[i] for i in order])
    return {
        "compared": "plain readout vs the candidate chosen on inner folds (plain, calibration, head), on outer folds",
        "outer_folds": len(outer),
        "plain_accuracy": float(plain_right.mean()),
        "chosen_accuracy": float(chosen_right.mean()),
        "difference": {"accuracy": difference.difference, "ci95": list(difference.ci95)},
        "chosen_per_fold": picks,
        "one_label_for_all": single,
        "adopted": len(outer) > 1 and chosen_right.mean() >= plain_right.mean() and not single,
    }
