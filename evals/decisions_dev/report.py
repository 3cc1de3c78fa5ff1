"""Report of a `decisions-dev` run: every sound readout variant (variants.py), per question type and split,
with the pre-registered figures and their intervals.

Contract: from the raw readouts of a run (asking.py) each variant is computed offline (variants.py), so
each is what a server combining its readouts that way answers. Figures (report.json, report.md), per
question type, per split (`all`, `dev`, `confirm`) and variant:

- accuracy with its 95% Wilson interval, and the paired difference from `plain` (95% paired bootstrap,
  src/openjev/quality/metrics.py);
- pair accuracy (both halves of a contrastive pair right; complete pairs only), its paired difference
  from `plain` over pairs, and the share of pairs answered the same for both halves (the answer did not
  move with the detail that flips the gold);
- choice: recall of the permissive / no-action option (the items whose gold it is, 95% Wilson), the
  share of answers that choose it, and the worst position gap: the largest absolute difference, over
  the shown positions of the first readout (1st option, 2nd, ...), between the share of answers and the
  share of gold answers there;
- score: exact level by argmax, and the served score Σ i·pᵢ (the expected level) rounded, at T = 1 and at
  T = 0.5 (p^(1/T) renormalised, as OPENJEV_SCORE_TEMPERATURE applies it); the MAE in levels;
- ECE (10 equal-mass bins of the top probability) and readouts per question (mean);
- flips under reversal (`reversal_flips`), per type and split, wherever reversed-order readouts exist
  (a score's reversed rubric here; a position run's choice: position_report.py, which also writes
  that run's report).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.decisions_dev.tables import markdown
from evals.decisions_dev.variants import VARIANTS, normalised, variant_distribution
from evals.harness import runs
from openjev.quality import metrics

SPLITS = ("all", "dev", "confirm")


def variant_records(run: dict[str, Any], records: Sequence[dict[str, Any]], variant: str) -> list[dict[str, Any]]:
    """Every record as `variant` answers it (`choice`: yes/no, option key, or argmax level; `readouts`)."""
    answered = []
    for record in records:
        values, readouts = variant_distribution(record, variant)
        names = list(record["probabilities"])
        probabilities = dict(zip(names, values, strict=True))
        if record["type"] == "noul":
            choice = "yes" if probabilities["yes"] >= 0.5 else "no"
        else:
            choice = max(names, key=probabilities.__getitem__)
        answered.append({**record, "probabilities": probabilities, "choice": choice, "readouts": readouts})
    return answered


def position_error(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Shares of predicted and gold answers by shown position, and the worst absolute gap."""
    predicted = Counter(list(r["probabilities"]).index(r["choice"]) for r in records)
    gold = Counter(list(r["probabilities"]).index(r["gold"]) for r in records)
    n = len(records)
    positions = sorted(set(predicted) | set(gold))
    shares = {str(p + 1): {"predicted": predicted[p] / n, "gold": gold[p] / n} for p in positions}
    worst = max(abs(row["predicted"] - row["gold"]) for row in shares.values())
    return {"worst_gap": worst, "shares": shares}


def pairs_of(records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Complete contrastive pairs (one question over both halves), keyed pair/question."""
    found: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        found.setdefault(f"{record['pair']}/{record['id'].rsplit('/', 1)[1]}", []).append(record)
    return {key: rows for key, rows in sorted(found.items()) if len(rows) == 2}


def pair_flags(records: Sequence[dict[str, Any]]) -> tuple[list[bool], list[bool]]:
    """Per complete pair: both halves right; both halves answered the same."""
    pairs = pairs_of(records).values()
    return [all(r["choice"] == r["gold"] for r in rows) for rows in pairs], [
        rows[0]["choice"] == rows[1]["choice"] for rows in pairs
    ]


def expected_level(probabilities: Sequence[float], temperature: float) -> float:
    sharpened = normalised([p ** (1 / temperature) for p in probabilities])
    return sum(i * p for i, p in enumerate(sharpened))


def score_figures(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    gold = [int(r["gold"]) for r in records]
    n = len(records)
    row = {}
    for name, temperature in (("t1", 1.0), ("t05", 0.5)):
        expected = [expected_level(list(r["probabilities"].values()), temperature) for r in records]
        row[f"exact_{name}"] = sum(round(e) == g for e, g in zip(expected, gold, strict=True)) / n
        row[f"mae_{name}"] = sum(abs(e - g) for e, g in zip(expected, gold, strict=True)) / n
    return row


def permissive_figures(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    gold = [r for r in records if r.get("permissive") and r["gold"] == r["permissive"]]
    offered = [r for r in records if r.get("permissive")]
    if not gold:
        return None
    right = sum(r["choice"] == r["gold"] for r in gold)
    return {
        "n": len(gold),
        "recall": right / len(gold),
        "ci95": metrics.wilson_interval(right, len(gold)),
        "chosen": sum(r["choice"] == r["permissive"] for r in offered) / len(offered),
        "gold_share": len(gold) / len(offered),
    }


def type_figures(records: Sequence[dict[str, Any]], plain: Sequence[dict[str, Any]]) -> dict[str, Any]:
    correct = [r["choice"] == r["gold"] for r in records]
    n, right = len(records), sum(correct)
    paired = metrics.paired_bootstrap([r["choice"] == r["gold"] for r in plain], correct)
    both, same = pair_flags(records)
    row: dict[str, Any] = {
        "n": n,
        "accuracy": right / n,
        "ci95": metrics.wilson_interval(right, n),
        "vs_plain": {"difference": paired.difference, "ci95": paired.ci95},
        "pairs": len(both),
        "pair_accuracy": sum(both) / len(both) if both else None,
        "same_answer": sum(same) / len(same) if same else None,
        "ece": metrics.ece([max(r["probabilities"].values()) for r in records], correct),
        "readouts": sum(r["readouts"] for r in records) / n,
    }
    if both:
        pair_paired = metrics.paired_bootstrap(pair_flags(plain)[0], both)
        row["pairs_vs_plain"] = {"difference": pair_paired.difference, "ci95": pair_paired.ci95}
    kind = records[0]["type"]
    if kind == "choice":
        row["position"] = position_error(records)
        row["permissive"] = permissive_figures(records)
    elif kind == "score":
        row["score"] = score_figures(records)
    else:
        row["yes_rate"] = sum(r["choice"] == "yes" for r in records) / n
    return row


def reversal_flips(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Flips under reversal, a standing figure wherever a reversed-order readout (`rev` view, mapped back
    to the question's order) was read: per type and split, the share of questions whose plain readout's
    argmax differs from the reversed readout's."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for kind in ("choice", "score"):
        read = [r for r in records if r["type"] == kind and "rev" in r.get("views", {})]
        for split in SPLITS:
            rows = [r for r in read if in_split(r, split)]
            if rows:
                flipped = sum(argmax_key(r["probabilities"]) != argmax_key(r["views"]["rev"]) for r in rows)
                found.setdefault(kind, {})[split] = {"n": len(rows), "share": flipped / len(rows)}
    return found


def argmax_key(distribution: dict[str, float]) -> str:
    return max(distribution, key=distribution.__getitem__)


def in_split(record: dict[str, Any], split: str) -> bool:
    return split == "all" or record.get("split", "dev") == split


def build_report(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    neutral = all(r.get("content_free_neutral") for r in records if r["type"] != "noul")
    usable = [variant for variant in VARIANTS if neutral or not variant.startswith("ccn")]
    by_variant = {variant: variant_records({}, records, variant) for variant in usable}
    right = sum(r["choice"] == r["gold"] for r in by_variant["plain"])
    report: dict[str, Any] = {"suite": "decisions-dev", "n": len(records), "states": len({r["state"] for r in records}),
                              "accuracy": right / max(len(records), 1), "by_type": {}}  # fmt: skip
    for kind in ("choice", "noul", "score"):
        report["by_type"][kind] = {}
        for split in SPLITS:
            plain = [r for r in by_variant["plain"] if r["type"] == kind and in_split(r, split)]
            if not plain:
                continue
            report["by_type"][kind][split] = {
                variant: type_figures([r for r in rows if r["type"] == kind and in_split(r, split)], plain)
                for variant, rows in by_variant.items()
                if kind != "noul" or variant == "plain"
            }
    report["choice_by_family"] = {
        family: {
            variant: sum(r["choice"] == r["gold"] for r in chosen) / len(chosen)
            for variant, rows in by_variant.items()
            if (chosen := [r for r in rows if r["type"] == "choice" and r["family"] == family])
        }
        for family in sorted({r["family"] for r in records if r["type"] == "choice"})
    }
    report["flips_under_reversal"] = reversal_flips(records)
    return report


def write_report(directory: Path) -> dict[str, Any]:
    _, records, _ = runs.read_run(directory)
    return write_suite_report(directory, records)


def write_suite_report(directory: Path, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    report = build_report(records)
    runs.write_json(directory / "report.json", report)
    (directory / "report.md").write_text(markdown(report))
    return report
