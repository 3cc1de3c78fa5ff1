"""`uv run python -m evals.tasks.measure --url URL --readouts FILE --out FILE`: what a task adds at 5, 10
and 20 labelled examples per label, held out by contrastive pair.

Every dev item (`data.items(PAIRS, seed=3)`) is read once with the plain question, each readout
appended to `--readouts` as it arrives (a run that stops resumes; without `--url` only what the file
holds is scored, complete pairs in order). The items are cut 2-fold by pair (even and odd pair
numbers). For each fold and N, the task is fitted as `POST /v1/tasks` fits it with no worked examples
(`fitting.read_and_choose`'s rule: `adoption.nested` over the plain readout and the calibration, the
calibration used only when adopted) on the first N items of each label of one half, and answers the
other half; both directions together answer every item once. Printed and written (JSON): accuracy
(Wilson 95%) and the task minus zero-shot on the same items (paired bootstrap 95%). For comparison
(`--learners`), the same with a multinomial logistic regression over the readout's log-probabilities
(scikit-learn, C=1) in place of the bias-and-temperature calibration, adopted by the same rule.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from sklearn.linear_model import LogisticRegression

from evals.tasks import data
from openjev.quality import metrics
from openjev.tasks import adoption
from openjev.tasks.calibration import fit, quality

COUNTS = (5, 10, 20)
PAIRS = 100
LABELS = list(data.QUESTION["criteria"])


def collect(url: str, path: Path, pairs: int) -> None:
    """Plain readouts of every dev item not yet in `path`, appended as they arrive."""
    done = {json.loads(line)["state"] for line in path.read_text().splitlines()} if path.exists() else set()
    with httpx.Client(base_url=url, timeout=900) as http, path.open("a") as file:
        for row in data.items(pairs, seed=3):
            if row["state"] in done:
                continue
            body = {"model": "jev-latest", "state": row["state"], "questions": {"q": data.QUESTION}}
            response = http.post("/v1/systemone", json=body)
            response.raise_for_status()
            probabilities = response.json()["answers"]["q"]["probabilities"]
            file.write(json.dumps({**row, "readout": [probabilities[label] for label in LABELS]}) + "\n")
            file.flush()


def read(path: Path) -> list[dict[str, Any]]:
    """The readouts of complete pairs, in pair order."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    pairs: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        pairs.setdefault(row["pair"], []).append(row)
    return [row for members in pairs.values() if len(members) == 2 for row in members]


def _logistic(train: list[list[float]], gold: list[int], test: list[list[float]]) -> list[list[float]]:
    model = LogisticRegression(C=1.0, max_iter=1000)
    model.fit(np.log(np.maximum(train, 1e-12)), gold)
    full = np.zeros((len(test), len(LABELS)))
    full[:, model.classes_] = model.predict_proba(np.log(np.maximum(test, 1e-12)))
    return full.tolist()


def taught(teach: list[dict[str, Any]], answer: list[dict[str, Any]], learner: str) -> tuple[list, dict]:
    """The other half as a task fitted on `teach` answers it, and the fit's nested report."""
    readouts = [[row["readout"]] for row in teach]
    gold = [LABELS.index(row["label"]) for row in teach]
    groups = [row["pair"] for row in teach]
    folds = adoption.cut(gold, adoption.unit_ids(groups), 5)
    if learner == "calibration":
        report = adoption.nested(readouts, gold, groups, folds, [adoption.Candidate(0, True)], 5)
        chosen = adoption.choose(readouts, gold, folds, [adoption.Candidate(0, True)]) if report["adopted"] else None
        if chosen is None or not chosen.calibrated:
            return [row["readout"] for row in answer], report
        calibration = fit([r[0] for r in readouts], gold)
        return [calibration.apply(row["readout"]) for row in answer], report
    held = {}
    for fold in folds:
        train = [i for i in range(len(gold)) if i not in set(fold)]
        predicted = _logistic([readouts[i][0] for i in train], [gold[i] for i in train], [readouts[i][0] for i in fold])
        held.update(zip(fold, predicted, strict=True))
    plain = quality([r[0] for r in readouts], gold, groups)
    head = quality([held[i] for i in range(len(gold))], gold, groups)
    adopted = head["accuracy"] >= plain["accuracy"] and head["brier"] <= plain["brier"]
    report = {"plain": plain, "chosen": head, "adopted": adopted}
    if not report["adopted"]:
        return [row["readout"] for row in answer], report
    return _logistic([r[0] for r in readouts], gold, [row["readout"] for row in answer]), report


def scored(rows: list[dict[str, Any]], distributions: list[list[float]]) -> tuple[dict[str, Any], list[bool]]:
    gold = [LABELS.index(row["label"]) for row in rows]
    result = quality(distributions, gold, [row["pair"] for row in rows])
    right = [max(range(len(d)), key=lambda k, d=d: (d[k], -k)) == g for d, g in zip(distributions, gold, strict=True)]
    return result, right


def measure(rows: list[dict[str, Any]], counts: tuple[int, ...], learners: tuple[str, ...]) -> dict[str, Any]:
    halves = [[r for r in rows if int(r["pair"].split("-")[1]) % 2 == side] for side in (0, 1)]
    answered = halves[1] + halves[0]
    plain, plain_right = scored(answered, [row["readout"] for row in answered])
    result: dict[str, Any] = {"items": len(answered), "pairs": len(answered) // 2, "zero_shot": plain}
    for learner in learners:
        for count in counts:
            predictions, fits = [], []
            for teach, answer in ((halves[0], halves[1]), (halves[1], halves[0])):
                chosen = data.per_label(teach, count)
                distributions, report = taught(chosen, answer, learner)
                predictions += distributions
                counted = {label: sum(row["label"] == label for row in chosen) for label in LABELS}
                fits.append({"examples_per_label": counted, "adopted": report["adopted"]})
            row, right = scored(answered, predictions)
            difference = metrics.paired_bootstrap(plain_right, right)
            row["minus_zero_shot"] = {"difference": difference.difference, "ci95": list(difference.ci95)}
            result[f"{learner}_{count}"] = {**row, "fits": fits}
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", help="a running openjev to read the dev items on; without it, score --readouts")
    parser.add_argument("--readouts", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=PAIRS)
    parser.add_argument("--counts", default=",".join(map(str, COUNTS)), help="examples per label, comma-separated")
    parser.add_argument("--learners", default="calibration,logistic")
    args = parser.parse_args()
    if args.url:
        collect(args.url, args.readouts, args.pairs)
    counts = tuple(int(count) for count in args.counts.split(","))
    result = measure(read(args.readouts), counts, tuple(args.learners.split(",")))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(f"{result['items']} items in {result['pairs']} pairs, each answered once (2-fold by pair)")
    for name, row in result.items():
        if not isinstance(row, dict) or "accuracy" not in row:
            continue
        low, high = row["accuracy_ci95"]
        diff = row.get("minus_zero_shot", {"difference": math.nan, "ci95": [math.nan, math.nan]})
        fits = " ".join(f"{f['examples_per_label']} adopted={f['adopted']}" for f in row.get("fits", []))
        print(
            f"{name}: acc {row['accuracy']:.3f} [{low:.3f}, {high:.3f}] brier {row['brier']:.3f} "
            f"vs zero-shot {diff['difference']:+.3f} [{diff['ci95'][0]:+.3f}, {diff['ci95'][1]:+.3f}] {fits}"
        )


if __name__ == "__main__":
    main()
