"""Resumes that cannot mix runs and the files people have: `openjev classify` and `eval` as a user runs them,
against openjev over the fake SGLang (or, for a file refused before anything is sent, no server at all)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import httpx
import pyarrow
import pyarrow.parquet

from openjev.batch.rows import read_rows
from tests.batch.test_eval_cli import CHOICE, SCORE, STATES, answers_of, openjev_cli, requests_with_status
from tests.conftest import RunningOpenJev

NEVER_ASKED = "http://127.0.0.1:9"


def csv_of(path: Path, states: list[str], header: str = "state", prefix: str = "") -> Path:
    path.write_text(prefix + header + "\n" + "".join(f'"{state}"\n' for state in states), encoding="utf-8")
    return path


def answers_by_state(rows: Path, out: Path) -> dict[str, dict[str, float]]:
    """Each state of `rows` with the probabilities of the answer kept under its row's id in `out`."""
    answers = answers_of(out)
    return {
        row.state: answers[row.id]["answer"]["probabilities"]
        for row in read_rows(rows, question=CHOICE, need_gold=False)
    }


def test_a_resume_keeps_only_answers_made_for_the_same_row_and_refuses_another_question_or_file(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    team, urgency = tmp_path / "team.json", tmp_path / "urgency.json"
    team.write_text(json.dumps(CHOICE))
    urgency.write_text(json.dumps(SCORE))
    rows, out, url = tmp_path / "tickets.csv", tmp_path / "answers.jsonl", openjev_on_fake.url
    states = STATES[:8]
    first = openjev_cli("classify", str(csv_of(rows, states)), "--question", str(team), "--url", url, "--out", str(out))
    assert first.returncode == 0, first.stderr
    by_state = answers_by_state(rows, out)
    # One row inserted at the top of the id-less CSV: the file's bytes changed, so it is refused unless
    # named as the same file edited; then only the new row is asked, and no answer lands on a neighbour.
    shifted = ["Ticket new: where is my invoice", *states]
    asked = requests_with_status(openjev_on_fake, 200)
    command = ("classify", str(csv_of(rows, shifted)), "--question", str(team), "--url", url, "--out", str(out))
    refused = openjev_cli(*command)
    assert refused.returncode == 2 and "--resume-edited" in refused.stderr
    second = openjev_cli(*command, "--resume-edited")
    assert second.returncode == 0, second.stderr
    assert requests_with_status(openjev_on_fake, 200) - asked == 1
    answered = answers_by_state(rows, out)
    assert len(answers_of(out)) == len(shifted) and all(answered[state] == by_state[state] for state in states)
    # Another question, or another file, into the same answers file is refused, naming the difference;
    # the same bytes under another name are the same input.
    other = openjev_cli("classify", str(rows), "--question", str(urgency), "--url", url, "--out", str(out))
    assert other.returncode == 2
    assert "this run asks score question 'How urgent?'" in other.stderr and "--restart" in other.stderr
    different = csv_of(tmp_path / "other.csv", states[:3])
    mixed = openjev_cli("classify", str(different), "--question", str(team), "--url", url, "--out", str(out))
    assert mixed.returncode == 2 and f"rows of {rows.resolve()} (sha256" in mixed.stderr
    assert f"this run reads {different.resolve()} (sha256" in mixed.stderr
    renamed = tmp_path / "renamed.csv"
    renamed.write_bytes(rows.read_bytes())
    same = openjev_cli("classify", str(renamed), "--question", str(team), "--url", url, "--out", str(out))
    assert same.returncode == 0, same.stderr
    assert requests_with_status(openjev_on_fake, 200) - asked == 1
    again = openjev_cli("classify", str(rows), "--question", str(urgency), "--url", url, "--out", str(out), "--restart")
    assert again.returncode == 0, again.stderr
    assert {record["answer"]["type"] for record in answers_of(out).values()} == {"score"}


def test_a_bom_csv_keeps_its_ids_and_a_torn_last_line_is_repaired(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    question = tmp_path / "team.json"
    question.write_text(json.dumps(CHOICE))
    rows = tmp_path / "excel.csv"
    # Excel's "CSV UTF-8": a byte-order mark before the header, CRLF line ends.
    rows.write_bytes(b"\xef\xbb\xbfid,state\r\n" + b"".join(f"t{i},{s}\r\n".encode() for i, s in enumerate(STATES[:4])))
    out, url = tmp_path / "answers.jsonl", openjev_on_fake.url
    first = openjev_cli("classify", str(rows), "--question", str(question), "--url", url, "--out", str(out))
    assert first.returncode == 0, first.stderr
    assert sorted(answers_of(out)) == ["t0", "t1", "t2", "t3"]
    # A run killed while writing its last record: half a line at the end of the file.
    text = out.read_text()
    out.write_text(text[: len(text) - len(text.splitlines()[-1]) // 2 - 1])
    second = openjev_cli("classify", str(rows), "--question", str(question), "--url", url, "--out", str(out))
    assert second.returncode == 0, second.stderr
    assert "1 lost records (a torn or unreadable line) repaired" in second.stderr
    assert all(isinstance(json.loads(line), dict) for line in out.read_text().splitlines())
    assert sorted(answers_of(out)) == ["t0", "t1", "t2", "t3"]


def test_json_tsv_semicolon_gzip_and_parquet_files_run(tmp_path: Path, openjev_on_fake: RunningOpenJev) -> None:
    question = tmp_path / "team.json"
    question.write_text(json.dumps(CHOICE))
    states = STATES[:3]
    files = {
        "rows.json": json.dumps([{"state": state} for state in states], indent=2),
        "rows.tsv": "state\tgold\n" + "".join(f"{state}\tnot an option\n" for state in states),
        # Column names of the file's own, mapped by flags; a gold classify does not use is not checked.
        "rows.csv": "ticket;text;gold\n" + "".join(f"k{i};{state};???\n" for i, state in enumerate(states)),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "rows.csv.gz").write_bytes(gzip.compress(("state\n" + "\n".join(states) + "\n").encode()))
    pyarrow.parquet.write_table(pyarrow.table({"state": states}), tmp_path / "rows.parquet")
    for name in (*files, "rows.csv.gz", "rows.parquet"):
        mapped = ("--state-column", "text", "--id-column", "ticket") if name == "rows.csv" else ()
        out = tmp_path / f"{name}.answers.jsonl"
        done = openjev_cli(
            "classify", str(tmp_path / name), "--question", str(question), *mapped, "--url", openjev_on_fake.url,
            "--out", str(out),
        )  # fmt: skip
        assert done.returncode == 0, (name, done.stderr)
        assert len(answers_of(out)) == 3, name
    assert sorted(answers_of(tmp_path / "rows.csv.answers.jsonl")) == ["k0", "k1", "k2"]


def test_every_problem_of_a_file_is_listed_in_one_run_with_its_line(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    golds = ["billing", "legal", "marketing", "technical", "Billing ", "refunds"]
    rows.write_text(
        "".join(
            json.dumps({"state": s, "question": CHOICE, "gold": g}) + "\n"
            for s, g in zip(STATES[:6], golds, strict=True)
        )
    )
    done = openjev_cli("eval", str(rows), "--url", NEVER_ASKED, "--out", str(tmp_path / "o"))
    assert done.returncode == 2
    assert "3 problems" in done.stderr
    assert [f"{rows}:{line}: gold" in done.stderr for line in (2, 3, 6)] == [True] * 3
    score = tmp_path / "ratings.jsonl"
    score.write_text(
        "".join(
            json.dumps({"state": s, "question": SCORE, "gold": g}) + "\n"
            for s, g in zip(STATES[:2], (1, 3), strict=True)
        )
    )
    wrong = openjev_cli("eval", str(score), "--url", NEVER_ASKED, "--out", str(tmp_path / "o"))
    assert wrong.returncode == 2 and "levels count from 0; 1-based ratings: --score-gold rating" in wrong.stderr
    latin = tmp_path / "latin.csv"
    latin.write_bytes("state\nhello\ncaf\xe9 closed\n".encode("latin-1"))
    refused = openjev_cli("classify", str(latin), "--url", NEVER_ASKED, "--out", str(tmp_path / "a.jsonl"))
    assert refused.returncode == 2 and f"{latin}:3: not UTF-8 (byte 0xe9)" in refused.stderr
    assert not (tmp_path / "o").exists() and not (tmp_path / "a.jsonl").exists()


def test_a_task_the_server_matches_unnamed_makes_a_resume_ask_again(
    tmp_path: Path, serve_openjev, fake_sglang, qwen_tokenizer_dir
) -> None:
    """A server that answers a question equal to a task's with that task (OPENJEV_TASK_MATCH_QUESTIONS)
    answers otherwise once a task is fitted: the answers made before it do not stand."""
    env = {"OPENJEV_TASK_MATCH_QUESTIONS": "true", "OPENJEV_TASK_FOLDS": "2", "OPENJEV_TASK_WORKED_EXAMPLES": "0"}
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env=env)
    team = tmp_path / "team.json"
    team.write_text(json.dumps(CHOICE))
    rows, out = csv_of(tmp_path / "tickets.csv", STATES[:6]), tmp_path / "answers.jsonl"
    command = ("classify", str(rows), "--question", str(team), "--url", server.url, "--out", str(out))
    assert openjev_cli(*command).returncode == 0
    asked = requests_with_status(server, 200)
    assert openjev_cli(*command).returncode == 0
    assert requests_with_status(server, 200) == asked  # nothing changed: every answer stands
    labels = ["billing", "technical", "sales"] * 4
    examples = [{"state": state, "label": label} for state, label in zip(STATES, labels, strict=True)]
    fitted = httpx.post(f"{server.url}/v1/tasks", json={"question": CHOICE, "examples": examples}, timeout=120)
    assert fitted.status_code == 201, fitted.text
    asked = requests_with_status(server, 200)
    again = openjev_cli(*command)
    assert again.returncode == 0, again.stderr
    assert requests_with_status(server, 200) - asked == 6
