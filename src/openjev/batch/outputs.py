"""`openjev classify --out`: the answers in the format the file's suffix names.

`.jsonl`: the answers file itself, one record a line as each row finishes (client.py). `.csv` and
`.parquet`: the answers are kept as they arrive in `OUT.answers.jsonl` beside it (what a rerun
resumes), and OUT, a labelled copy of the input (`labelled_copy.py`), is written from it when the run
ends; pyarrow (the `reports` extra) for Parquet, whose absence is found before any request.

No output is written over an input: a path `eval` or `classify` would write (OUT, the answers file,
its `.run.json`, eval's report files) that is one of its inputs (the file, `--question`), as the
file system resolves both (links, `..`, hard links), is refused before anything is read or sent,
`--restart` or not. An existing `.csv` or `.parquet` OUT is written over only beside its own answers
file (what an earlier run into it left); any other is left as it is.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from openjev.batch.answers_file import run_path

FORMATS = (".jsonl", ".csv", ".parquet")
#: What `openjev eval` writes into its --out folder, beside the answers file and its run.
EVAL_FILES = ("report.json", "report.md", "report.html", "reliability.png", "confusion.png")
PYARROW_MISSING = "--out *.parquet needs pyarrow: install the reports extra (uv sync --inexact --extra reports)"


class OutputError(ValueError):
    """An --out this command cannot write."""


def journal_path(out: Path) -> Path:
    """Where the answers are appended as they arrive (what a rerun resumes): OUT itself for JSONL."""
    suffix = out.suffix.lower()
    if suffix not in FORMATS:
        raise OutputError(f"--out {out}: the suffix names the format: {', '.join(FORMATS)}")
    if suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise OutputError(PYARROW_MISSING) from None
    return out if suffix == ".jsonl" else out.with_name(out.name + ".answers.jsonl")


def check_classify_out(out: Path, inputs: Sequence[Path | None]) -> Path:
    """The answers file of `classify --out OUT`; OutputError for an OUT it may not write (module doc)."""
    journal = journal_path(out)
    refuse_inputs(list(dict.fromkeys([out, journal, run_path(journal)])), inputs)
    if journal != out and out.is_file() and out.stat().st_size and not journal.is_file():
        raise OutputError(
            f"--out {out} exists and no {journal.name} beside it says an earlier classify wrote it: "
            "it is left as it is (choose another --out, or delete it)"
        )
    return journal


def check_eval_out(out: Path, inputs: Sequence[Path | None]) -> None:
    """OutputError for an `eval --out OUT` that is a file, or that would write over an input (module doc):
    OUT holds the answers file and its run and the reports."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} is a file; eval writes a folder (answers.jsonl and the reports)")
    answers = out / "answers.jsonl"
    refuse_inputs([out, answers, run_path(answers), *(out / name for name in EVAL_FILES)], inputs)


def refuse_inputs(written: Sequence[Path], inputs: Sequence[Path | None]) -> None:
    """OutputError naming both when a path in `written` is one of `inputs` (module doc)."""
    for path in written:
        for source in inputs:
            if source is not None and _same_file(path, source):
                raise OutputError(
                    f"--out: {path} would be written over the input {source}; nothing was written "
                    "(choose another --out)"
                )


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
