"""`openjev eval compare A B`: two `openjev eval` runs on the same rows, paired.

Rows are paired by id where both runs judged them (`answers.jsonl` records marked by evaluation.py)
and both saw the same row (`row_sha256`: its id, state, question and gold); rows answered by one run
only, or whose content differs, are counted and left out. For every question both runs asked, and
over all paired rows: n, each run's accuracy, B - A, its paired bootstrap 95% interval
(`quality.metrics.paired_bootstrap`: 10,000 draws, seed 0, so the same runs always print the same
figures) and the 2x2 table of right and wrong. The runs' servers, models, answer settings and files
are printed beside each other, so what changed between them is in view.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from openjev.batch.answers_file import read_answers
from openjev.quality.metrics import paired_bootstrap

DRAWS = 10_000
SEED = 0
SHOWN = ("server_url", "served_model", "openjev_version", "answer_settings", "file", "file_sha256", "started")


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


def compare_runs(a: Path, b: Path) -> dict[str, Any]:
    """The paired comparison of run B against run A (module doc), as JSON-ready data."""
    records_a, records_b = judged_records(a), judged_records(b)
    shared = [key for key in records_a if key in records_b]
    same = [key for key in shared if records_a[key]["row_sha256"] == records_b[key]["row_sha256"]]
    if not same:
        raise NotAnEvalRun(f"{a} and {b} share no row with the same id, state, question and gold")
    reports = [json.loads((directory / "report.json").read_text(encoding="utf-8")) for directory in (a, b)]
    names = {entry["key"]: entry["name"] for report in reports for entry in report["questions"]}
    questions = []
    for key in dict.fromkeys(records_a[row]["question_key"] for row in same):
        keys = [row for row in same if records_a[row]["question_key"] == key]
        questions.append({"key": key, "name": names.get(key, key), **paired(keys, records_a, records_b)})
    return {
        "a": str(a),
        "b": str(b),
        "runs": {side: run_facts(report) for side, report in zip("ab", reports, strict=True)},
        "only_a": len(records_a) - len(shared),
        "only_b": len(records_b) - len(shared),
        "rows_differ": len(shared) - len(same),
        "overall": paired(same, records_a, records_b),
        "questions": questions,
    }


def run_facts(report: dict[str, Any]) -> dict[str, Any]:
    run = report.get("run") or {}
    return {name: run.get(name) for name in SHOWN}


def paired(keys: list[str], records_a: dict[str, Any], records_b: dict[str, Any]) -> dict[str, Any]:
    result = paired_bootstrap(
        [bool(records_a[key]["correct"]) for key in keys],
        [bool(records_b[key]["correct"]) for key in keys],
        draws=DRAWS,
        seed=SEED,
    )
    return {**asdict(result), "ci95": list(result.ci95)}


def fact_lines(name: str, a: Any, b: Any) -> list[str]:
    """One line when both runs agree, else A's and B's (of answer settings, only the keys that differ)."""
    if a == b:
        if a is None:
            return []
        return [f"  {name}: {'the same' if isinstance(a, dict) else json.dumps(a)} in both"]
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(key for key in {*a, *b} if a.get(key) != b.get(key))
        a, b = ({key: side.get(key) for key in keys} for side in (a, b))
    return [f"  {name}: A {json.dumps(a, sort_keys=True)}, B {json.dumps(b, sort_keys=True)}"]


def comparison_text(comparison: dict[str, Any]) -> str:
    lines = [f"A: {comparison['a']}", f"B: {comparison['b']}"]
    for name in SHOWN:
        lines += fact_lines(name, comparison["runs"]["a"][name], comparison["runs"]["b"][name])
    lines.append(
        f"paired rows: {comparison['overall']['n']}; answered by A only {comparison['only_a']}, by B only "
        f"{comparison['only_b']}; same id but another row {comparison['rows_differ']} (left out)"
    )
    for entry in [*comparison["questions"], {"name": "All questions", **comparison["overall"]}]:
        low, high = entry["ci95"]
        lines += [
            "",
            f"{entry['name']}: n={entry['n']}",
            f"  A {entry['accuracy_a']:.3f}  B {entry['accuracy_b']:.3f}  B - A {entry['difference']:+.3f} "
            f"[95% CI {low:+.3f}, {high:+.3f}] (paired bootstrap, {DRAWS} draws, seed {SEED})",
            f"  both right {entry['both_right']}, only A right {entry['only_a_right']}, "
            f"only B right {entry['only_b_right']}, both wrong {entry['both_wrong']}",
        ]
    return "\n".join(lines) + "\n"
