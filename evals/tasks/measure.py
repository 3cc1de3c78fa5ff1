"""`uv run python -m evals.tasks.measure --url URL --out FILE`: what a task's calibration adds with 1, 5
and 20 labelled examples per label.

Every training item (`data.items(45, seed=1)`) and held-out item (`data.items(TEST_PAIRS, seed=2)`,
contrastive pairs) is read once with the plain question. For N in 1, 5, 20 the calibration is fitted
as `POST /v1/tasks` fits it with no worked examples (`calibration.fit` on the first N training
items of each label) and applied to the held-out readouts, exactly what a request naming that task
gets. Prints and writes (JSON) accuracy (Wilson 95%), pair accuracy, Brier, ECE, the share of each
chosen option, and each N's accuracy minus the plain readout's (paired bootstrap 95%).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import httpx

from evals.tasks import data
from openjev.quality import metrics
from openjev.tasks.calibration import fit, quality

COUNTS = (1, 5, 20)
TEST_PAIRS = 30
LABELS = list(data.QUESTION["criteria"])


def readout(http: httpx.Client, state: str) -> list[float]:
    body = {"model": "jev-latest", "state": state, "questions": {"q": data.QUESTION}}
    response = http.post("/v1/systemone", json=body)
    response.raise_for_status()
    probabilities = response.json()["answers"]["q"]["probabilities"]
    return [probabilities[label] for label in LABELS]


def top(distribution: list[float]) -> int:
    """The chosen label's index: the most probable, the first of a tie."""
    return max(range(len(LABELS)), key=lambda i: (distribution[i], -i))


def scored(distributions: list[list[float]], test: list[dict[str, Any]], plain_right: list[bool]) -> dict[str, Any]:
    gold = [LABELS.index(row["label"]) for row in test]
    row = quality(distributions, gold, [item["pair"] for item in test])
    chosen = [top(d) for d in distributions]
    row["chosen_shares"] = {label: chosen.count(index) / len(chosen) for index, label in enumerate(LABELS)}
    comparison = metrics.paired_bootstrap(plain_right, [t == g for t, g in zip(chosen, gold, strict=True)])
    row["minus_plain"] = {"difference": comparison.difference, "ci95": list(comparison.ci95)}
    return row


def measure(url: str, counts: tuple[int, ...] = COUNTS, test_pairs: int = TEST_PAIRS) -> dict[str, Any]:
    train, test = data.items(45, seed=1), data.items(test_pairs, seed=2)
    chosen_train = data.per_label(train, max(counts))
    started = time.perf_counter()
    with httpx.Client(base_url=url, timeout=900) as http:
        train_readouts = [readout(http, row["state"]) for row in chosen_train]
        test_readouts = [readout(http, row["state"]) for row in test]
    seconds = time.perf_counter() - started
    plain_right = [top(d) == LABELS.index(row["label"]) for d, row in zip(test_readouts, test, strict=True)]
    result: dict[str, Any] = {"url": url, "test_items": len(test), "readout_seconds": seconds}
    result["gold_shares"] = {label: sum(row["label"] == label for row in test) / len(test) for label in LABELS}
    result["plain"] = scored(test_readouts, test, plain_right)
    for count in counts:
        indices = [chosen_train.index(row) for row in data.per_label(chosen_train, count)]
        calibration = fit(
            [train_readouts[i] for i in indices], [LABELS.index(chosen_train[i]["label"]) for i in indices]
        )
        calibrated = [calibration.apply(d) for d in test_readouts]
        result[f"task_{count}"] = scored(calibrated, test, plain_right)
        result[f"task_{count}"]["calibration"] = {"biases": calibration.biases, "temperature": calibration.temperature}
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--counts", default=",".join(map(str, COUNTS)), help="examples per label, comma-separated")
    parser.add_argument("--test-pairs", type=int, default=TEST_PAIRS)
    args = parser.parse_args()
    counts = tuple(int(count) for count in args.counts.split(","))
    result = measure(args.url, counts, args.test_pairs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    for name in ["plain", *(f"task_{count}" for count in counts)]:
        row = result[name]
        low, high = row["accuracy_ci95"]
        pairs = row["pairs"]["pair_accuracy"] if row["pairs"] else float("nan")
        diff = row["minus_plain"]
        print(
            f"{name}: acc {row['accuracy']:.3f} [{low:.3f}, {high:.3f}] pairs {pairs:.3f} brier {row['brier']:.3f} "
            f"ece {row['ece']:.3f} vs plain {diff['difference']:+.3f} [{diff['ci95'][0]:+.3f}, {diff['ci95'][1]:+.3f}]"
        )


if __name__ == "__main__":
    main()
