"""`uv run python -m evals.tasks.measure --url URL`: what a task adds with 1, 5 and 20 examples per label.

Fits one task per count on the training pairs (`data.items(45, seed=1)`, the first N of each label),
then asks every held-out item (`data.items(30, seed=2)`, 60 items in 30 contrastive pairs) the plain
question and the question naming each task, in one request. Prints accuracy (Wilson 95%), pair
accuracy, Brier, ECE and each task's accuracy minus the plain one (paired bootstrap 95%), and writes
them as JSON (`--out`).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import httpx

from evals.tasks import data
from openjev.answering.task_calibration import quality
from openjev.quality import metrics

COUNTS = (1, 5, 20)
LABELS = list(data.QUESTION["criteria"])


def fit(http: httpx.Client, count: int) -> dict[str, Any]:
    started = time.perf_counter()
    examples = data.per_label(data.items(45, seed=1), count)
    response = http.post("/v1/tasks", json={"question": data.QUESTION, "examples": examples})
    response.raise_for_status()
    return {**response.json(), "fit_seconds": time.perf_counter() - started}


def ask(http: httpx.Client, row: dict[str, Any], tasks: dict[int, str]) -> dict[str, Any]:
    questions = {"plain": data.QUESTION} | {f"t{n}": {**data.QUESTION, "x_task": tid} for n, tid in tasks.items()}
    response = http.post("/v1/systemone", json={"model": "jev-latest", "state": row["state"], "questions": questions})
    response.raise_for_status()
    return response.json()["answers"]


def summarise(answers: list[dict[str, Any]], test: list[dict[str, Any]], tasks: dict[int, str]) -> dict[str, Any]:
    gold = [LABELS.index(row["label"]) for row in test]
    groups = [row["pair"] for row in test]
    rows: dict[str, Any] = {}
    plain_right = [a["plain"]["choice"] == row["label"] for a, row in zip(answers, test, strict=True)]
    for name in ["plain", *(f"t{n}" for n in tasks)]:
        distributions = [[a[name]["probabilities"][label] for label in LABELS] for a in answers]
        rows[name] = quality(distributions, gold, groups)
        right = [a[name]["choice"] == row["label"] for a, row in zip(answers, test, strict=True)]
        shares = {label: sum(a[name]["choice"] == label for a in answers) / len(answers) for label in LABELS}
        rows[name]["chosen_shares"] = shares
        if name != "plain":
            comparison = metrics.paired_bootstrap(plain_right, right)
            rows[name]["minus_plain"] = {"difference": comparison.difference, "ci95": list(comparison.ci95)}
    rows["gold_shares"] = {label: sum(row["label"] == label for row in test) / len(test) for label in LABELS}
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    test = data.items(30, seed=2)
    with httpx.Client(base_url=args.url, timeout=3600) as http:
        fitted = {count: fit(http, count) for count in COUNTS}
        tasks = {count: task["id"] for count, task in fitted.items()}
        started = time.perf_counter()
        answers = [ask(http, row, tasks) for row in test]
        ask_seconds = time.perf_counter() - started
    result = {
        "test_items": len(test),
        "tasks": {
            str(n): {k: task[k] for k in ("id", "worked_examples_per_label", "calibration", "report", "fit_seconds")}
            for n, task in fitted.items()
        },
        "held_out": summarise(answers, test, tasks),
        "ask_seconds": ask_seconds,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    for name, row in result["held_out"].items():
        if name == "gold_shares":
            continue
        low, high = row["accuracy_ci95"]
        pairs = row["pairs"]["pair_accuracy"] if row["pairs"] else float("nan")
        diff = row.get("minus_plain")
        extra = f" {diff['difference']:+.3f} [{diff['ci95'][0]:+.3f}, {diff['ci95'][1]:+.3f}]" if diff else ""
        figures = f"pairs {pairs:.3f} brier {row['brier']:.3f} ece {row['ece']:.3f}"
        print(f"{name}: acc {row['accuracy']:.3f} [{low:.3f}, {high:.3f}] {figures}{extra}")


if __name__ == "__main__":
    main()
