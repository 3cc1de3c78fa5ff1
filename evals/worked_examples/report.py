"""The report of a `decisions-examples-dev` run: what a worked example per option adds, per question type.

Contract: reads DIR/run.json and DIR/results.jsonl (evals/harness/runs.py) and writes DIR/report.json
and DIR/report.md. Only items answered in both arms count. Per arm and per question type: accuracy
with its 95% Wilson interval, the mean negative log-likelihood of the gold answer (finer than
accuracy on few items) and pair accuracy (both halves of a contrastive pair right, pairs with both
halves answered); per type, the paired difference worked - plain with its 95% paired-bootstrap
interval (src/openjev/quality/metrics.py); for choice, each arm's worst position error: the largest gap,
in points, between the share of answers at a shown position and the share of gold answers there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.harness.report import run_identity, write_json_and_markdown
from evals.harness.runs import read_run
from openjev.quality import metrics
from openjev.quality.metrics import accuracy_of

ARMS = ("plain", "worked")
TYPES = ("all", "choice", "noul", "score")


def position_error(records: Sequence[dict[str, Any]]) -> float | None:
    """max over positions of |share answered there - share gold there|, in points (choice only). An
    answer's position is its option's place in `probabilities`, which keeps the order sent (shown)."""
    chosen = [r for r in records if r["type"] == "choice"]
    if not chosen:
        return None
    gold = Counter(r["gold_position"] for r in chosen)
    answered = Counter(list(r["probabilities"]).index(r["choice"]) for r in chosen)
    return 100 * max(abs(answered[p] - gold[p]) / len(chosen) for p in set(gold) | set(answered))


def build_report(meta: dict[str, Any], answered: Sequence[dict[str, Any]]) -> dict[str, Any]:
    arms = {arm: {r["item"]: r for r in answered if r["arm"] == arm} for arm in ARMS}
    items = [item for item in arms["plain"] if item in arms["worked"]]
    by_type: dict[str, Any] = {}
    for kind in TYPES:
        kept = [item for item in items if kind == "all" or arms["plain"][item]["type"] == kind]
        if not kept:
            continue
        rows = {arm: [arms[arm][item] for item in kept] for arm in ARMS}
        flags = {arm: [r["choice"] == r["gold"] for r in rows[arm]] for arm in ARMS}
        pairs = [r["pair"] for r in rows["plain"]]  # the same items in both arms
        paired = metrics.paired_bootstrap(flags["plain"], flags["worked"])
        by_type[kind] = {
            **{arm: {**accuracy_of(flags[arm]), "pairs": metrics.pair_accuracy(flags[arm], pairs),
                     "nll": metrics.nll([r["probabilities"][r["gold"]] for r in rows[arm]]),
                     "position_error": position_error(rows[arm])} for arm in ARMS},
            "difference": paired.difference, "difference_ci95": list(paired.ci95),
        }  # fmt: skip
    latency = [arms["plain"][item]["latency_s"] for item in items]
    return {
        **run_identity(meta, answered),
        "answer_settings": meta.get("answer_settings"),
        "n": len(items),
        "by_arm": {arm: by_type["all"][arm] for arm in ARMS} if items else {},
        # The harness prints one accuracy: the worked arm's, what this suite is about.
        "accuracy": by_type["all"]["worked"]["accuracy"] if items else None,
        "by_type": by_type,
        "latency_p50_s": metrics.quantile(latency, 0.5) if latency else None,
    }


def _cell(row: dict[str, Any]) -> str:
    low, high = row["accuracy_ci95"]
    return f"{row['accuracy']:.1%} [{low:.1%}, {high:.1%}]"


def render_markdown(report: dict[str, Any]) -> str:
    settings = report.get("answer_settings") or {}
    lines = [
        f"# {report['suite']}: {report['n']} items, models {', '.join(report['models'])}",
        "",
        f"worked_examples={settings.get('worked_examples')}, contextual_calibration="
        f"{settings.get('contextual_calibration')!r}, option_shifts={settings.get('option_shifts')}; "
        f"request p50 {report['latency_p50_s']:.2f} s (both arms in one request)",
        "",
        "| type | n | plain | worked | worked - plain | pairs plain | pairs worked | NLL plain/worked | pos. err. |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, row in report["by_type"].items():
        low, high = row["difference_ci95"]
        pairs = [row[arm]["pairs"] for arm in ARMS]
        errors = [row[arm]["position_error"] for arm in ARMS]
        lines.append(
            f"| {kind} | {row['plain']['n']} | {_cell(row['plain'])} | {_cell(row['worked'])} | "
            f"{row['difference']:+.1%} [{low:+.1%}, {high:+.1%}] | "
            + " | ".join(f"{p['pair_accuracy']:.1%} (n={p['pairs']})" if p else "-" for p in pairs)
            + f" | {row['plain']['nll']:.3f} / {row['worked']['nll']:.3f} | "
            + (" / ".join(f"{e:.1f}" for e in errors) if errors[0] is not None else "-")
            + " |"
        )
    return "\n".join(lines) + "\n"


def write_report(directory: Path) -> dict[str, Any]:
    meta, answered, _ = read_run(directory)
    report = build_report(meta, answered)
    write_json_and_markdown(directory, report, render_markdown(report))
    return report
