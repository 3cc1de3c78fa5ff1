"""`openjev eval compare A B` as a command: the comparison printed, written where asked, and exit codes a
CI job can gate on.

Exit 0; 2 when A or B is not a judged eval run, they share no row, or `--out` is one of them; 1 when a
gate fails: `--fail-under X` while B's accuracy on the paired rows is below X, `--fail-if-worse`
while the 95% interval of B - A in accuracy over all paired rows lies wholly below 0. `--out DIR`
writes `comparison.json`, `changed-rows.csv` and `report.html` there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def compare_command(
    run_a: Annotated[Path, typer.Argument(help="The --out folder of one `openjev eval` run (A).")],
    run_b: Annotated[Path, typer.Argument(help="The --out folder of another run on the same rows (B).")],
    json_file: Annotated[Path | None, typer.Option("--json", help="Also write the comparison as JSON here.")] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Folder for comparison.json, changed-rows.csv and report.html (neither run's folder)."),
    ] = None,
    strict: Annotated[
        bool, typer.Option(help="Pair rows only where the question is the same too (not only id, state and gold).")
    ] = False,
    fail_under: Annotated[
        float | None, typer.Option(help="Exit 1 when B's accuracy on the paired rows is below this.")
    ] = None,
    fail_if_worse: Annotated[
        bool, typer.Option(help="Exit 1 when B - A in accuracy has its 95% interval wholly below 0.")
    ] = False,
) -> None:
    """Run B against run A on the rows both judged: paired differences per question and overall.

    Rows pair on id, state and gold (two prompts, or a task and none, compare on the same rows).
    Accuracy, macro-F1, Brier and ECE of each with B - A and its paired bootstrap 95% interval,
    the 2x2 table with McNemar's exact test, and the rows whose answer changed."""
    from openjev.batch.compare import NotAnEvalRun, compare_runs
    from openjev.batch.compare_text import changed_csv, comparison_html, comparison_text
    from openjev.batch.outputs import OutputError, refuse_inputs

    try:
        if out is not None and out.exists() and not out.is_dir():
            raise OutputError(f"--out {out} is a file; compare writes a folder")
        read = [run_a, run_b, *(run / name for run in (run_a, run_b) for name in ("report.json", "answers.jsonl"))]
        refuse_inputs([path for path in (out, json_file) if path is not None], read)
        comparison = compare_runs(run_a, run_b, strict=strict)
    except (NotAnEvalRun, OutputError) as error:
        typer.echo(f"openjev: {error}", err=True)
        raise typer.Exit(2) from None
    typer.echo(comparison_text(comparison), nl=False)
    if json_file is not None:
        json_file.write_text(json.dumps(comparison, indent=2, ensure_ascii=False))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "comparison.json").write_text(json.dumps(comparison, indent=2, ensure_ascii=False), encoding="utf-8")
        (out / "changed-rows.csv").write_text(changed_csv(comparison), encoding="utf-8")
        (out / "report.html").write_text(comparison_html(comparison), encoding="utf-8")
    overall = comparison["overall"]
    failed = []
    if fail_under is not None and overall["accuracy_b"] < fail_under:
        failed.append(f"B's accuracy {overall['accuracy_b']:.3f} is under --fail-under {fail_under}")
    if fail_if_worse and overall["ci95"][1] < 0:
        low, high = overall["ci95"]
        failed.append(f"B - A {overall['difference']:+.3f} [95% CI {low:+.3f}, {high:+.3f}] is wholly below 0")
    for reason in failed:
        typer.echo(f"openjev: {reason}", err=True)
    if failed:
        raise typer.Exit(1)
