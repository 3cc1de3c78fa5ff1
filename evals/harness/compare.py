"""Paired comparison of two runs of one suite: accuracy(B) - accuracy(A) with a bootstrap 95% interval.

Usage: uv run evals/compare.py [--type noul|choice|score] [--common] [--across-settings] RUN_A[@VARIANT] RUN_B[@VARIANT]

Two `openjev eval` output folders (report.json and answers.jsonl, no run.json) are compared as
`openjev eval compare A B` compares them (src/openjev/batch/compare.py).

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

Runs made under other answer settings of the server (run.json `answer_settings`, runs.py) measure
other servers: they are refused with the settings that differ, unless `--across-settings` is given
(to measure a setting: letters against digits, say), and then the differing settings are printed
first. The thinking tier's settings count only where a run asked a `--model`; a run whose server did
not say its settings (None, or a run from before they were recorded) is not checked.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.harness.runs import ANSWER_SETTINGS, read_meta
from evals.harness.variants import read_scored
from openjev.batch.compare import compare_runs, is_eval_run
from openjev.batch.compare_text import comparison_text
from openjev.quality import metrics

DRAWS = 10_000
SEED = 0


class Incomparable(ValueError):
    """The two runs did not ask the same items the same way."""


def settings_difference(meta_a: dict[str, Any], meta_b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The answer settings in which two runs differ, as (A's, B's); empty where either server did not say them."""
    settings_a, settings_b = meta_a.get(ANSWER_SETTINGS), meta_b.get(ANSWER_SETTINGS)
    if not isinstance(settings_a, dict) or not isinstance(settings_b, dict):
        return {}
    thinking = meta_a.get("model") is not None or meta_b.get("model") is not None
    return {
        key: (settings_a.get(key), settings_b.get(key))
        for key in sorted(set(settings_a) | set(settings_b))
        if settings_a.get(key) != settings_b.get(key) and (thinking or not key.startswith("think_"))
    }


def said(difference: dict[str, tuple[Any, Any]]) -> str:
    return ", ".join(f"{key} {a!r} and {b!r}" for key, (a, b) in difference.items())


def compare(
    run_a: str | Path,
    run_b: str | Path,
    question_type: str | None = None,
    common: bool = False,
    across_settings: bool = False,
) -> metrics.PairedComparison:
    meta_a, answered_a = read_scored(run_a, question_type)
    meta_b, answered_b = read_scored(run_b, question_type)
    # A jev-dev run limited to some types (--types) pairs with a full run on those types.
    keys = ("suite", "dataset_sha256") if question_type else ("suite", "protocol", "dataset_sha256")
    for key in keys:
        if meta_a[key] != meta_b[key]:
            raise Incomparable(f"the runs differ in {key}: {meta_a[key]!r} and {meta_b[key]!r}")
    difference = settings_difference(meta_a, meta_b)
    if difference and not across_settings:
        raise Incomparable(
            f"the runs were made under other answer settings: {said(difference)}; "
            "pass --across-settings to compare them anyway"
        )
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


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Paired comparison of two runs of one suite.")
    parser.add_argument("--type", choices=("noul", "choice", "score"), help="jev-dev: compare one question type")
    parser.add_argument("--common", action="store_true", help="pair only the items both runs answered")
    parser.add_argument(
        "--across-settings", action="store_true", help="compare runs made under other answer settings of the server"
    )
    parser.add_argument("run_a", help="DIR or DIR@VARIANT")
    parser.add_argument("run_b", help="DIR or DIR@VARIANT")
    return parser.parse_args(argv)


def eval_outputs(args: argparse.Namespace) -> bool:
    """Whether both directories are `openjev eval` outputs (no run.json), compared as `openjev eval compare` does."""
    directories = [Path(spec) for spec in (args.run_a, args.run_b)]
    return all(is_eval_run(directory) and not (directory / "run.json").exists() for directory in directories)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if eval_outputs(args):
            print(comparison_text(compare_runs(Path(args.run_a), Path(args.run_b))), end="")
            return 0
        result = compare(args.run_a, args.run_b, args.type, args.common, args.across_settings)
    except (Incomparable, ValueError) as error:
        print(f"refused: {error}", file=sys.stderr)
        return 2
    except FileNotFoundError as error:
        print(f"refused: neither a run of this harness nor an `openjev eval` output: {error}", file=sys.stderr)
        return 2
    difference = settings_difference(read_meta(args.run_a), read_meta(args.run_b))
    if difference:
        print(f"answer settings differ: {said(difference)}")
    low, high = result.ci95
    print(f"n = {result.n} paired items")
    print(f"A {args.run_a}: {result.accuracy_a:.1%}")
    print(f"B {args.run_b}: {result.accuracy_b:.1%}")
    print(
        f"B - A: {result.difference * 100:+.1f} points (95% CI {low * 100:+.1f} to {high * 100:+.1f}; paired bootstrap)"
    )
    print(
        f"both right {result.both_right}, only A right {result.only_a_right}, "
        f"only B right {result.only_b_right}, both wrong {result.both_wrong}"
    )
    return 0
