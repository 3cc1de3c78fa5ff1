"""The head as a candidate of a task's adoption (`adoption.py`): how it answers held-out examples, and
the rule that no candidate answering one label for everything is ever chosen or adopted.

The head (`head.fit_head`) reads the hidden state of the plain readout beside that readout's label
log-probabilities. Fitted on a training part of the examples, its strength is chosen on folds cut from
that part alone (`inner`), never from the examples it then answers; with fewer than two such folds (a
label with one example) it cannot be fitted and answers as the plain readout does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from openjev.tasks.head import RidgeHead, fit_head


def one_label(answers: Sequence[int], gold: Sequence[int]) -> bool:
    """Whether every example gets the same label although the gold has several."""
    return len(set(answers)) == 1 and len(set(gold)) > 1


def logprobs(plain: np.ndarray) -> np.ndarray:
    """The plain readouts' label log-probabilities, floored as the answers' are."""
    return np.log(np.maximum(plain, 1e-12))


def fitted(
    plain: np.ndarray, hidden: np.ndarray, gold: Sequence[int], train: Sequence[int], inner: Sequence[Sequence[int]]
) -> RidgeHead | None:
    """The head of the `train` examples, its strength chosen on `inner` (folds of example indices, all in
    `train`); None with fewer than two folds (module doc)."""
    if len(inner) < 2:
        return None
    local = {index: position for position, index in enumerate(train)}
    folds = [[local[index] for index in fold] for fold in inner]
    train_gold = [gold[index] for index in train]
    return fit_head(hidden[list(train)], logprobs(plain[list(train)]), train_gold, plain.shape[1], folds)


def answered(
    plain: np.ndarray,
    hidden: np.ndarray,
    gold: Sequence[int],
    train: Sequence[int],
    test: Sequence[int],
    inner: Sequence[Sequence[int]],
) -> list[list[float]]:
    """The distributions the head fitted on `train` (strength chosen on `inner`) gives `test`: `plain`
    (n x K) the plain readouts, `hidden` (n x d) their hidden states."""
    head = fitted(plain, hidden, gold, train, inner)
    if head is None:
        return [plain[index].tolist() for index in test]
    scores = logprobs(plain)
    return [head.probabilities(hidden[index], scores[index]) for index in test]
