"""Output that never destroys input, as a user runs `openjev classify` and `eval`: an --out that is an
input, a file that is no answers file, a different file under the same name; and the answers file
compacted to one record per row that pyarrow reads as rows. Refusals come before any request (a URL
nothing listens on); the rest runs against openjev over the fake SGLang."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.json

from openjev.batch.answers_file import run_path
from tests.batch.test_eval_cli import CHOICE, STATES, TEAMS, openjev_cli, requests_with_status, write_rows
from tests.conftest import RunningOpenJev

NEVER_ASKED = "http://127.0.0.1:9"


def refused(*args: str) -> str:
    """The stderr of a command that must be refused (exit 2) before any request."""
    done = openjev_cli(*args, "--url", NEVER_ASKED, timeout=60)
    assert done.returncode == 2, (args, done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    return done.stderr


def test_an_out_that_is_an_input_or_no_answers_file_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    question = tmp_path / "team.json"
    question.write_text(json.dumps(CHOICE))
    rows = tmp_path / "tickets.csv"
    rows.write_text("state\n" + "".join(f'"{state}"\n' for state in STATES[:3]))
    labelled = write_rows(
        tmp_path / "rows.jsonl", [{"id": "a", "state": STATES[0], "question": CHOICE, "gold": "sales"}]
    )
    inputs = {path: path.read_bytes() for path in (question, rows, labelled)}
    sideways = tmp_path / "sub" / ".." / "tickets.csv"
    (tmp_path / "sub").mkdir()
    for restart in ((), ("--restart",)):
        # The input itself, however spelled, as classify's --out (CSV out, or the JSONL answers file).
        said = refused("classify", str(rows), "--question", str(question), "--out", str(sideways), *restart)
        assert "would be written over the input" in said
        refused("classify", str(labelled), "--out", str(labelled), *restart)
        # As eval's --out: a file is no folder; an input inside the folder, where eval writes, is refused.
        assert "is a file" in refused("eval", str(labelled), "--out", str(labelled), *restart)
        inside = tmp_path / "o" / "answers.jsonl"
        inside.parent.mkdir(exist_ok=True)
        inside.write_bytes(labelled.read_bytes())
        inputs[inside] = inside.read_bytes()
        refused("eval", str(inside), "--out", str(inside.parent), *restart)
        # A file of the user's own that is no answers file: JSONL, or a CSV no earlier classify wrote.
        notes = tmp_path / "notes.jsonl"
        notes.write_text('{"note": "mine"}\n{"note": "torn')
        inputs[notes] = notes.read_bytes()
        said = refused("classify", str(rows), "--question", str(question), "--out", str(notes), *restart)
        assert f"{notes} is not an openjev answers file" in said
        table = tmp_path / "table.csv"
        table.write_text("a,b\n1,2\n")
        inputs[table] = table.read_bytes()
        said = refused("classify", str(rows), "--question", str(question), "--out", str(table), *restart)
        assert "it is left as it is" in said
    assert {path: path.read_bytes() for path in inputs} == inputs
    assert not run_path(notes).exists() and not (tmp_path / "table.csv.answers.jsonl").exists()


def test_answers_are_bound_to_their_input_by_content_and_compacted_to_one_record_a_row(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    url, out = openjev_on_fake.url, tmp_path / "out"
    rows = [
        {"id": f"t{i}", "state": s, "question": CHOICE, "gold": list(TEAMS)[i % 3]} for i, s in enumerate(STATES[:8])
    ]
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = write_rows(tmp_path / "one" / "tickets.jsonl", rows)
    assert openjev_cli("eval", str(first), "--url", url, "--out", str(out)).returncode == 0
    answers = (out / "answers.jsonl").read_text()
    # Another file under the same name: refused, both named, nothing written.
    other = write_rows(tmp_path / "two" / "tickets.jsonl", rows[:4])
    mixed = openjev_cli("eval", str(other), "--url", url, "--out", str(out))
    assert mixed.returncode == 2
    assert str(first.resolve()) in mixed.stderr and str(other.resolve()) in mixed.stderr
    assert (out / "answers.jsonl").read_text() == answers
    # The same bytes under another name are the same input: nothing is asked again.
    asked = requests_with_status(openjev_on_fake, 200)
    copy = shutil.copy(first, tmp_path / "copy.jsonl")
    assert openjev_cli("eval", str(copy), "--url", url, "--out", str(out)).returncode == 0
    assert requests_with_status(openjev_on_fake, 200) == asked
    # The same file edited (one row's state changed): refused, then resumed as such, that row asked again.
    rows[3] = {**rows[3], "state": "Ticket 3: the invoice is wrong"}
    write_rows(first, rows)
    assert openjev_cli("eval", str(first), "--url", url, "--out", str(out)).returncode == 2
    edited = openjev_cli("eval", str(first), "--url", url, "--out", str(out), "--resume-edited")
    assert edited.returncode == 0, edited.stderr
    assert requests_with_status(openjev_on_fake, 200) == asked + 1
    # One record a row, each the current one, and nothing else in the file: pyarrow reads rows.
    lines = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert [record["id"] for record in lines] == [f"t{i}" for i in range(8)]
    assert lines[3]["input"] != json.loads(answers.splitlines()[3])["input"]
    table = pyarrow.json.read_json(out / "answers.jsonl")
    assert table.num_rows == 8 and table.column("id").null_count == 0
    report = json.loads((out / "report.json").read_text())
    wrong = [record for record in lines if record["correct"] is False]
    assert len(wrong) == round(report["all"]["n"] * (1 - report["all"]["accuracy"]))
    assert json.loads(run_path(out / "answers.jsonl").read_text())["openjev_answers"]["file"] == "tickets.jsonl"
