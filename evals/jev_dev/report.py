"""Score a `jev-dev` run directory: DIR/report.json and DIR/report.md.

Contract: reads DIR/run.json and DIR/results.jsonl (asking.py) as evals/harness/runs.py reads them.
report.json holds `suite` (`jev-dev`), `n`, `errors`, `accuracy` (+ `accuracy_ci95`), the uniform
baseline, `by_type` (`noul`, `choice`, `score`: `n`, `accuracy`, its 95% Wilson interval, NLL),
`by_fact` (stated, negated, absent, count, level), `score` (mean absolute level error, the share of
the most predicted level overall and per rubric size), `score_confusion` (per rubric size, rows gold
level, columns predicted level), `noul` (predicted and gold yes-rates), `coherence` (the mean gap of
each law, below), `variants` (the same figures for each offline variant of variants.py that the
run's readouts allow), `served_corrections` (per type, what the server applied itself, from the answer
settings in run.json; `answer_settings_known` false for a server that does not say them) and
`variants_not_derivable` (each variant those corrections rule out, and why).

Coherence laws (gold or not), each gap a total-variation distance TV(p, q) = ½ Σ|p_i - q_i| (for a
noul, |p_yes - q_yes|), averaged over the questions the law applies to:
- `score_mirror`: a score's distribution against its reversed-rubric view mapped back;
- `noul_vs_score2`: a noul's p(yes) against the same question as a 2-level score (No, Yes);
- `choice_permutation`: a choice's distribution against the one with the options reversed;
  `choice_permutation_rotations`: the same with each side averaged over rotations 0 and n // 2;
- `renaming`: against the same question under a new id and new option names, in the same request;
- `batching`: against the same question asked alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evals.harness.report import run_identity, write_json_and_markdown
from evals.harness.runs import ANSWER_SETTINGS, UNREAD, read_run
from evals.jev_dev.variants import TYPES, NotDerivable, jev_variant_records, served_corrections
from openjev.quality import metrics

#: The offline variants reported (variants.py); each is scored where the readouts allow it.
VARIANTS = ("reverse", "cc", "reverse+cc", "score:cc", "score:reverse+cc,noul:cc")


def tv(p: dict[str, float], q: dict[str, float]) -> float:
    return 0.5 * sum(abs(p[key] - q[key]) for key in p)


def mean_or_none(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def averaged(first: dict[str, float], second: dict[str, float]) -> dict[str, float]:
    return {key: (first[key] + second[key]) / 2 for key in first}


def coherence(records: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """The mean gap of each law (module doc) over the records it applies to; None where none does."""
    gaps: dict[str, list[float]] = {name: [] for name in COHERENCE_LAWS}
    for record in records:
        plain, views = record["probabilities"], record.get("views", {})
        if "rev" in views and record["type"] == "score":
            gaps["score_mirror"].append(tv(plain, views["rev"]))
        if "score2" in views:
            gaps["noul_vs_score2"].append(abs(plain["yes"] - views["score2"]["yes"]))
        if record["type"] == "choice" and {"rev", "rot", "revrot"} <= set(views):
            gaps["choice_permutation"].append(tv(plain, views["rev"]))
            rotated = averaged(plain, views["rot"])
            gaps["choice_permutation_rotations"].append(tv(rotated, averaged(views["rev"], views["revrot"])))
        for law in ("renaming", "batching"):
            view = "renamed" if law == "renaming" else "alone"
            if view in views:
                gaps[law].append(tv(plain, views[view]))
    return {name: mean_or_none(values) for name, values in gaps.items()}


COHERENCE_LAWS = (
    "score_mirror",
    "noul_vs_score2",
    "choice_permutation",
    "choice_permutation_rotations",
    "renaming",
    "batching",
)


def score_figures(records: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, list[list[int]]]]:
    """Mean absolute level error, most-predicted-level shares, and the confusion matrix per rubric size."""
    scores = [record for record in records if record["type"] == "score"]
    if not scores:
        return {}, {}
    confusion: dict[str, list[list[int]]] = {}
    for record in scores:
        size = len(record["probabilities"])
        matrix = confusion.setdefault(str(size), [[0] * size for _ in range(size)])
        matrix[int(record["gold"])][int(record["choice"])] += 1
    predicted = Counter(int(record["choice"]) for record in scores)
    most = {
        size: max(sum(row[column] for row in matrix) for column in range(len(matrix))) / sum(map(sum, matrix))
        for size, matrix in sorted(confusion.items(), key=lambda item: int(item[0]))
    }
    figures = {
        "n": len(scores),
        "mean_abs_level_error": sum(abs(int(r["choice"]) - int(r["gold"])) for r in scores) / len(scores),
        "most_predicted_level_share": max(predicted.values()) / len(scores),
        "most_predicted_level_share_by_size": most,
        "uniform_accuracy": sum(1 / len(record["probabilities"]) for record in scores) / len(scores),
    }
    return figures, dict(sorted(confusion.items(), key=lambda item: int(item[0])))


def figures(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy overall, per type and per fact kind; score and noul figures; the coherence gaps."""
    correct = [record["choice"] == record["gold"] for record in records]
    by_type = {}
    for kind in TYPES:
        members = [record for record in records if record["type"] == kind]
        if members:
            by_type[kind] = {
                **metrics.accuracy_of([record["choice"] == record["gold"] for record in members]),
                "nll": metrics.nll([record["probabilities"][record["gold"]] for record in members]),
            }
    facts: dict[str, list[bool]] = {}
    for record, ok in zip(records, correct, strict=True):
        facts.setdefault(record["fact"], []).append(ok)
    nouls = [record for record in records if record["type"] == "noul"]
    score, confusion = score_figures(records)
    return {
        **metrics.accuracy_of(correct),
        "uniform_accuracy": sum(1 / len(record["probabilities"]) for record in records) / len(records),
        "by_type": by_type,
        "by_fact": {fact: metrics.accuracy_of(flags) for fact, flags in sorted(facts.items())},
        "score": score,
        "score_confusion": confusion,
        "noul": {
            "predicted_yes_rate": sum(r["choice"] == "yes" for r in nouls) / len(nouls),
            "gold_yes_rate": sum(r["gold"] == "yes" for r in nouls) / len(nouls),
        }
        if nouls
        else {},
        "coherence": coherence(records),
    }


def variant_figures(
    records: Sequence[dict[str, Any]], served: dict[str, frozenset[str]]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Each variant's figures where the readouts give it; why each the server's own corrections rule out is not."""
    found, not_derivable = {}, {}
    for variant in VARIANTS:
        try:
            scored = jev_variant_records(records, variant, served)
        except NotDerivable as error:
            not_derivable[variant] = str(error).split(": ", 1)[1]
            continue
        except (KeyError, ValueError):
            continue
        found[variant] = {key: value for key, value in figures(scored).items() if key != "coherence"}
    return found, not_derivable


def build_jev_report(meta: dict[str, Any], answered: Sequence[dict[str, Any]], errors: Sequence[dict]) -> dict:
    if not answered:
        raise ValueError("no answered questions to report on")
    latencies = [record["latency_s"] for record in answered if record.get("latency_s") is not None]
    served = served_corrections(meta.get(ANSWER_SETTINGS))
    variants, not_derivable = variant_figures(answered, served)
    return {
        **run_identity(meta, answered),
        "states": len({record["state"] for record in answered}),
        "errors": len(errors),
        "answer_settings_known": isinstance(meta.get(ANSWER_SETTINGS), dict),
        "served_corrections": {kind: sorted(corrections) for kind, corrections in served.items()},
        **figures(answered),
        "variants": variants,
        "variants_not_derivable": not_derivable,
        "latency_s_per_state": {"p50": metrics.quantile(latencies, 0.5), "p95": metrics.quantile(latencies, 0.95)}
        if latencies
        else None,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def interval(row: dict[str, Any]) -> str:
    low, high = row["accuracy_ci95"]
    return f"{row['accuracy']:.1%} ({low:.1%}-{high:.1%}), n={row['n']}"


def figure_lines(name: str, row: dict[str, Any]) -> list[str]:
    types = " | ".join(interval(row["by_type"][kind]) if kind in row["by_type"] else "-" for kind in TYPES)
    score = row.get("score") or {}
    shares = " ".join(
        f"{size}:{share:.0%}" for size, share in score.get("most_predicted_level_share_by_size", {}).items()
    )
    mae = f"{score['mean_abs_level_error']:.2f}" if score else "-"
    noul = row.get("noul") or {}
    yes = f"{noul['predicted_yes_rate']:.0%} / {noul['gold_yes_rate']:.0%}" if noul else "-"
    return [f"| {name} | {interval(row)} | {types} | {mae} | {shares} | {yes} |"]


def served_label(report: dict[str, Any]) -> str:
    """The served row's name: what the server applied itself, from its answer settings."""
    if not report["answer_settings_known"]:
        return "as served (answer settings unknown: variants assume plain readouts)"
    served = report["served_corrections"]
    if not served:
        return "plain (as served)"
    return "as served (" + ", ".join(f"{kind}: {'+'.join(names)}" for kind, names in served.items()) + ")"


def render_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# jev-dev: {interval(report)}",
        "",
        f"- server: {report['url']}, model(s): {', '.join(report['models'])}; {report['states']} states, "
        f"{report['errors']} errors; uniform answer {report['uniform_accuracy']:.1%}",
        f"- dataset sha256 `{report['dataset_sha256']}`; synthetic: it catches biases and "
        "regressions, not a leaderboard",
        *(f"- not read from the server: `{path}`, {why}" for path, why in report.get(UNREAD, {}).items()),
        "",
        "| readout | all | noul | choice | score | score MAE | most-predicted level by size | noul yes pred / gold |",
        "|---|---|---|---|---|---|---|---|",
        *figure_lines(served_label(report), report),
    ]
    for name, row in report["variants"].items():
        lines += figure_lines(name, row)
    lines += [f"\n`{name}` is not derivable: {reason}." for name, reason in report["variants_not_derivable"].items()]
    lines += ["", "## Score confusion (rows gold level, columns predicted)", ""]
    for size, matrix in report["score_confusion"].items():
        lines += [f"{size} levels:", "", "```", *(" ".join(f"{cell:4d}" for cell in row) for row in matrix), "```", ""]
    lines += ["## Accuracy by fact kind", "", "| fact | accuracy |", "|---|---|"]
    lines += [f"| {fact} | {interval(row)} |" for fact, row in report["by_fact"].items()]
    lines += ["", "## Coherence: mean gap of each law (total variation)", "", "| law | mean gap |", "|---|---|"]
    lines += [f"| {law} | {'-' if gap is None else f'{gap:.3f}'} |" for law, gap in report["coherence"].items()]
    return "\n".join(lines) + "\n"


def write_jev_report(directory: Path) -> dict[str, Any]:
    report = build_jev_report(*read_run(directory))
    write_json_and_markdown(directory, report, render_markdown(report))
    return report
