"""Label-bias corrections of a readout: views combined by averaging, a content-free prior divided out. Pure.

A readout's distribution over a question's labels mixes what the content supports with what the model
prefers about the labels themselves (a position, a letter, the third level of a rubric). Two
corrections, each optional per question type (`OPENJEV_OPTION_SHIFTS`, `OPENJEV_SCORE_REVERSE`,
`OPENJEV_CONTEXTUAL_CALIBRATION`); neither estimates a letter prior from the views themselves (with fewer
views than options that estimate is the content of the options that visited a letter):

- Rotations (choice questions): the views' distributions, each mapped back to the options, are
  averaged (`combine_views`; `combined_views` picks the rule by question type, for the server's
  `readouts.py` and `evals/` alike): their mean (OPENJEV_ROTATION_AVERAGE=probability) or their renormalised
  geometric mean (`log`). A preference for a shown position lands on different options in different
  views and is spread over them; views that agree are returned unchanged.

- Reverse view (score questions): the rubric is also shown in reverse order; its readout r, mapped
  back to rubric order (level i is shown at position n-1-i), is combined with the forward readout f
  by a geometric mean, the log-space analogue of averaging rotations:

      p(i) ∝ exp((log f(i) + log r(i)) / 2).

  A preference for a shown position now lands on mirrored levels in the two views and cancels to
  first order; a level both views favour stays favoured.

- Contextual calibration (Zhao et al., 2021): the same question is also read over a content-free
  state (CONTENT_FREE_STATE); its distribution c is the label prior the question's wording alone
  induces. Dividing it out,

      p(i) ∝ q(i) / c(i),

  leaves what the content adds. With views, each view is divided by its own content-free readout
  before they are combined. Probabilities are floored at 1e-12 before the logarithm or the division.

- Full-cycle position prior: with every cyclic rotation read (shift s = 0..n-1, option o shown at
  position (o - s) mod n), the prior of position j is the mean probability shown there,

      c(j) = (1/n) Σ_s q_s((j + s) mod n),

  an average over every option once, so no option's content weighs on one position more than on
  another (an estimate from fewer rotations is the content of the options that visited it).
  `cycle_debiased` divides each rotation by c at its options' positions, then combines them. A model
  with no letter bias reads the same q in every rotation: c is uniform and q is served unchanged.

- Certified early stop (`settled`): after m of n rotations, with S(o) the sum of the read
  probabilities, each unread rotation adds at most 1 to any option's sum, so the leader a of S is the
  argmax of the full-cycle mean whatever the unread rotations say when S(a) - S(b) > n - m for every
  other option b. No label is needed to know it.

Every function returns distributions that sum to 1; every input is a list of probabilities in one fixed order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from openjev.answering.answers import PROBABILITY_FLOOR, renormalise
from openjev.options import RotationAverage

#: The state a content-free readout is read over: carries no content, only the question.
CONTENT_FREE_STATE = "N/A"


def log_floor(probabilities: Sequence[float]) -> list[float]:
    return [math.log(max(p, PROBABILITY_FLOOR)) for p in probabilities]


def mirrored(probabilities: Sequence[float]) -> list[float]:
    """A reversed view's distribution by shown position, mapped back to rubric order (and vice versa)."""
    return list(probabilities)[::-1]


def combine_log_space(distributions: Sequence[Sequence[float]]) -> list[float]:
    """The renormalised geometric mean of distributions over the same labels in the same order."""
    logs = [log_floor(dist) for dist in distributions]
    return renormalise([math.fsum(column) / len(logs) for column in zip(*logs, strict=True)])


def combine_views(distributions: Sequence[Sequence[float]], average: RotationAverage) -> list[float]:
    """Views of one question, in the same label order, averaged as `average` says (module doc)."""
    if len(distributions) == 1:
        return list(distributions[0])
    if average is RotationAverage.log:
        return combine_log_space(distributions)
    return [math.fsum(column) / len(distributions) for column in zip(*distributions, strict=True)]


def divide_prior(probabilities: Sequence[float], prior: Sequence[float]) -> list[float]:
    """p(i) ∝ q(i) / c(i): the content-free prior c divided out of the readout q."""
    return renormalise([q - c for q, c in zip(log_floor(probabilities), log_floor(prior), strict=True)])


def combined_views(kind: str, views: Sequence[Sequence[float]], average: RotationAverage) -> list[float]:
    """Views of one question of type `kind`, each in its own order, combined as the server combines them:
    a choice's rotations as `average` says (`combine_views`), a score's forward and reversed readouts in
    log space (`combine_log_space`)."""
    if len(views) == 1:
        return list(views[0])
    return combine_log_space(views) if kind == "score" else combine_views(views, average)


def debiased(
    kind: str,
    views: Sequence[Sequence[float]],
    priors: Sequence[Sequence[float] | None],
    average: RotationAverage = RotationAverage.probability,
) -> list[float]:
    """Each view (in rubric/option order) divided by its own prior where one is given (`divide_prior`), then
    combined as the server combines them (`combined_views`): what `evals/` scores is what the server serves."""
    corrected = [
        list(view) if prior is None else divide_prior(view, prior) for view, prior in zip(views, priors, strict=True)
    ]
    return combined_views(kind, corrected, average)


def cycle_position_prior(rotations: Sequence[Sequence[float]]) -> list[float]:
    """c(j): the mean probability shown at position j over the full cycle (module doc); `rotations[s]` is
    shift s's readout in option order, s = 0..n-1."""
    n = len(rotations)
    return [math.fsum(rotations[s][(j + s) % n] for s in range(n)) / n for j in range(n)]


def cycle_debiased(rotations: Sequence[Sequence[float]], average: RotationAverage) -> list[float]:
    """The full cycle with its position prior divided out of each rotation, then combined (module doc)."""
    prior, n = cycle_position_prior(rotations), len(rotations)
    corrected = [divide_prior(view, [prior[(o - s) % n] for o in range(n)]) for s, view in enumerate(rotations)]
    return combine_views(corrected, average)


def settled(sums: Sequence[float], unread: int) -> bool:
    """The leader of `sums` (read probabilities summed per option) stays the argmax of the full-cycle mean
    whatever the `unread` rotations say (module doc)."""
    leader = max(range(len(sums)), key=sums.__getitem__)
    return all(sums[leader] - value > unread for option, value in enumerate(sums) if option != leader)
