"""`openjev classify --out x.csv` / `x.parquet` as a labelled copy of the input, as a user runs it against
openjev over the fake SGLang: every input column kept as the file has it, then the answer columns (one
the input already uses renamed, never replacing it), and in Parquet `probabilities` a struct column.

The answers are checked against the answers file the run kept (`OUT.answers.jsonl`), not the code."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow
import pyarrow.parquet

from openjev.batch.answers_file import read_answers
from tests.batch.test_eval_cli import CHOICE, STATES, TEAMS, openjev_cli, write_rows
from tests.batch.test_eval_report import URGENT
from tests.conftest import RunningOpenJev

ANSWER_COLUMNS = ["type", "openjev_label", "value", "probabilities", "answer", "error"]


def test_a_csv_out_is_the_input_with_the_answers_after_its_columns(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    """A file made for `tasks fit` (its gold in `label`), ids and states under its own names."""
    header = ["ticket", "text", "label", "channel"]
    cells = [[f"T-{i}", state, "billing", "e-mail, then phone"] for i, state in enumerate(STATES[:4])]
    cells[1][1] = 'He said "refund", twice'
    rows = tmp_path / "tickets.csv"
    with rows.open("w", newline="") as sink:
        csv.writer(sink).writerows([header, *cells])
    question = tmp_path / "team.json"
    question.write_text(json.dumps(CHOICE))
    out = tmp_path / "labelled.csv"
    done = openjev_cli(
        "classify",
        str(rows),
        "--state-column",
        "text",
        "--id-column",
        "ticket",
        "--question",
        str(question),
        "--url",
        openjev_on_fake.url,
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    with out.open(newline="") as source:
        table = list(csv.reader(source))
    assert table[0] == [*header, "id", *ANSWER_COLUMNS]
    assert [line[: len(header)] for line in table[1:]] == cells
    kept = read_answers(tmp_path / "labelled.csv.answers.jsonl")
    copied = [dict(zip(table[0], line, strict=True)) for line in table[1:]]
    for row in copied:
        answer = kept[row["ticket"]]["answer"]
        assert row["id"] == row["ticket"] and row["label"] == "billing" and row["type"] == "choice"
        assert row["openjev_label"] == answer["choice"] and json.loads(row["answer"]) == answer
        assert json.loads(row["probabilities"]) == answer["probabilities"] and row["error"] == ""


def test_a_parquet_out_keeps_nested_columns_and_has_probabilities_as_a_struct(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    """Two questions (three and two options): one struct field per label, null where a row's question has none."""
    given = [
        {"id": f"r{i}", "state": state, "question": CHOICE if i < 3 else URGENT, "meta": {"lang": "en", "n": i}}
        for i, state in enumerate(STATES[:5])
    ]
    given[0]["note"], given[1]["note"] = 7, "seven"  # no one type: kept as JSON text
    rows = write_rows(tmp_path / "in.jsonl", given)
    out = tmp_path / "labelled.parquet"
    done = openjev_cli("classify", str(rows), "--url", openjev_on_fake.url, "--out", str(out))
    assert done.returncode == 0, done.stderr
    table = pyarrow.parquet.read_table(out)
    labels = [*TEAMS, *URGENT["criteria"]]
    inputs = ["id", "state", "question", "meta", "note"]
    assert table.column_names == [*inputs, "type", "label", "value", "probabilities", "answer", "error"]
    kind = table.schema.field("probabilities").type
    assert pyarrow.types.is_struct(kind) and [kind.field(i).name for i in range(kind.num_fields)] == labels
    assert all(pyarrow.types.is_float64(kind.field(i).type) for i in range(kind.num_fields))
    kept = read_answers(tmp_path / "labelled.parquet.answers.jsonl")
    copied = table.to_pylist()
    assert [row["note"] for row in copied] == ["7", "seven", None, None, None]
    for row, source in zip(copied, given, strict=True):
        answer = kept[source["id"]]["answer"]
        assert row["meta"] == source["meta"] and row["state"] == source["state"]
        assert row["question"]["instructions"] == source["question"]["instructions"]
        own = dict.fromkeys(labels) | answer["probabilities"]
        assert row["probabilities"] == own and row["label"] == answer["choice"]
        assert row["value"] == answer["probabilities"][answer["choice"]] and json.loads(row["answer"]) == answer
