"""Paired comparison of two runs of one suite: accuracy(B) - accuracy(A) with a bootstrap 95% interval.

Usage: uv run evals/compare.py [--type noul|choice|score] [--common] RUN_A[@VARIANT] RUN_B[@VARIANT]

`DIR@VARIANT` scores a run as one of its suite's offline variants (variants.py; the MMLU family's
`DIR@average` of a `--shifts K` run, jev-dev's `DIR@cc`); plain `DIR` is the answer as served. So one
run compares with itself: `compare.py runs/x runs/x@average` is the paired effect of option-order
averaging.

Contract: both directories are read as runs.py reads them. Runs are compared only when they
share the suite, protocol and dataset sha256 and answered exactly the same items (errors or a
different --limit make the item sets differ); otherwise the comparison is refused (exit 2). The
interval comes from metrics.paired_bootstrap: 10,000 draws over the 2x2 right/wrong table, seed 0,
so the same two runs always print the same figures. `--type` compares only that question type of two
`jev-dev` runs (whose other types, or --types, may differ).
`--common` pairs the items both runs answered (a short run against the first items of a longer
one); without it, different item sets are refused.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from evals.harness import metrics
from evals.harness.variants import read_scored

DRAWS = 10_000
SEED = 0


class Incomparable(ValueError):
    """The two runs did not ask the same items the same way."""


def compare(
    run_a: str | Path, run_b: str | Path, question_type: str | None = None, common: bool = False
) -> metrics.PairedComparison:
    meta_a, answered_a = read_scored(run_a, question_type)
    meta_b, answered_b = read_scored(run_b, question_type)
    # A jev-dev run limited to some types (--types) pairs with a full run on those types.
    keys = ("suite", "dataset_sha256") if question_type else ("suite", "protocol", "dataset_sha256")
    for key in keys:
        if meta_a[key] != meta_b[key]:
            raise Incomparable(f"the runs differ in {key}: {meta_a[key]!r} and {meta_b[key]!r}")
    if common:
        shared = {record["id"] for record in answered_a} & {record["id"] for record in answered_b}
        answered_a = [record for record in answered_a if record["id"] in shared]
        answered_b = [record for record in answered_b if record["id"] in shared]
    ids_a = [record["id"] for record in answered_a]
    ids_b = [record["id"] for record in answered_b]
    if ids_a != ids_b or not ids_a:
        only_a, only_b = len(set(ids_a) - set(ids_b)), len(set(ids_b) - set(ids_a))
        raise Incomparable(f"the runs answered different items: {only_a} only in A, {only_b} only in B")
    return metrics.paired_bootstrap(
        [record["choice"] == record["gold"] for record in answered_a],
        [record["choice"] == record["gold"] for record in answered_b],
        draws=DRAWS,
        seed=SEED,
    )


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    question_type = None
    if arguments[:1] == ["--type"] and len(arguments) > 1:
        question_type, arguments = arguments[1], arguments[2:]
    common = arguments[:1] == ["--common"]
    arguments = arguments[common:]
    if len(arguments) != 2:
        print("usage: uv run evals/compare.py [--type noul|choice|score] [--common] RUN_A RUN_B", file=sys.stderr)
        return 2
    try:
        result = compare(arguments[0], arguments[1], question_type, common)
    except (Incomparable, ValueError) as error:
        print(f"refused: {error}", file=sys.stderr)
        return 2
    low, high = result.ci95
    print(f"n = {result.n} paired items")
    print(f"A {arguments[0]}: {result.accuracy_a:.1%}")
    print(f"B {arguments[1]}: {result.accuracy_b:.1%}")
    print(
        f"B - A: {result.difference * 100:+.1f} points (95% CI {low * 100:+.1f} to {high * 100:+.1f}; paired bootstrap)"
    )
    print(
        f"both right {result.both_right}, only A right {result.only_a_right}, "
        f"only B right {result.only_b_right}, both wrong {result.both_wrong}"
    )
    return 0
