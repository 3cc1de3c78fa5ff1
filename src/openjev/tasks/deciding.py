"""What a fit's readouts decide, computed in a process of its own (`in_process`).

Once its readouts are in, a fit is arithmetic on them (`tasks/fitting.py`, step 4): whether the plain
readout leaves something to gain (`plain_accuracy`), then the nested cross-validation, the candidate
it adopts, each worked-example count scored once, and the calibration fitted (`decide`). For 1,000
examples of a 255-option choice that is about 15 s of pure Python (measured on the 2-core machine:
nested 11.5 s, the table 2.9 s, the calibration 0.7 s, the plain check 0.2 s), all of it holding the
GIL. On the event loop or on a thread it kept `/health/live` from answering for up to 13 s; in a
process the loop never waits for it.

One process for the whole server (`FIT_PROCESSES`), started by `spawn` on first use (never a fork of
a threaded server) and kept: fits' arithmetic takes its turn there, one computation at a time. If the
process dies the computation fails (the fit reports it) and the next starts a fresh one.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

import numpy as np

from openjev.tasks.adoption import HEAD, PLAIN, Candidate, choose, cross_validated, nested
from openjev.tasks.calibration import LabelCalibration, fit, quality
from openjev.tasks.head import RidgeHead
from openjev.tasks.head_adoption import fitted
from openjev.tasks.learning_curve import learning_curve

T = TypeVar("T")
#: Processes for fits' arithmetic, server-wide.
FIT_PROCESSES = 1
_pool: ProcessPoolExecutor | None = None

Readouts = Sequence[Sequence[Sequence[float]]]


def plain_accuracy(readouts: Readouts, gold: Sequence[int]) -> float:
    """Held-out accuracy of the plain readout (w = 0)."""
    return float(quality([r[0] for r in readouts], gold, [None] * len(gold))["accuracy"])


def head_quality(readouts: Readouts, gold: Sequence[int], groups, folds: list[list[int]], hidden) -> dict[str, Any]:
    """The head cross-validated once, as the table scores each count."""
    answered = cross_validated(readouts, gold, HEAD, folds, hidden)
    return quality([answered[i] for i in sorted(answered)], gold, groups)


def table(readouts: Readouts, gold: Sequence[int], groups, folds: list[list[int]]) -> dict[int, dict[str, Any]]:
    """Each worked-example count scored before and after calibration, cross-validated once."""
    scored: dict[int, dict[str, Any]] = {}
    order = sorted(index for fold in folds for index in fold)
    for w in range(len(readouts[0])):
        row = {}
        for name, calibrated in (("before", False), ("after", True)):
            answered = cross_validated(readouts, gold, Candidate(w, calibrated), folds)
            row[name] = quality([answered[i] for i in order], gold, groups)
        scored[w] = row
    return scored


def decide(
    readouts: Readouts, gold: Sequence[int], groups, folds: list[list[int]], k: int, hidden: np.ndarray | None = None
) -> tuple[dict[str, Any], Candidate, dict[int, dict[str, Any]], LabelCalibration, RidgeHead | None, dict]:
    """The nested report, the candidate the task answers with, the table, the calibration fitted on the
    chosen count's readouts, where the head is chosen the head fitted on every example, its strength
    chosen on `folds`, and the learning curve (`learning_curve.py`) (`tasks/fitting.py`, step 4).
    `hidden`: the plain readouts' hidden states (n x d), which make the head a candidate; None: no head."""
    candidates = [Candidate(w, calibrated) for w in range(len(readouts[0])) for calibrated in (False, True)]
    candidates += [HEAD] if hidden is not None else []
    report = nested(readouts, gold, groups, folds, candidates, k, hidden)
    chosen = choose(readouts, gold, folds, candidates, hidden) if report["adopted"] else PLAIN
    calibration = fit([r[chosen.worked] for r in readouts], gold)
    plain = np.asarray([r[0] for r in readouts], np.float64)
    head = fitted(plain, hidden, gold, range(len(gold)), folds) if chosen.head and hidden is not None else None
    if hidden is not None:
        report = {**report, "head": head_quality(readouts, gold, groups, folds, hidden)}
    curve = learning_curve(plain, hidden, gold, folds)
    return report, chosen, table(readouts, gold, groups, folds), calibration, head, curve


def _executor() -> ProcessPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ProcessPoolExecutor(max_workers=FIT_PROCESSES, mp_context=multiprocessing.get_context("spawn"))
    return _pool


async def in_process(work: Callable[..., T], *args: Any) -> T:
    """`work(*args)` in the fits' process (module doc); `work` and its arguments go by pickle."""
    global _pool
    try:
        return await asyncio.get_running_loop().run_in_executor(_executor(), work, *args)
    except BrokenProcessPool:
        _pool = None
        raise


def shut_down() -> None:
    """Stop the fits' process, if one was started (at the server's shutdown)."""
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None
