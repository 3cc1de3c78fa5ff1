"""Report of a `decisions-dev` run: every readout variant, per question type, with intervals.

Contract: from the raw readouts of a run (asking.py), each variant is computed offline with the
server's own maths (`openjev.answering.answers`, `openjev.answering.debias`), so each is exactly what
a server with those settings answers:

| variant | choice | noul | score | readouts per question |
|---|---|---|---|---|
| `plain` | one readout | one | one | 1 |
| `cc` | divided by its content-free readout | same | same | 1 (+1 cached per question text) |
| `avg2` | 2 rotations (0, n // 2) averaged | - | reversed rubric, log-space mean | 2 |
| `prior2` | 2 rotations, letter prior divided out | - | as avg2 | 2 |
| `cc+avg2`, `cc+prior2` | each rotation calibrated, combined | cc | each view calibrated, combined | 2 (+2 cached) |

Figures (report.json, report.md) per type and variant: accuracy with its 95% Wilson interval, the
paired difference from `plain` (95% paired bootstrap, src/openjev/quality/metrics.py), pair accuracy
(both halves of a contrastive pair right), ECE (10 equal-mass bins of the top probability);
choice: position error, the worst absolute gap between the share of answers and of gold answers at
a shown position (1st option, 2nd, ...; all families pooled), with both shares per position; score:
exact level by argmax and by the rounded expected level, and the mean absolute error in levels of
the expected level; noul: the predicted yes-rate. Per family: choice accuracy of every variant.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.harness import runs
from openjev.answering.answers import combine_shifts, sharpen, shift_offsets
from openjev.answering.debias import combine_log_space, divide_prior
from openjev.quality import metrics

VARIANTS = ("plain", "cc", "avg2", "prior2", "cc+avg2", "cc+prior2")
COST = {"plain": "1", "cc": "1 + 1 cached", "avg2": "2", "prior2": "2", "cc+avg2": "2 + 2 cached",
        "cc+prior2": "2 + 2 cached"}  # fmt: skip


def views_of(record: dict[str, Any], calibrate: bool) -> list[list[float]]:
    """The record's views in the question's own order (plain first), each divided by its prior if asked."""
    views = {"plain": list(record["probabilities"].values())}
    views.update({name: list(dist.values()) for name, dist in record["views"].items()})
    if calibrate:
        views = {name: divide_prior(dist, record["content_free"][name]) for name, dist in views.items()}
    return list(views.values())


def variant_distribution(record: dict[str, Any], variant: str) -> list[float]:
    """What a server under `variant` answers for the record's question, as probabilities in its own order."""
    calibrate, combine = variant.startswith("cc"), variant.split("+")[-1]
    views = views_of(record, calibrate)
    if combine in ("plain", "cc") or record["type"] == "noul":
        return views[0]
    if record["type"] == "score":
        return combine_log_space([views[0], views[1]])
    return combine_shifts(views[:2], shift_offsets(len(views[0]), 2), prior=combine == "prior2")


def variant_records(run: dict[str, Any], records: Sequence[dict[str, Any]], variant: str) -> list[dict[str, Any]]:
    """Every record as `variant` answers it (`choice`: yes/no, option key, or argmax level)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
    answered = []
    for record in records:
        values = variant_distribution(record, variant)
        names = list(record["probabilities"])
        probabilities = dict(zip(names, values, strict=True))
        if record["type"] == "noul":
            choice = "yes" if probabilities["yes"] >= 0.5 else "no"
        else:
            choice = max(names, key=probabilities.__getitem__)
        answered.append({**record, "probabilities": probabilities, "choice": choice})
    return answered


def position_error(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Shares of predicted and gold answers by shown position, and the worst absolute gap (points)."""
    predicted = Counter(list(r["probabilities"]).index(r["choice"]) for r in records)
    gold = Counter(list(r["probabilities"]).index(r["gold"]) for r in records)
    n = len(records)
    positions = sorted(set(predicted) | set(gold))
    shares = {str(p + 1): {"predicted": predicted[p] / n, "gold": gold[p] / n} for p in positions}
    worst = max(abs(row["predicted"] - row["gold"]) for row in shares.values())
    return {"worst_gap": worst, "shares": shares}


def pair_accuracy(records: Sequence[dict[str, Any]]) -> float | None:
    """The share of contrastive pairs (one question over a pair's two states) whose both halves are right."""
    groups = [f"{record['pair']}/{record['id'].rsplit('/', 1)[1]}" for record in records]
    found = metrics.pair_accuracy([record["choice"] == record["gold"] for record in records], groups)
    return found["pair_accuracy"] if found else None


def expected_level(probabilities: Sequence[float], temperature: float = 1.0) -> float:
    return sum(i * p for i, p in enumerate(sharpen(probabilities, temperature)))


def score_figures(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Exact level by argmax and by the rounded expected level (as served at T = 1 and at
    OPENJEV_SCORE_TEMPERATURE = 0.5), and mean absolute errors in levels."""
    expected = [expected_level(list(r["probabilities"].values())) for r in records]
    sharpened = [expected_level(list(r["probabilities"].values()), 0.5) for r in records]
    gold = [int(r["gold"]) for r in records]
    n = len(records)
    return {
        "exact_argmax": sum(int(r["choice"]) == g for r, g in zip(records, gold, strict=True)) / n,
        "exact_rounded_expected": sum(round(e) == g for e, g in zip(expected, gold, strict=True)) / n,
        "exact_rounded_expected_t05": sum(round(e) == g for e, g in zip(sharpened, gold, strict=True)) / n,
        "mae_expected_t05": sum(abs(e - g) for e, g in zip(sharpened, gold, strict=True)) / n,
        "mae_expected": sum(abs(e - g) for e, g in zip(expected, gold, strict=True)) / n,
        "mae_argmax": sum(abs(int(r["choice"]) - g) for r, g in zip(records, gold, strict=True)) / n,
    }


def type_figures(records: Sequence[dict[str, Any]], plain: Sequence[dict[str, Any]]) -> dict[str, Any]:
    correct = [r["choice"] == r["gold"] for r in records]
    n, right = len(records), sum(correct)
    confidences = [max(r["probabilities"].values()) for r in records]
    paired = metrics.paired_bootstrap([r["choice"] == r["gold"] for r in plain], correct)
    row: dict[str, Any] = {
        "n": n,
        "accuracy": right / n,
        "ci95": metrics.wilson_interval(right, n),
        "vs_plain": {"difference": paired.difference, "ci95": paired.ci95},
        "pair_accuracy": pair_accuracy(records),
        "ece": metrics.ece(confidences, correct),
    }
    kind = records[0]["type"]
    if kind == "choice":
        row["position"] = position_error(records)
    elif kind == "score":
        row["score"] = score_figures(records)
    else:
        row["yes_rate"] = sum(r["choice"] == "yes" for r in records) / n
    return row


def build_report(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    by_variant = {variant: variant_records({}, records, variant) for variant in VARIANTS}
    right = sum(r["choice"] == r["gold"] for r in by_variant["plain"])
    report: dict[str, Any] = {"suite": "decisions-dev", "n": len(records), "accuracy": right / max(len(records), 1),
                              "cost": COST, "by_type": {}}  # fmt: skip
    for kind in ("choice", "noul", "score"):
        plain = [r for r in by_variant["plain"] if r["type"] == kind]
        if plain:
            report["by_type"][kind] = {
                variant: type_figures([r for r in rows if r["type"] == kind], plain)
                for variant, rows in by_variant.items()
            }
    families = sorted({r["family"] for r in records if r["type"] == "choice"})
    report["choice_by_family"] = {
        family: {
            variant: sum(r["choice"] == r["gold"] for r in chosen) / len(chosen)
            for variant, rows in by_variant.items()
            if (chosen := [r for r in rows if r["type"] == "choice" and r["family"] == family])
        }
        for family in families
    }
    return report


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# decisions-dev: {report['n']} questions", ""]
    for kind, rows in report["by_type"].items():
        head = "| variant | readouts | n | accuracy [95%] | vs plain [95%] | pairs | ECE | extra |"
        note = [
            "For scores, `avg2`/`prior2` read the rubric also reversed (log-space mean); accuracy is the argmax.",
            "",
        ]
        lines += [f"## {kind}", "", *(note if kind == "score" else []), head, "|---|---|---|---|---|---|---|---|"]
        for variant, row in rows.items():
            low, high = row["ci95"]
            d_low, d_high = row["vs_plain"]["ci95"]
            extra = ""
            if "position" in row:
                extra = f"worst position gap {row['position']['worst_gap'] * 100:.1f} pts"
            elif "score" in row:
                s = row["score"]
                extra = (
                    f"exact(EV) {s['exact_rounded_expected']:.1%}, MAE(EV) {s['mae_expected']:.2f}; at T=0.5 "
                    f"exact(EV) {s['exact_rounded_expected_t05']:.1%}, MAE {s['mae_expected_t05']:.2f}"
                )
            else:
                extra = f"yes-rate {row['yes_rate']:.1%}"
            pairs = "-" if row["pair_accuracy"] is None else f"{row['pair_accuracy']:.1%}"
            lines.append(
                f"| {variant} | {COST[variant]} | {row['n']} | {row['accuracy']:.1%} [{low:.1%}, {high:.1%}] | "
                f"{row['vs_plain']['difference'] * 100:+.1f} [{d_low * 100:+.1f}, {d_high * 100:+.1f}] | {pairs} | "
                f"{row['ece']:.3f} | {extra} |"
            )
        lines.append("")
    lines += ["## choice accuracy by family", "", "| family | " + " | ".join(VARIANTS) + " |",
              "|---|" + "---|" * len(VARIANTS)]  # fmt: skip
    for family, row in report["choice_by_family"].items():
        lines.append(f"| {family} | " + " | ".join(f"{row[v]:.0%}" for v in VARIANTS) + " |")
    return "\n".join(lines) + "\n"


def write_report(directory: Path) -> dict[str, Any]:
    _, records, _ = runs.read_run(directory)
    report = build_report(records)
    runs.write_json(directory / "report.json", report)
    (directory / "report.md").write_text(markdown(report))
    return report
