"""The markdown of a `decisions-dev` report (report.py's report.json, as tables)."""

from __future__ import annotations

from typing import Any

FAMILY_COLUMNS = ("plain", "avg2", "cc+plain", "ccn+plain", "cc+avg2", "ccn+avg2", "gate0.7", "ccn+gate0.7")


def interval(row: dict[str, Any], value: str = "accuracy") -> str:
    low, high = row["ci95"]
    return f"{row[value]:.1%} [{low:.1%}, {high:.1%}]"


def difference(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    low, high = row["ci95"]
    return f"{row['difference'] * 100:+.1f} [{low * 100:+.1f}, {high * 100:+.1f}]"


def share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def choice_row(variant: str, row: dict[str, Any]) -> str:
    permissive = row["permissive"]
    recall = "-" if permissive is None else f"{interval(permissive, 'recall')} ({permissive['chosen']:.1%})"
    return (
        f"| {variant} | {row['readouts']:.2f} | {row['n']} | {interval(row)} | {difference(row['vs_plain'])} | "
        f"{share(row['pair_accuracy'])} | {difference(row.get('pairs_vs_plain'))} | {share(row['same_answer'])} | "
        f"{recall} | {row['position']['worst_gap'] * 100:.1f} | {row['ece']:.3f} |"
    )


def score_row(variant: str, row: dict[str, Any]) -> str:
    s = row["score"]
    return (
        f"| {variant} | {row['readouts']:.2f} | {row['n']} | {interval(row)} | {difference(row['vs_plain'])} | "
        f"{s['exact_t1']:.1%} / {s['exact_t05']:.1%} | {s['mae_t1']:.2f} / {s['mae_t05']:.2f} | "
        f"{share(row['pair_accuracy'])} | {row['ece']:.3f} |"
    )


CHOICE_HEAD = (
    "| variant | readouts | n | accuracy [95%] | vs plain [95%] | pairs both right | pairs vs plain [95%] | "
    "pairs same answer | permissive recall [95%] (chosen) | worst position gap (pts) | ECE |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
)
SCORE_HEAD = (
    "| variant | readouts | n | argmax exact [95%] | vs plain [95%] | served score exact (T=1 / 0.5) | "
    "MAE in levels (T=1 / 0.5) | pairs both right | ECE |",
    "|---|---|---|---|---|---|---|---|---|",
)


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# decisions-dev: {report['n']} questions over {report['states']} states", ""]
    for kind, splits in report["by_type"].items():
        for split, rows in splits.items():
            lines += [f"## {kind}, split {split}", ""]
            if kind == "noul":
                row = rows["plain"]
                lines += [f"plain: {interval(row)} (n = {row['n']}), yes-rate {row['yes_rate']:.1%}, "
                          f"pairs both right {share(row['pair_accuracy'])}, ECE {row['ece']:.3f}", ""]  # fmt: skip
                continue
            lines += list(CHOICE_HEAD if kind == "choice" else SCORE_HEAD)
            lines += [(choice_row if kind == "choice" else score_row)(v, row) for v, row in rows.items()]
            lines.append("")
    lines += ["## choice accuracy by family", "", "| family | " + " | ".join(FAMILY_COLUMNS) + " |",
              "|---|" + "---|" * len(FAMILY_COLUMNS)]  # fmt: skip
    for family, row in report["choice_by_family"].items():
        lines.append(f"| {family} | " + " | ".join(f"{row[v]:.0%}" if v in row else "-" for v in FAMILY_COLUMNS) + " |")
    for kind, splits in report.get("flips_under_reversal", {}).items():
        shares = ", ".join(f"{split} {row['share']:.1%} (n = {row['n']})" for split, row in splits.items())
        lines += ["", f"Flips under reversal, {kind} (plain readout vs the reversed order's): {shares}."]
    return "\n".join(lines) + "\n"
