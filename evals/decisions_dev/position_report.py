"""Report of a `decisions-dev --position-views` run: every position variant (position_variants.py) per split.

Contract: figures per split (`all`, `dev`, `confirm`) and variant, over the run's choice questions:
accuracy with its 95% Wilson interval; the paired difference from `plain` in points (95% paired
bootstrap, src/openjev/quality/metrics.py); the worst position error in points (report.position_error:
over the positions of the given listing, the largest gap between the share of answers and of gold
there); flips under reversal (the share of questions whose answer to the reversed listing differs from
its answer to the given one; `null` where the variant's reversed answer was not read); readouts per
question (mean); for `adaptive`, its disagreement with `cycle-mean` (0 by construction, checked here);
`accuracy`, the plain readout's over every split (the line evals/report.py prints).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.decisions_dev.position_variants import POSITION_VARIANTS, answered
from evals.decisions_dev.report import SPLITS, in_split, position_error
from evals.decisions_dev.tables import difference
from evals.harness import runs
from openjev.quality import metrics


def is_position_run(records: Sequence[dict[str, Any]]) -> bool:
    return any("canon" in record.get("views", {}) for record in records)


def flips(records: Sequence[dict[str, Any]]) -> float | None:
    if any(record["reversed"] is None for record in records):
        return None
    return sum(record["reversed"] != record["choice"] for record in records) / len(records)


def variant_figures(rows: Sequence[dict[str, Any]], plain: Sequence[dict[str, Any]]) -> dict[str, Any]:
    correct = [row["choice"] == row["gold"] for row in rows]
    paired = metrics.paired_bootstrap([row["choice"] == row["gold"] for row in plain], correct)
    return {
        "n": len(rows),
        "accuracy": sum(correct) / len(rows),
        "ci95": metrics.wilson_interval(sum(correct), len(rows)),
        "vs_plain": {"difference": paired.difference, "ci95": paired.ci95},
        "worst_position_error": position_error(rows)["worst_gap"],
        "flips_under_reversal": flips(rows),
        "readouts": sum(row["readouts"] for row in rows) / len(rows),
    }


def build_position_report(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    usable = [record for record in records if "error" not in record]
    by_variant = {variant: [answered(record, variant) for record in usable] for variant in POSITION_VARIANTS}
    report: dict[str, Any] = {"suite": "decisions-dev", "kind": "positions", "n": len(usable), "by_split": {}}
    for split in SPLITS:
        plain = [row for row in by_variant["plain"] if in_split(row, split)]
        if plain:
            report["by_split"][split] = {
                variant: variant_figures([row for row in rows if in_split(row, split)], plain)
                for variant, rows in by_variant.items()
            }
    disagree = sum(
        a["choice"] != b["choice"] for a, b in zip(by_variant["adaptive"], by_variant["cycle-mean"], strict=True)
    )
    report["adaptive_disagrees_with_cycle"] = disagree / max(len(usable), 1)
    plain = by_variant["plain"]
    report["accuracy"] = sum(row["choice"] == row["gold"] for row in plain) / max(len(plain), 1)
    return report


def position_markdown(report: dict[str, Any]) -> str:
    lines = [f"# decisions-dev position run: {report['n']} choice questions", ""]
    for split, rows in report["by_split"].items():
        lines += [
            f"## {split} (n = {next(iter(rows.values()))['n']})",
            "",
            "| variant | readouts | accuracy [95% CI] | vs plain, points [95% CI] | worst position error, points "
            "| flips under reversal |",
            "|---|---|---|---|---|---|",
        ]
        for variant, row in rows.items():
            low, high = row["ci95"]
            flip = "-" if row["flips_under_reversal"] is None else f"{row['flips_under_reversal']:.1%}"
            lines.append(
                f"| {variant} | {row['readouts']:.2f} | {row['accuracy']:.1%} [{low:.1%}, {high:.1%}] | "
                f"{difference(row['vs_plain'])} | {row['worst_position_error'] * 100:.1f} | {flip} |"
            )
        lines.append("")
    lines.append(f"adaptive answers differently from cycle-mean on {report['adaptive_disagrees_with_cycle']:.1%}.")
    return "\n".join(lines) + "\n"


def write_position_report(directory: Path, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    report = build_position_report(records)
    runs.write_json(directory / "report.json", report)
    (directory / "report.md").write_text(position_markdown(report))
    return report
