"""Fit calibration temperatures on dev runs and write the file `openjev serve` loads.

Usage: uv run evals/calibrate.py DIR... --out FILE [--variant VARIANT] [--folds 5] [--seed 0]

Contract:
- Reads the answered items of each run directory (runs.py), scored as `--variant` (one of the
  suite's offline variants, variants.py; e.g. the MMLU family's `average`, the answers of a server
  with option shifts; default: the answers as served). Fit on the same answer cue and shift settings
  the server will use. A suite registered as not tunable (`mmlu-pro-matched`) is refused.
- Items are grouped by question type (all `choice` here) and option-count bucket
  (`openjev.calibration.BUCKETS`); each group with at least `MIN_ITEMS` items gets a temperature.
- One temperature T per group minimises the mean negative log-likelihood of the gold option under
  p_T(o) ∝ p(o)^(1/T). With beta = 1/T that NLL is
      L(beta) = mean_i [ -beta log p_i(gold_i) + log sum_o p_i(o)^beta ],
  a convex function of beta (a log-sum-exp of linear functions minus a linear one), so a golden-section
  search over beta in [1/MAX_T, 1/MIN_T] finds its minimum.
- Cross-fitting: items are dealt into `--folds` folds (seeded shuffle); each fold is scored with the
  temperature fitted on the others, so the "after" NLL and ECE are measured on items the fit never saw.
  The file holds the temperatures fitted on all items; the report (printed, and in the file under
  `fitted`) holds the held-out before/after figures.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evals.harness import registry
from evals.harness.report import ECE_BINS
from evals.harness.runs import read_run
from evals.harness.variants import scored
from openjev.answering.answers import PROBABILITY_FLOOR, sharpen
from openjev.calibration import FORMAT, MAX_TEMPERATURE, MIN_TEMPERATURE, bucket_of, parse_calibration
from openjev.quality import metrics

MIN_ITEMS = 20
SEARCH_STEPS = 80
GOLDEN = (math.sqrt(5) - 1) / 2

#: One item for fitting: its distribution and the index of the gold option.
Example = tuple[list[float], int]


def nll_at(examples: Sequence[Example], beta: float) -> float:
    """L(beta), the mean NLL of the gold option after tempering with T = 1/beta."""
    total = 0.0
    for probabilities, gold in examples:
        logs = [math.log(max(p, PROBABILITY_FLOOR)) for p in probabilities]
        top = max(logs)
        total += -beta * (logs[gold] - top) + math.log(math.fsum(math.exp(beta * (x - top)) for x in logs))
    return total / len(examples)


def fit_temperature(examples: Sequence[Example]) -> float:
    """The T minimising the tempered NLL (golden-section search over beta = 1/T)."""
    low, high = 1 / MAX_TEMPERATURE, 1 / MIN_TEMPERATURE
    a, b = high - GOLDEN * (high - low), low + GOLDEN * (high - low)
    loss_a, loss_b = nll_at(examples, a), nll_at(examples, b)
    for _ in range(SEARCH_STEPS):
        if loss_a < loss_b:
            high, b, loss_b = b, a, loss_a
            a = high - GOLDEN * (high - low)
            loss_a = nll_at(examples, a)
        else:
            low, a, loss_a = a, b, loss_b
            b = low + GOLDEN * (high - low)
            loss_b = nll_at(examples, b)
    return 1 / ((low + high) / 2)


def examples_of(records: Sequence[dict[str, Any]]) -> dict[str, list[Example]]:
    """Each answered record as an example, grouped by `choice/BUCKET`."""
    groups: dict[str, list[Example]] = {}
    for record in records:
        letters = list(record["probabilities"])
        example = ([record["probabilities"][letter] for letter in letters], letters.index(record["gold"]))
        groups.setdefault(f"choice/{bucket_of(len(letters))}", []).append(example)
    return groups


def scores(examples: Sequence[Example], temperatures: Sequence[float]) -> dict[str, float]:
    """NLL and ECE of the examples, each tempered by its own temperature."""
    tempered = [sharpen(p, t) for (p, _), t in zip(examples, temperatures, strict=True)]
    top = [max(p) for p in tempered]
    correct = [p.index(max(p)) == gold for p, (_, gold) in zip(tempered, examples, strict=True)]
    gold = [p[g] for p, (_, g) in zip(tempered, examples, strict=True)]
    return {"nll": metrics.nll(gold), "ece": metrics.ece(top, correct, ECE_BINS)}


def cross_fit(examples: Sequence[Example], folds: int, seed: int) -> dict[str, Any]:
    """Held-out before/after figures: each fold tempered by the temperature fitted on the other folds."""
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    fold_of = {index: position % folds for position, index in enumerate(order)}
    fitted = [fit_temperature([e for i, e in enumerate(examples) if fold_of[i] != fold]) for fold in range(folds)]
    held_out = [fitted[fold_of[i]] for i in range(len(examples))]
    return {
        "n": len(examples),
        "fold_temperatures": fitted,
        "before": scores(examples, [1.0] * len(examples)),
        "after": scores(examples, held_out),
    }


def calibrate(directories: Sequence[str], variant: str | None, folds: int, seed: int) -> dict[str, Any]:
    """The calibration document: temperatures fitted on all items, plus how they were fitted."""
    records: list[dict[str, Any]] = []
    for directory in directories:
        meta, answered, _ = read_run(Path(directory))
        records += scored(meta, answered, variant)
    temperatures: dict[str, dict[str, float]] = {}
    report: dict[str, Any] = {}
    for group, examples in sorted(examples_of(records).items()):
        if len(examples) < MIN_ITEMS:
            report[group] = {"n": len(examples), "skipped": f"fewer than {MIN_ITEMS} items"}
            continue
        question_type, bucket = group.split("/")
        temperatures.setdefault(question_type, {})[bucket] = round(fit_temperature(examples), 4)
        report[group] = {"temperature": temperatures[question_type][bucket], **cross_fit(examples, folds, seed)}
    return {
        "format": FORMAT,
        "temperatures": temperatures,
        "fitted": {
            "runs": list(directories),
            "variant": variant,
            "folds": folds,
            "seed": seed,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "groups": report,
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fit calibration temperatures on dev runs (cross-fitted).")
    parser.add_argument("runs", nargs="+", help="run directories written by evals/run.py (dev suites only)")
    parser.add_argument("--out", required=True, help="calibration JSON file to write")
    variants = sorted({name for spec in registry.SUITES.values() for name in spec.variants})
    parser.add_argument("--variant", choices=variants, help="answers as scored (default: as served)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.folds < 2:
        parser.error("--folds must be at least 2")
    for suite in {read_run(Path(directory))[0]["suite"] for directory in args.runs}:
        if not registry.get(suite).tunable:
            parser.error(f"never calibrate on {suite}: its figures must stay comparable")
    document = calibrate(args.runs, args.variant, args.folds, args.seed)
    parse_calibration(document, args.out)  # what is written is what `openjev serve` accepts
    Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    for group, row in document["fitted"]["groups"].items():
        if "skipped" in row:
            print(f"{group}: n={row['n']}, skipped ({row['skipped']})")
            continue
        before, after = row["before"], row["after"]
        print(
            f"{group}: n={row['n']}, T={row['temperature']:.3f}; held-out ({args.folds} folds) "
            f"NLL {before['nll']:.3f} -> {after['nll']:.3f}, ECE {before['ece']:.3f} -> {after['ece']:.3f}"
        )
    print(f"written to {args.out}")
    return 0
