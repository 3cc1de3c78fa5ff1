"""`openjev eval compare A B`: two `openjev eval` runs on the same rows, paired.

Rows are paired where both runs judged them (`answers.jsonl` records marked by evaluation.py) and
both saw the same item: by default its id, state and gold (`item_sha256`, `judging.item_digests`;
a file without ids pairs its rows by state, gold and occurrence), so two prompts, other option
texts, or a question asked with a task (`x_task`) and without one compare on the same rows; with
`strict` the question must be the same too (`row_sha256`). Rows judged by one run only, or whose
content differs, are counted and left out.

For each pair of questions the paired rows asked (A's question, B's question) and over all paired
rows: n, the 2x2 table of right and wrong, McNemar's exact p-value of its discordant cells, each
run's accuracy and B - A with its paired bootstrap 95% interval (`quality.metrics.paired_bootstrap`);
per question also macro-F1, Brier and ECE of each run and B - A with its paired bootstrap interval
(`quality.paired`). Every bootstrap makes DRAWS draws from a generator seeded with SEED, so the
same runs always give the same figures. What differs between the runs is listed with them: the
servers, models, answer settings, files and tasks of each run, and each question's fields
(instructions, options, task) where A's and B's differ. `changed` lists the paired rows whose
predicted label or rightness changed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from openjev.batch.answers_file import read_answers
from openjev.batch.judging import prediction
from openjev.quality.metrics import brier, paired_bootstrap
from openjev.quality.paired import ece_of, macro_f1_of, mcnemar_exact, mean_of, paired_figures

DRAWS = 10_000
SEED = 0
SHOWN = (
    "server_url",
    "served_model",
    "openjev_version",
    "answer_settings",
    "file",
    "file_sha256",
    "tasks",
    "started",
)
#: The per-question figures beside accuracy, in the order they are reported.
FIGURES = ("macro_f1", "brier", "ece")


class NotAnEvalRun(ValueError):
    """A directory that holds no judged `openjev eval` run."""


def is_eval_run(directory: Path) -> bool:
    return (directory / "report.json").is_file() and (directory / "answers.jsonl").is_file()


def judged_records(directory: Path) -> dict[str, dict[str, Any]]:
    """The last judged record of each row id in `directory/answers.jsonl`."""
    if not is_eval_run(directory):
        raise NotAnEvalRun(f"{directory}: not an openjev eval output (report.json and answers.jsonl)")
    records = {
        key: record
        for key, record in read_answers(directory / "answers.jsonl").items()
        if "correct" in record and "row_sha256" in record
    }
    if not records:
        raise NotAnEvalRun(f"{directory}: answers.jsonl has no judged row (made before eval marked them?)")
    return records


def pairing_key(record: Mapping[str, Any], strict: bool) -> str:
    """What pairs a record with the other run's (module doc); a run marked before `item_sha256` was
    recorded pairs strictly."""
    return str(record["row_sha256"] if strict else record.get("item_sha256") or record["row_sha256"])


def compare_runs(a: Path, b: Path, *, strict: bool = False) -> dict[str, Any]:
    """The paired comparison of run B against run A (module doc), as JSON-ready data."""
    records_a, records_b = judged_records(a), judged_records(b)
    keyed_a = {pairing_key(record, strict): record for record in records_a.values()}
    keyed_b = {pairing_key(record, strict): record for record in records_b.values()}
    same = [key for key in keyed_a if key in keyed_b]
    pairing = "id, state, question and gold" if strict else "id, state and gold"
    if not same:
        older = [str(run) for run, records in ((a, records_a), (b, records_b)) if not _itemised(records)]
        hint = (
            f" ({', '.join(older)}: judged before rows were marked with item_sha256, so paired only with "
            "the same question; the same `openjev eval` command run again on the same server marks them, "
            "asking no row it has answered)"
            if older and not strict
            else ""
        )
        raise NotAnEvalRun(f"{a} and {b} share no row with the same {pairing}{hint}")
    paired_ids = {str(keyed_a[key]["id"]) for key in same}
    differ = sum(1 for key in records_a if key in records_b and key not in paired_ids)
    reports = [json.loads((directory / "report.json").read_text(encoding="utf-8")) for directory in (a, b)]
    pairs_a, pairs_b = [keyed_a[key] for key in same], [keyed_b[key] for key in same]
    groups, changed = [], []
    for (key_a, key_b), members in _by_question(pairs_a, pairs_b).items():
        group_a, group_b = [pairs_a[i] for i in members], [pairs_b[i] for i in members]
        named = question_pair(reports, key_a, key_b)
        groups.append({**named, **paired(group_a, group_b), "figures": figures_of(group_a, group_b)})
        changed += changed_rows(group_a, group_b, named["name"])
    return {
        "a": str(a),
        "b": str(b),
        "pairing": pairing,
        "runs": {side: run_facts(report) for side, report in zip("ab", reports, strict=True)},
        "only_a": len(keyed_a) - len(same) - differ,
        "only_b": len(keyed_b) - len(same) - differ,
        "rows_differ": differ,
        "overall": paired(pairs_a, pairs_b),
        "questions": groups,
        "changed": changed,
        "draws": DRAWS,
        "seed": SEED,
    }


def _itemised(records: Mapping[str, Mapping[str, Any]]) -> bool:
    return all("item_sha256" in record for record in records.values())


def _by_question(pairs_a: list[dict[str, Any]], pairs_b: list[dict[str, Any]]) -> dict[tuple[str, str], list[int]]:
    """The positions of the paired rows by the question each run asked them (A's key, B's key)."""
    groups: dict[tuple[str, str], list[int]] = {}
    for position, (record_a, record_b) in enumerate(zip(pairs_a, pairs_b, strict=True)):
        groups.setdefault((record_a["question_key"], record_b["question_key"]), []).append(position)
    return groups


def question_pair(reports: list[dict[str, Any]], key_a: str, key_b: str) -> dict[str, Any]:
    """The names of A's and B's question (from their reports) and the fields in which they differ."""
    entries = [
        next((entry for entry in report["questions"] if entry["key"] == key), {"name": key, "question": {}})
        for report, key in zip(reports, (key_a, key_b), strict=True)
    ]
    asked_a, asked_b = (entry.get("question") or {} for entry in entries)
    differs = {
        field: [asked_a.get(field), asked_b.get(field)]
        for field in sorted({*asked_a, *asked_b})
        if asked_a.get(field) != asked_b.get(field)
    }
    return {"key": key_a, "key_b": key_b, "name": entries[0]["name"], "name_b": entries[1]["name"], "differs": differs}


def run_facts(report: dict[str, Any]) -> dict[str, Any]:
    run = report.get("run") or {}
    return {name: run.get(name) for name in SHOWN}


def paired(records_a: list[dict[str, Any]], records_b: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy of each run on the paired rows, B - A with its bootstrap interval, the 2x2 table and
    McNemar's exact p-value."""
    result = paired_bootstrap(
        [bool(record["correct"]) for record in records_a],
        [bool(record["correct"]) for record in records_b],
        draws=DRAWS,
        seed=SEED,
    )
    return {
        **asdict(result),
        "ci95": list(result.ci95),
        "mcnemar_p": mcnemar_exact(result.only_a_right, result.only_b_right),
    }


def scored(record: Mapping[str, Any]) -> tuple[dict[str, float], float]:
    """A judged record's distribution over the labels and the probability it gives its predicted label."""
    answer = record["answer"]
    _, distribution = prediction(str(answer.get("type")), answer)
    return distribution, distribution.get(str(record["predicted"]), 0.0)


def figures_of(records_a: list[dict[str, Any]], records_b: list[dict[str, Any]]) -> dict[str, Any]:
    """Macro-F1, Brier and ECE of each run on one question's paired rows, B - A and its interval."""
    gold = [str(record["gold"]) for record in records_a]
    figures: dict[str, Any] = {name: [] for name in FIGURES}
    for records in (records_a, records_b):
        distributions, confidences = zip(*(scored(record) for record in records), strict=True)
        correct = [bool(record["correct"]) for record in records]
        figures["macro_f1"].append(macro_f1_of(gold, [str(record["predicted"]) for record in records]))
        figures["brier"].append(mean_of([brier([d], [g]) for d, g in zip(distributions, gold, strict=True)]))
        figures["ece"].append(ece_of(confidences, correct))
    result = paired_figures({name: tuple(pair) for name, pair in figures.items()}, len(gold), DRAWS, SEED)
    return {name: {**asdict(value), "ci95": list(value.ci95)} for name, value in result.items()}


def changed_rows(
    records_a: list[dict[str, Any]], records_b: list[dict[str, Any]], question: str
) -> list[dict[str, Any]]:
    """The paired rows whose predicted label or rightness differs between the runs."""
    rows = []
    for record_a, record_b in zip(records_a, records_b, strict=True):
        if (record_a["predicted"], record_a["correct"]) == (record_b["predicted"], record_b["correct"]):
            continue
        rows.append(
            {
                "id": record_a["id"],
                "line": record_a.get("line"),
                "question": question,
                "gold": record_a["gold"],
                "predicted_a": record_a["predicted"],
                "predicted_b": record_b["predicted"],
                "correct_a": bool(record_a["correct"]),
                "correct_b": bool(record_b["correct"]),
                "confidence_a": round(scored(record_a)[1], 4),
                "confidence_b": round(scored(record_b)[1], 4),
            }
        )
    return rows
