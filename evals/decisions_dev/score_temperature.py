"""The score readout under calibration and temperature: exact level and error in levels of the served score.

Usage: uv run evals/decisions_dev/score_temperature.py RUN_DIR [RUN_DIR ...]

Reads the score lines of raw-readout runs (jev-dev or decisions-dev: `probabilities`, `views.rev`,
`content_free.plain`/`.rev`, `gold` the level index) and prints, for the plain readout, contextual
calibration (`cc`), the reversed rubric (`rev`) and both, at temperatures 1, 0.5 and 0.25 (p^(1/T),
renormalised, as OPENJEV_SCORE_TEMPERATURE applies it): the share of questions whose served score
Σ i·pᵢ rounds to the gold level (95% Wilson interval; paired bootstrap against `cc` at T = 1, the
default before), the share whose most likely level is gold, the mean absolute error of the score in
levels, the NLL of the gold level, and the ECE of the top probability. `ccn`: calibrated over the
family's neutral state instead of `N/A` (decisions-dev runs that read it).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in {None, ""}:  # run as a script: make the `evals` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evals.harness import runs
from openjev.answering.answers import argmax_first, sharpen
from openjev.answering.debias import combine_log_space, divide_prior
from openjev.quality import metrics

READOUTS = ("plain", "cc", "rev", "cc+rev", "ccn")
TEMPERATURES = (1.0, 0.5, 0.25)


def levels(record: dict[str, Any], readout: str) -> list[float]:
    forward = list(record["probabilities"].values())
    backward = list(record["views"]["rev"].values())
    if readout.startswith("cc"):
        priors = record["content_free_neutral" if readout.startswith("ccn") else "content_free"]
        forward = divide_prior(forward, priors["plain"])
        backward = divide_prior(backward, priors["rev"])
    return combine_log_space([forward, backward]) if readout.endswith("rev") else forward


def row(records: Sequence[dict[str, Any]], readout: str, temperature: float) -> dict[str, Any]:
    served = [sharpen(levels(record, readout), temperature) for record in records]
    gold = [int(record["gold"]) for record in records]
    scores = [math.fsum(i * p for i, p in enumerate(dist)) for dist in served]
    exact = [round(score) == level for score, level in zip(scores, gold, strict=True)]
    top = [argmax_first(dist) == level for dist, level in zip(served, gold, strict=True)]
    n = len(records)
    return {
        "exact": exact,
        "ci95": metrics.wilson_interval(sum(exact), n),
        "argmax": sum(top) / n,
        "mae": math.fsum(abs(s - g) for s, g in zip(scores, gold, strict=True)) / n,
        "nll": metrics.nll([dist[level] for dist, level in zip(served, gold, strict=True)]),
        "ece": metrics.ece([max(dist) for dist in served], top),
    }


def main(directories: Sequence[str]) -> None:
    records = [
        r
        for d in directories
        for r in runs.read_results(Path(d))
        if r.get("type") == "score" and "rev" in r.get("views", {})
    ]
    readouts = READOUTS if all(r.get("content_free_neutral") for r in records) else READOUTS[:-1]
    baseline = row(records, "cc", 1.0)["exact"]
    print(f"n = {len(records)} score questions from {', '.join(directories)}")
    print(
        "| readout | T | served score rounds to gold [95%] | vs cc at T=1 [95%] | argmax | MAE (levels) | NLL | ECE |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for readout in readouts:
        for temperature in TEMPERATURES:
            figures = row(records, readout, temperature)
            paired = metrics.paired_bootstrap(baseline, figures["exact"])
            low, high = figures["ci95"]
            print(
                f"| {readout} | {temperature} | {sum(figures['exact']) / len(records):.1%} [{low:.1%}, {high:.1%}] | "
                f"{paired.difference * 100:+.1f} [{paired.ci95[0] * 100:+.1f}, {paired.ci95[1] * 100:+.1f}] | "
                f"{figures['argmax']:.1%} | {figures['mae']:.3f} | {figures['nll']:.3f} | {figures['ece']:.3f} |"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
