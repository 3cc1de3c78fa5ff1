"""The score readout under calibration and temperature, paired against one plain readout at T = 1.

Usage: uv run evals/decisions_dev/score_temperature.py RUN_DIR [RUN_DIR ...]

Reads the score lines of raw-readout runs (jev-dev or decisions-dev: `probabilities`, `views.rev`,
`content_free.plain`/`.rev`, `gold` the level index, `split` where the suite has one) and prints, per split
(all, then each split named), for the plain readout, contextual calibration (`cc`: each view divided by its
readout over `N/A`), the reversed rubric (`rev`) and both, at temperatures 1, 0.5 and 0.25 (p^(1/T),
renormalised, as OPENJEV_SCORE_TEMPERATURE applies it):

- the share of questions whose served score Σ i·pᵢ rounds to the gold level (95% Wilson interval);
- the share whose most likely level is gold;
- the mean absolute error of the served score in levels, and the NLL of the gold level;

each with its paired difference from the baseline, one plain readout at T = 1 (the default), and the 95%
interval of a paired bootstrap over the questions (10,000 draws, seed 0: `metrics.paired_bootstrap` for
the shares; the same resampling of per-question differences for MAE and NLL). `ccn`: calibrated over the
family's neutral state instead of `N/A` (decisions-dev runs that read it).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in {None, ""}:  # run as a script: make the `evals` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evals.harness import runs
from openjev.answering.answers import PROBABILITY_FLOOR, argmax_first, sharpen
from openjev.answering.debias import combine_log_space, divide_prior
from openjev.quality import metrics

READOUTS = ("plain", "cc", "rev", "cc+rev", "ccn")
TEMPERATURES = (1.0, 0.5, 0.25)
BASELINE = ("plain", 1.0)
DRAWS = 10_000


def levels(record: dict[str, Any], readout: str) -> list[float]:
    forward = list(record["probabilities"].values())
    backward = list(record["views"]["rev"].values())
    if readout.startswith("cc"):
        priors = record["content_free_neutral" if readout.startswith("ccn") else "content_free"]
        forward = divide_prior(forward, priors["plain"])
        backward = divide_prior(backward, priors["rev"])
    return combine_log_space([forward, backward]) if readout.endswith("rev") else forward


def per_question(records: Sequence[dict[str, Any]], readout: str, temperature: float) -> dict[str, list]:
    """Per question: served score rounds to gold, argmax is gold, absolute error, -log p(gold)."""
    served = [sharpen(levels(record, readout), temperature) for record in records]
    gold = [int(record["gold"]) for record in records]
    scores = [math.fsum(i * p for i, p in enumerate(dist)) for dist in served]
    return {
        "exact": [round(score) == level for score, level in zip(scores, gold, strict=True)],
        "argmax": [argmax_first(dist) == level for dist, level in zip(served, gold, strict=True)],
        "error": [abs(score - level) for score, level in zip(scores, gold, strict=True)],
        "nll": [-math.log(max(dist[level], PROBABILITY_FLOOR)) for dist, level in zip(served, gold, strict=True)],
    }


def paired_mean(baseline: Sequence[float], other: Sequence[float]) -> tuple[float, float, float]:
    """mean(other - baseline) and the 95% interval of a paired bootstrap over the questions."""
    differences = np.asarray(other) - np.asarray(baseline)
    draws = np.random.default_rng(0).integers(0, len(differences), (DRAWS, len(differences)))
    low, high = np.percentile(differences[draws].mean(axis=1), [2.5, 97.5])
    return float(differences.mean()), float(low), float(high)


def shift(difference: float, low: float, high: float, scale: float = 100.0, digits: int = 1) -> str:
    return f"{difference * scale:+.{digits}f} [{low * scale:+.{digits}f}, {high * scale:+.{digits}f}]"


def table(records: Sequence[dict[str, Any]], readouts: Sequence[str]) -> list[str]:
    base = per_question(records, *BASELINE)
    n = len(records)
    lines = [
        "| readout | T | score rounds to gold [95%] | Δ | argmax | Δ | MAE | Δ | NLL | Δ |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for readout in readouts:
        for temperature in TEMPERATURES:
            figures = per_question(records, readout, temperature)
            low, high = metrics.wilson_interval(sum(figures["exact"]), n)
            cells = [f"{readout} | {temperature} | {sum(figures['exact']) / n:.1%} [{low:.1%}, {high:.1%}]"]
            for name in ("exact", "argmax"):
                paired = metrics.paired_bootstrap(base[name], figures[name])
                if name == "argmax":
                    cells.append(f"{sum(figures[name]) / n:.1%}")
                cells.append(shift(paired.difference, *paired.ci95))
            for name in ("error", "nll"):
                cells.append(f"{sum(figures[name]) / n:.3f} | {shift(*paired_mean(base[name], figures[name]), 1, 3)}")
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(directories: Sequence[str]) -> None:
    records = [
        r
        for d in directories
        for r in runs.read_results(Path(d))
        if r.get("type") == "score" and "rev" in r.get("views", {})
    ]
    readouts = READOUTS if all(r.get("content_free_neutral") for r in records) else READOUTS[:-1]
    print(f"score questions from {', '.join(directories)}; Δ: paired against {BASELINE[0]} at T={BASELINE[1]}")
    for split in ("all", *sorted({r["split"] for r in records if r.get("split")})):
        chosen = [r for r in records if split == "all" or r.get("split") == split]
        print(f"\n{split}: n = {len(chosen)}\n")
        print("\n".join(table(chosen, readouts)))


if __name__ == "__main__":
    main(sys.argv[1:])
