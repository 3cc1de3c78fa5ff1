"""`uv run python -m evals.heads.analyse RUN_DIR [--dataset clinc150|hwu64]`: the learning curve of a
heads question from the readouts `collect.py` wrote to RUN_DIR/readouts.jsonl; writes RUN_DIR/result.json.

For each N of `--counts` (default `COUNTS`) that the run holds (N train messages of every label), four
ways of answering the test messages the run holds, all from the same readouts (one per message):
- zero-shot: the readout's most probable label;
- calibration: a bias per label and a temperature (`tasks.calibration.fit`) fitted on the N x 8 train
  messages, always applied;
- head: the ridge head (`tasks.head.fit_head`, strength and temperature on 5 inner folds of the train
  messages) on the hidden state beside the readout's log-probabilities, always applied;
- task: what a task fitted on the train messages answers with, decided as a task's fit decides it
  (`tasks.deciding.decide`: plain, calibration or head by the nested cross-validation on the train
  messages alone, 5 outer folds), then that candidate fitted on every train message.
Each with its accuracy (Wilson 95%) and its difference from zero-shot on the same test messages (paired
bootstrap 95%), and the macro-F1.
"""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path
from typing import Any

import numpy as np

from evals.heads.collect import DATASETS
from openjev.quality import metrics
from openjev.tasks.adoption import cut, unit_ids
from openjev.tasks.calibration import fit
from openjev.tasks.deciding import decide
from openjev.tasks.head import fit_head

COUNTS = (5, 10, 20, 50)
FOLDS = 5


def load(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line
        row["state"] = np.frombuffer(base64.b64decode(row.pop("hidden")), dtype=np.float16).astype(np.float64)
        rows.append(row)
    return rows


def scored(predicted: list[int], gold: list[int], zero_shot: list[int], labels: list[str]) -> dict[str, Any]:
    right = [p == g for p, g in zip(predicted, gold, strict=True)]
    base = [p == g for p, g in zip(zero_shot, gold, strict=True)]
    difference = metrics.paired_bootstrap(base, right)
    report = metrics.label_report([labels[g] for g in gold], [labels[p] for p in predicted], labels)
    return {
        "accuracy": sum(right) / len(right),
        "ci95": list(metrics.wilson_interval(sum(right), len(right))),
        "minus_zero_shot": difference.difference,
        "minus_zero_shot_ci95": list(difference.ci95),
        "macro_f1": report["macro"]["f1"],
    }


def as_a_task(
    readouts: np.ndarray, hidden: np.ndarray, gold: list[int], taught: list[int], asked: list[int], folds
) -> tuple[list[int], str, dict[str, Any]]:
    """The answers to `asked` of a task fitted on `taught` as a fit decides (`deciding.decide`), what it
    answers with and the nested report."""
    plain = [[row] for row in readouts[taught].tolist()]
    report, chosen, _, calibration, head, _ = decide(
        plain, [gold[i] for i in taught], [None] * len(taught), folds, FOLDS, hidden[taught]
    )
    logprobs = np.log(np.maximum(readouts, 1e-12))
    if head is not None:
        answers = [head.probabilities(hidden[i], logprobs[i]) for i in asked]
    elif chosen.calibrated:
        answers = [calibration.apply(readouts[i].tolist()) for i in asked]
    else:
        answers = readouts[asked].tolist()
    way = "head" if head is not None else "calibration" if chosen.calibrated else "plain"
    return [int(np.argmax(answer)) for answer in answers], way, report


def point(train: list[dict[str, Any]], test: list[dict[str, Any]], labels: list[str]) -> dict[str, Any]:
    rows = train + test
    readouts = np.asarray([row["probabilities"] for row in rows])
    hidden = np.asarray([row["state"] for row in rows])
    gold = [labels.index(row["label"]) for row in rows]
    taught, asked = list(range(len(train))), list(range(len(train), len(rows)))
    folds = cut([gold[i] for i in taught], unit_ids([None] * len(train)), FOLDS)
    zero_shot = readouts[asked].argmax(axis=1).tolist()
    calibration = fit(readouts[taught].tolist(), [gold[i] for i in taught])
    calibrated = [int(np.argmax(calibration.apply(row))) for row in readouts[asked].tolist()]
    logprobs = np.log(np.maximum(readouts, 1e-12))
    head = fit_head(hidden[taught], logprobs[taught], [gold[i] for i in taught], len(labels), folds)
    headed = [int(np.argmax(head.probabilities(hidden[i], logprobs[i]))) for i in asked]
    task, chosen, nested = as_a_task(readouts, hidden, gold, taught, asked, folds)
    truth = [gold[i] for i in asked]
    return {
        "train": len(train),
        "test": len(test),
        "zero_shot": scored(zero_shot, truth, zero_shot, labels),
        "calibration": scored(calibrated, truth, zero_shot, labels),
        "head": {
            **scored(headed, truth, zero_shot, labels),
            "strength": head.strength,
            "temperature": head.temperature,
        },
        "task": {**scored(task, truth, zero_shot, labels), "answers_with": chosen, "nested": nested},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run", type=Path)
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="clinc150")
    parser.add_argument("--counts", default=",".join(map(str, COUNTS)), help="train messages per label, e.g. 5,10,40")
    args = parser.parse_args()
    run, labels = args.run, DATASETS[args.dataset].LABELS
    rows = load(run / "readouts.jsonl")
    test = [row for row in rows if row["split"] == "test"]
    complete = min(sum(1 for row in test if row["label"] == label) for label in labels)
    test = [row for row in test if row["index"] < complete]  # as many of every label
    curve = {}
    for count in [int(count) for count in args.counts.split(",")]:
        train = [row for row in rows if row["split"] == "train" and row["index"] < count]
        if len(train) < count * len(labels) or not test:
            break
        curve[str(count)] = point(train, test, labels)
        found = curve[str(count)]
        accuracy = {name: round(found[name]["accuracy"], 3) for name in ("zero_shot", "calibration", "head", "task")}
        print(count, accuracy, found["task"]["answers_with"], flush=True)
    seconds = [row["seconds"] for row in rows]
    timing = {"p50": float(np.median(seconds)), "mean": float(np.mean(seconds))}
    result = {
        "dataset": args.dataset,
        "readouts": len(rows),
        "seconds_per_request": timing,
        "test_per_label": complete,
        "curve": curve,
    }
    (run / "result.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
