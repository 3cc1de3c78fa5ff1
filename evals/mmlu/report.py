"""Score an MMLU-family run directory: DIR/report.json, DIR/report.md and DIR/reliability.png.

Contract: reads only DIR/run.json and DIR/results.jsonl (evals/harness/runs.py), takes each item's
latest line, scores the answered items in suite order and counts the errors apart. report.json has
at least `suite`, `n`, `errors`, `accuracy`, `accuracy_ci95`, `nll`, `brier`, `ece` and
`dataset_sha256`, and also the per-subject accuracies, chance and always-A baselines, the
reliability bins, mean top probability - accuracy, automate@1/5/10% error, the predicted and gold
letter histograms, latency percentiles and token usage; for a thinking-tier run (`--model`), `thinking`:
the escalated share and reasoning tokens p50/p95 (over the escalated items). Metric definitions:
src/openjev/quality/metrics.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evals.harness.report import ECE_BINS, run_identity, write_json_and_markdown
from evals.harness.runs import read_run
from evals.mmlu.variants import VARIANTS, has_shifts, variant_records
from openjev.quality import metrics

AUTOMATE_TARGETS = (0.01, 0.05, 0.10)


def per_subject(answered: Sequence[dict[str, Any]], correct: Sequence[bool]) -> dict[str, dict[str, Any]]:
    subjects: dict[str, list[bool]] = {}
    for record, ok in zip(answered, correct, strict=True):
        subjects.setdefault(record["subject"], []).append(ok)
    return {subject: metrics.accuracy_of(flags) for subject, flags in sorted(subjects.items())}


def automation(top: Sequence[float], correct: Sequence[bool]) -> dict[str, dict[str, float | None]]:
    results = {f"{target:.0%}": metrics.automate_at(top, correct, target) for target in AUTOMATE_TARGETS}
    return {key: {"coverage": result.coverage, "threshold": result.threshold} for key, result in results.items()}


def quality(answered: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy, NLL, Brier, ECE and the predicted letters of answered records."""
    correct = [record["choice"] == record["gold"] for record in answered]
    top = [max(record["probabilities"].values()) for record in answered]
    return {
        **metrics.accuracy_of(correct),
        "nll": metrics.nll([record["probabilities"].get(record["gold"], 0.0) for record in answered]),
        "brier": metrics.brier([record["probabilities"] for record in answered], [r["gold"] for r in answered]),
        "ece": metrics.ece(top, correct, ECE_BINS),
        "predicted": dict(sorted(Counter(record["choice"] for record in answered).items())),
    }


def variants_of(answered: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]] | None:
    """Each offline variant's figures (evals/mmlu/variants.py) when every record holds its rotations."""
    if not has_shifts(answered):
        return None
    return {variant: quality(variant_records(answered, variant)) for variant in VARIANTS}


def thinking_of(answered: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Escalated share and reasoning tokens of a thinking-tier run; None when no item reports them."""
    reported = [record for record in answered if "escalated" in record]
    if not reported:
        return None
    tokens = [record.get("reasoning_tokens", 0) for record in reported if record["escalated"]]
    return {
        "n": len(reported),
        "escalated": sum(record["escalated"] > 0 for record in reported),
        "escalated_share": sum(record["escalated"] > 0 for record in reported) / len(reported),
        "reasoning_tokens_p50": metrics.quantile(tokens, 0.5) if tokens else 0,
        "reasoning_tokens_p95": metrics.quantile(tokens, 0.95) if tokens else 0,
    }


def build_report(meta: dict[str, Any], answered: Sequence[dict[str, Any]], errors: Sequence[dict[str, Any]]) -> dict:
    """The report of a run's answered items (at least one)."""
    n = len(answered)
    if n == 0:
        raise ValueError("no answered items to report on")
    correct = [record["choice"] == record["gold"] for record in answered]
    top = [max(record["probabilities"].values()) for record in answered]
    overall = metrics.accuracy_of(correct)
    latencies = [record["latency_s"] for record in answered]
    usage = [record.get("usage") or {} for record in answered]
    tokens = {key: sum(entry.get(key, 0) for entry in usage) for key in ("input_tokens", "output_tokens")}
    return {
        **run_identity(meta, answered),
        **overall,
        "errors": len(errors),
        "baselines": {
            "chance": sum(1 / len(record["probabilities"]) for record in answered) / n,
            "always_A": sum(record["gold"] == "A" for record in answered) / n,
        },
        "per_subject": per_subject(answered, correct),
        "nll": metrics.nll([record["probabilities"].get(record["gold"], 0.0) for record in answered]),
        "brier": metrics.brier([record["probabilities"] for record in answered], [r["gold"] for r in answered]),
        "ece": metrics.ece(top, correct, ECE_BINS),
        "reliability": [vars(group) for group in metrics.equal_mass_bins(top, correct, ECE_BINS)],
        "mean_top_probability": sum(top) / n,
        "overconfidence": sum(top) / n - overall["accuracy"],
        "automate": automation(top, correct),
        "letters": {
            "predicted": dict(sorted(Counter(record["choice"] for record in answered).items())),
            "gold": dict(sorted(Counter(record["gold"] for record in answered).items())),
        },
        "latency_s": {
            "p50": metrics.quantile(latencies, 0.5),
            "p95": metrics.quantile(latencies, 0.95),
            "mean": sum(latencies) / n,
        },
        "usage": {**tokens, **{f"mean_{key}": value / n for key, value in tokens.items()}},
        "shifts": meta.get("shifts", 1),
        "request_model": meta.get("model"),
        "thinking": thinking_of(answered),
        "variants": variants_of(answered),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def render_markdown(report: dict[str, Any]) -> str:
    low, high = report["accuracy_ci95"]
    lines = [
        f"# {report['suite']}: {report['accuracy']:.1%} ({low:.1%}-{high:.1%})",
        "",
        f"- server: {report['url']}, answering model(s): {', '.join(report['models'])}",
        f"- items: {report['n']} answered, {report['errors']} errors; {report['description']}",
        f"- dataset sha256: `{report['dataset_sha256']}`; protocol `{report['protocol']['name']}`",
        "",
        "| metric | value |",
        "|---|---|",
        f"| accuracy (95% Wilson) | {report['accuracy']:.1%} ({low:.1%}-{high:.1%}) |",
        f"| chance / always A | {report['baselines']['chance']:.1%} / {report['baselines']['always_A']:.1%} |",
        f"| NLL (nats) | {report['nll']:.3f} |",
        f"| Brier (multiclass) | {report['brier']:.3f} |",
        f"| ECE (10 equal-mass bins) | {report['ece']:.3f} |",
        f"| mean top probability - accuracy | {report['overconfidence']:+.3f} |",
        f"| latency p50 / p95 | {report['latency_s']['p50']:.2f} s / {report['latency_s']['p95']:.2f} s |",
        f"| tokens per item, input / output | {report['usage']['mean_input_tokens']:.0f} / "
        f"{report['usage']['mean_output_tokens']:.1f} |",
        *thinking_lines(report.get("thinking")),
        "",
        "## Automation: answer only when the top probability is at least the threshold",
        "",
        "| error at most | coverage | threshold |",
        "|---|---|---|",
    ]
    for target, result in report["automate"].items():
        threshold = "-" if result["threshold"] is None else f"{result['threshold']:.4f}"
        lines.append(f"| {target} | {result['coverage']:.1%} | {threshold} |")
    lines += variant_lines(report)
    letters = sorted(set(report["letters"]["predicted"]) | set(report["letters"]["gold"]))
    lines += ["", "## Label bias: predicted against gold letters", "", "| letter | predicted | gold |", "|---|---|---|"]
    lines += [
        f"| {letter} | {report['letters']['predicted'].get(letter, 0)} | {report['letters']['gold'].get(letter, 0)} |"
        for letter in letters
    ]
    lines += ["", "## Per subject", "", "| subject | n | accuracy (95% Wilson) |", "|---|---|---|"]
    for subject, row in report["per_subject"].items():
        lines.append(
            f"| {subject} | {row['n']} | {row['accuracy']:.1%} "
            f"({row['accuracy_ci95'][0]:.1%}-{row['accuracy_ci95'][1]:.1%}) |"
        )
    lines += ["", "![reliability diagram](reliability.png)", ""]
    return "\n".join(lines)


def thinking_lines(thinking: dict[str, Any] | None) -> list[str]:
    if not thinking:
        return []
    return [
        f"| escalated (thinking tier) | {thinking['escalated']} of {thinking['n']} "
        f"({thinking['escalated_share']:.1%}) |",
        f"| reasoning tokens p50 / p95 (escalated) | {thinking['reasoning_tokens_p50']:.0f} / "
        f"{thinking['reasoning_tokens_p95']:.0f} |",
    ]


def variant_lines(report: dict[str, Any]) -> list[str]:
    if not report.get("variants"):
        return []
    lines = [
        "",
        f"## Option-order variants, from {report['shifts']} rotations per item (evals/mmlu/variants.py)",
        "",
        "| variant | accuracy (95% Wilson) | NLL | Brier | ECE | predicted letters |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in report["variants"].items():
        low, high = row["accuracy_ci95"]
        letters = " ".join(f"{letter}:{count}" for letter, count in row["predicted"].items())
        lines.append(
            f"| {name} | {row['accuracy']:.1%} ({low:.1%}-{high:.1%}) | {row['nll']:.3f} | {row['brier']:.3f} "
            f"| {row['ece']:.3f} | {letters} |"
        )
    return lines


def plot_reliability(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    bins = report["reliability"]
    figure, axes = pyplot.subplots(figsize=(5, 5))
    axes.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect calibration")
    axes.plot(
        [group["confidence"] for group in bins],
        [group["accuracy"] for group in bins],
        marker="o",
        label=f"{len(bins)} equal-mass bins",
    )
    axes.set(
        xlim=(0, 1),
        ylim=(0, 1),
        xlabel="mean top probability",
        ylabel="accuracy",
        title=f"{report['suite']}, n={report['n']}: ECE {report['ece']:.3f}",
    )
    axes.legend(loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)


def write_report(directory: Path) -> dict[str, Any]:
    report = build_report(*read_run(directory))
    write_json_and_markdown(directory, report, render_markdown(report))
    plot_reliability(report, directory / "reliability.png")
    return report
