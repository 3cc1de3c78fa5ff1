"""`openjev eval` and `classify` read a user's file strictly, against openjev over the fake SGLang: a row
that cannot be read as written is refused with its line before anything is sent, never asked shorter,
merged or dropped; other encodings and Hugging Face layouts are read as they are."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

from openjev.request.csv_rows import FIELD_LIMIT
from tests.batch.test_eval_cli import CHOICE, answers_of, openjev_cli, requests_with_status
from tests.conftest import RunningOpenJev


def question_file(tmp_path: Path) -> Path:
    path = tmp_path / "team.json"
    path.write_text(json.dumps(CHOICE))
    return path


def test_a_field_overflow_an_open_quote_and_a_huge_cell_are_each_refused_with_their_line(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    rows = tmp_path / "tickets.csv"
    rows.write_text(
        "state\n"
        "App crashes\n"
        "I paid, twice, please refund\n"  # line 3: three fields under a one-column header
        '"' + "x" * (FIELD_LIMIT + 1) + '"\n'  # line 4: over the largest request a server takes
        "Want more seats\n"
        '"Charged twice\n'  # line 6: a quote never closed
        "Login fails\n"
    )
    out = tmp_path / "answers.jsonl"
    done = openjev_cli(
        "classify",
        str(rows),
        "--question",
        str(question_file(tmp_path)),
        "--url",
        openjev_on_fake.url,
        "--out",
        str(out),
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{rows}:3: 3 fields where the header has 1" in done.stderr
    assert f"{rows}:4: a value longer than {FIELD_LIMIT:,} characters" in done.stderr
    assert f'{rows}:6: a quote (") opened on this line is never closed' in done.stderr
    assert f"{rows}: 3 problems" in done.stderr
    assert requests_with_status(openjev_on_fake, 200) == 0 and not out.exists()


def test_a_long_valid_cell_under_the_request_limit_is_read_whole(tmp_path: Path) -> None:
    """csv's own limit is 131,072 characters; a state longer than that is still one valid row."""
    rows = tmp_path / "long.csv"
    rows.write_text("state\n" + "y" * 200_000 + "\nshort\n")
    done = openjev_cli("classify", str(rows), "--question", str(question_file(tmp_path)), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "2 rows" in done.stderr


def test_utf16_and_utf32_files_with_a_bom_are_read_and_answered(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    """Excel's "Unicode Text" (UTF-16 LE, tab-separated) and PowerShell's UTF-16/32 output."""
    text = "state\tgold\nCharged twice \u2013 refund\tbilling\nApp crashes\ttechnical\n"
    for name, bom, encoding in (
        ("excel.tsv", codecs.BOM_UTF16_LE, "utf-16-le"),
        ("big.tsv", codecs.BOM_UTF16_BE, "utf-16-be"),
        ("wide.tsv", codecs.BOM_UTF32_LE, "utf-32-le"),
    ):
        rows = tmp_path / name
        rows.write_bytes(bom + text.encode(encoding))
        out = tmp_path / f"{name}.jsonl"
        url = openjev_on_fake.url
        done = openjev_cli(
            "classify", str(rows), "--question", str(question_file(tmp_path)), "--url", url, "--out", str(out)
        )
        assert done.returncode == 0, done.stderr
        assert len(answers_of(out)) == 2
    bare = tmp_path / "bare.tsv"
    bare.write_bytes(text.encode("utf-16-le"))
    done = openjev_cli("classify", str(bare), "--question", str(question_file(tmp_path)), "--dry-run")
    assert done.returncode == 2 and "UTF-16 or UTF-32 without a byte-order mark" in done.stderr


def test_a_missing_gold_column_or_question_is_said_once_not_once_a_row(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"state": f"ticket {n}", "answer": "billing"}) + "\n" for n in range(5)))
    url, out = openjev_on_fake.url, str(tmp_path / "eval")
    done = openjev_cli("eval", str(rows), "--question", str(question_file(tmp_path)), "--url", url, "--out", out)
    assert done.returncode == 2
    assert done.stderr.count("no row has a gold answer") == 1 and f"{rows}:1:" not in done.stderr
    assert "--label-column" in done.stderr
    done = openjev_cli("classify", str(rows), "--url", openjev_on_fake.url, "--out", str(tmp_path / "a.jsonl"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("no row has a question") == 1 and f"{rows}:1:" not in done.stderr
    assert requests_with_status(openjev_on_fake, 200) == 0
