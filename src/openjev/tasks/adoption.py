"""What a task adopts, decided by nested cross-validation against the plain readout.

A candidate is a way of answering: w worked examples per label, calibrated or not (`Candidate`). The
plain readout is (0, uncalibrated). `choose` picks among candidates by cross-validation on the
examples it is given: the best held-out accuracy among those whose accuracy is no lower than plain's
and whose Brier is no worse, the simplest first on a tie (fewer examples, then uncalibrated).

Picking the best of several candidates on the same folds that score it flatters the pick, so
`nested` scores the *procedure* instead: for each outer fold the choice is made on the other folds
alone (inner folds cut from them), and the chosen candidate, calibrated on those folds, answers the
outer fold. The procedure's outer accuracy and Brier, set against plain's on the same outer folds
(with a paired bootstrap of the difference), decide adoption: adopted only when its accuracy is no
lower, its Brier no worse and it does not answer one label for everything; then `choose` on every
example names what the task answers with. Otherwise the task answers with the plain readout. The
reported held-out accuracy is the procedure's on the outer folds, never the best over candidates.

Folds are scikit-learn's `StratifiedGroupKFold` (labels spread evenly, a contrastive pair kept whole).
A readout at w > 0 shows only examples set apart from the ones scored here (`fitting`, step 3): no
readout of an outer or inner fold shows an example of any fold. A head's strength is chosen on
`HEAD_FOLDS` folds cut from the examples it is fitted on (each example its own unit: the choice sees
none of the examples it answers).
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.model_selection import StratifiedGroupKFold

from openjev.quality import metrics
from openjev.tasks import head_adoption
from openjev.tasks.calibration import MAX_TEMPERATURE, LabelCalibration, fit, quality

#: Per example, per w, its distribution over the labels.
Readouts = Sequence[Sequence[Sequence[float]]]
#: Examples per label below which a fit cannot be cross-validated (two folds, each holding one).
MIN_PER_LABEL = 2
#: Folds a head's strength is chosen on, cut from the examples it is fitted on.
HEAD_FOLDS = 3


@dataclass(frozen=True, slots=True, order=True)
class Candidate:
    worked: int
    calibrated: bool
    #: The head on the plain readout's hidden state (worked 0, uncalibrated).
    head: bool = False


PLAIN = Candidate(0, False)
HEAD = Candidate(0, False, True)


def unit_ids(groups: Sequence[str | None]) -> list[str]:
    """A group per example: its contrastive pair's id, or its own when it has none."""
    return [f"pair:{group}" if group is not None else f"item:{index}" for index, group in enumerate(groups)]


def cut(gold: Sequence[int], units: Sequence[str], k: int) -> list[list[int]]:
    """Example indices cut into stratified folds that keep a unit whole: k of them, fewer when there
    are fewer units or no label has k examples (one fold, nothing held out, below two)."""
    splits = min(k, len(set(units)), max(Counter(gold).values(), default=0))
    if splits < 2:
        return [list(range(len(gold)))]
    splitter = StratifiedGroupKFold(n_splits=splits)
    with warnings.catch_warnings():  # a label with fewer members than folds is fine: it is spread thin
        warnings.simplefilter("ignore", UserWarning)
        return [sorted(int(i) for i in test) for _, test in splitter.split(gold, gold, units)]


def _head_answered(readouts: Readouts, hidden: np.ndarray, gold: Sequence[int], train: Sequence[int], test):
    plain = np.asarray([each[0] for each in readouts], np.float64)
    inner = cut([gold[i] for i in train], [f"item:{i}" for i in train], HEAD_FOLDS)
    strength_folds = [[train[position] for position in fold] for fold in inner]
    return head_adoption.answered(plain, hidden, gold, train, test, strength_folds)


def _answered(
    readouts: Readouts,
    gold: Sequence[int],
    candidate: Candidate,
    train: Sequence[int],
    test: Sequence[int],
    hidden: np.ndarray | None = None,
):
    if candidate.head:
        if hidden is None:
            raise ValueError("a head candidate needs the readouts' hidden states")
        return _head_answered(readouts, hidden, gold, list(train), test)
    at_w = [readouts[i][candidate.worked] for i in test]
    if not candidate.calibrated or not train:
        return at_w
    calibration = fit([readouts[i][candidate.worked] for i in train], [gold[i] for i in train])
    return [calibration.apply(distribution) for distribution in at_w]


def cross_validated(
    readouts: Readouts,
    gold: Sequence[int],
    candidate: Candidate,
    folds: Sequence[Sequence[int]],
    hidden: np.ndarray | None = None,
) -> dict[int, list[float]]:
    """Each example's distribution as `candidate` answers it, calibrated or fitted (if it is) on the other folds."""
    members = [index for fold in folds for index in fold]
    answered: dict[int, list[float]] = {}
    for fold in folds:
        train = [index for index in members if index not in set(fold)]
        answered.update(zip(fold, _answered(readouts, gold, candidate, train, fold, hidden), strict=True))
    return answered


def _right(distributions: Sequence[Sequence[float]], gold: Sequence[int]) -> list[bool]:
    """Whether each distribution's top label (the first of a tie) is the gold one."""
    return [max(range(len(d)), key=lambda k, d=d: (d[k], -k)) == g for d, g in zip(distributions, gold, strict=True)]


def _top(distributions: Sequence[Sequence[float]]) -> list[int]:
    return [max(range(len(d)), key=lambda k, d=d: (d[k], -k)) for d in distributions]


def _scores(answered: dict[int, list[float]], gold: Sequence[int]) -> tuple[float, float, bool]:
    """Accuracy, Brier and whether one label answers every example (`head_adoption.one_label`)."""
    indices = sorted(answered)
    truth = [gold[i] for i in indices]
    right = _right([answered[i] for i in indices], truth)
    brier = metrics.brier(
        [{str(k): p for k, p in enumerate(answered[i])} for i in indices], [str(gold[i]) for i in indices]
    )
    return sum(right) / len(right), brier, head_adoption.one_label(_top([answered[i] for i in indices]), truth)


def choose(
    readouts: Readouts,
    gold: Sequence[int],
    folds: Sequence[Sequence[int]],
    candidates: Sequence[Candidate],
    hidden: np.ndarray | None = None,
) -> Candidate:
    """The candidate `folds`' cross-validation picks (module doc); plain with fewer than two folds."""
    if len(folds) < 2:
        return PLAIN
    plain_accuracy, plain_brier, _ = _scores(cross_validated(readouts, gold, PLAIN, folds), gold)
    best, best_key = PLAIN, (plain_accuracy, -plain_brier)
    for candidate in sorted(candidates):
        accuracy, brier, single = _scores(cross_validated(readouts, gold, candidate, folds, hidden), gold)
        if accuracy >= plain_accuracy and brier <= plain_brier and not single and (accuracy, -brier) > best_key:
            best, best_key = candidate, (accuracy, -brier)
    return best


def _inner_folds(outer: Sequence[Sequence[int]], held: int, gold: Sequence[int], units: Sequence[str], k: int):
    train = [index for number, fold in enumerate(outer) if number != held for index in fold]
    inner = cut([gold[i] for i in train], [units[i] for i in train], k)
    return train, [[train[position] for position in fold] for fold in inner]


def nested(
    readouts: Readouts,
    gold: Sequence[int],
    groups: Sequence[str | None],
    outer: Sequence[Sequence[int]],
    candidates: Sequence[Candidate],
    k: int,
    hidden: np.ndarray | None = None,
) -> dict[str, Any]:
    """The choice procedure scored on the outer folds against plain, and whether it is adopted (module doc)."""
    units = unit_ids(groups)
    procedure: dict[int, list[float]] = {}
    picks = []
    for held, fold in enumerate(outer):
        train, inner = _inner_folds(outer, held, gold, units, k)
        pick = choose(readouts, gold, inner, candidates, hidden)
        picks.append({"worked_examples_per_label": pick.worked, "calibrated": pick.calibrated, "head": pick.head})
        procedure.update(zip(fold, _answered(readouts, gold, pick, train, fold, hidden), strict=True))
    order = sorted(procedure)
    plain = quality([readouts[i][0] for i in order], [gold[i] for i in order], [groups[i] for i in order])
    chosen = quality([procedure[i] for i in order], [gold[i] for i in order], [groups[i] for i in order])
    difference = metrics.paired_bootstrap(
        _right([readouts[i][0] for i in order], [gold[i] for i in order]),
        _right([procedure[i] for i in order], [gold[i] for i in order]),
    )
    single = head_adoption.one_label(_top([procedure[i] for i in order]), [gold[i] for i in order])
    adopted = chosen["accuracy"] >= plain["accuracy"] and chosen["brier"] <= plain["brier"] and not single
    return {
        "compared": "plain readout vs the candidate chosen on inner folds, both scored on the outer folds",
        "outer_folds": len(outer),
        "plain": plain,
        "chosen": chosen,
        "difference": {"accuracy": difference.difference, "ci95": list(difference.ci95)},
        "chosen_per_fold": picks,
        "one_label_for_all": single,
        "adopted": adopted and len(outer) > 1,
    }


def at_cap(calibration: LabelCalibration) -> bool:
    """Whether the fit ran its temperature to the cap: the readouts carried (almost) nothing it could use."""
    return calibration.temperature >= MAX_TEMPERATURE * 0.999
