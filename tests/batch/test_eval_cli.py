"""`openjev eval` and `openjev classify` as a user runs them, against openjev over the fake SGLang.

The figures are checked against the answers the server gave: gold labels are written from a first
classify run so that a known share of rows is right, and the report must say exactly that share.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from PIL import Image

from tests.conftest import RunningOpenJev, ServeOpenJev, eventually
from tests.fake_sglang import FakeSGLang

TEAMS = {"billing": "Payments, charges and refunds", "technical": "Bugs and outages", "sales": "New purchases"}
CHOICE = {"type": "choice", "instructions": "Which team handles it?", "criteria": TEAMS}
SCORE = {"type": "score", "instructions": "How urgent?", "criteria": ["Routine", "Urgent", "Emergency"]}
STATES = [f"Ticket {i}: {text}" for i, text in enumerate(["charged twice", "app crashes", "want more seats"] * 4)]


def openjev_cli(
    *args: str, timeout: float = 180, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it; `env` is added to this process's environment."""
    return subprocess.run(
        [sys.executable, "-m", "openjev", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def write_rows(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def answers_of(path: Path) -> dict[str, dict[str, object]]:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return {record["id"]: record for record in records if "answer" in record}


def answered_lines(path: Path) -> list[int]:
    """The file lines of the rows answered in an answers file, in order."""
    return sorted(record["line"] for record in answers_of(path).values())


def requests_with_status(server: RunningOpenJev, status: int) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    found = re.search(rf'openjev_requests_total\{{route="/v1/systemone",status="{status}"\}} (\S+)', text)
    return float(found.group(1)) if found else 0.0


def test_eval_reports_exactly_the_share_of_rows_its_gold_makes_right(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    rows = [{"id": f"r{i}", "state": state, "question": CHOICE, "pair": f"p{i // 2}"} for i, state in enumerate(STATES)]
    rows += [{"id": f"s{i}", "state": state, "question": SCORE} for i, state in enumerate(STATES[:6])]
    first = openjev_cli(
        "classify",
        str(write_rows(tmp_path / "in.jsonl", rows)),
        "--url",
        openjev_on_fake.url,
        "--out",
        str(tmp_path / "first.jsonl"),
    )
    assert first.returncode == 0, first.stderr
    predicted = answers_of(tmp_path / "first.jsonl")
    # The first eight choice rows keep the server's own answer as gold, the other four get another option.
    for index, row in enumerate(rows):
        answer = predicted[row["id"]]["answer"]
        if row["question"] is CHOICE:
            row["gold"] = answer["choice"] if index < 8 else next(k for k in TEAMS if k != answer["choice"])
        else:
            row["gold"] = min(round(answer["score"]), 2)
    out = tmp_path / "eval"
    done = openjev_cli(
        "eval", str(write_rows(tmp_path / "gold.jsonl", rows)), "--url", openjev_on_fake.url, "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "report.json").read_text())
    choice, score = report["questions"]
    assert choice["type"] == "choice" and choice["n"] == 12 and choice["accuracy"] == 8 / 12
    assert choice["pairs"] == {"pairs": 6, "pair_accuracy": 4 / 6, "ci95": choice["pairs"]["ci95"]}
    assert score["accuracy"] == 1.0 and score["level_mae"]["mean"] < 0.5
    assert sum(map(sum, choice["confusion"]["matrix"])) == 12
    assert abs(sum(choice["position_error"]["gaps"].values())) < 1e-9
    assert report["errors"]["n"] == 0 and "n=12, accuracy 0.667" in done.stdout
    with Image.open(out / "reliability.png") as image:
        assert image.format == "PNG" and image.width > 700
    assert "data:image/png;base64," in (out / "report.html").read_text()


def test_classify_resumes_after_an_interruption_and_asks_each_row_once(
    tmp_path: Path, serve_openjev: ServeOpenJev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path
) -> None:
    # Slow enough that a loaded machine still interrupts the run before its last row.
    fake_sglang.generate_delay = 0.8
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir))
    rows = write_rows(tmp_path / "in.jsonl", [{"state": state, "question": CHOICE} for state in STATES])
    out = tmp_path / "answers.jsonl"
    command = [
        sys.executable,
        "-m",
        "openjev",
        "classify",
        str(rows),
        "--url",
        server.url,
        "--out",
        str(out),
        "--concurrency",
        "1",
        "--api-key",
        "sk-never-printed-42",
    ]
    # SIGINT as a terminal delivers it, even where this test runs with it ignored (a background job).
    first = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert eventually(lambda: out.is_file() and out.read_text().count('"answer":') >= 3, timeout=60)
    first.send_signal(signal.SIGINT)
    _, said = first.communicate(timeout=30)
    kept = len(answers_of(out))
    assert 3 <= kept < len(STATES)
    # Ctrl-C says what is kept and the exact command that resumes it.
    assert first.returncode == 130
    assert f"{kept} of {len(STATES)} rows have an answer kept in {out}; resume with:" in said
    assert f"openjev classify {rows} --url {server.url} --out {out} --concurrency 1" in said
    assert "sk-never-printed-42" not in said and '--api-key "$OPENJEV_API_KEY"' in said
    asked_before = requests_with_status(server, 200)
    second = openjev_cli("classify", str(rows), "--url", server.url, "--out", str(out), "--concurrency", "4")
    assert second.returncode == 0, second.stderr
    assert answered_lines(out) == list(range(1, len(STATES) + 1))
    assert f"answered {len(STATES)}/{len(STATES)} rows" in second.stderr, "no plain progress line off a terminal"
    assert requests_with_status(server, 200) - asked_before == len(STATES) - kept


def test_classify_backs_off_overload_and_answers_every_row(
    tmp_path: Path, serve_openjev: ServeOpenJev, fake_sglang: FakeSGLang, qwen_tokenizer_dir: Path
) -> None:
    fake_sglang.generate_delay = 0.2
    server = serve_openjev(
        "--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), "--max-concurrent-requests", "1"
    )
    rows = write_rows(tmp_path / "in.jsonl", [{"state": state, "question": CHOICE} for state in STATES[:6]])
    started = time.monotonic()
    done = openjev_cli(
        "classify", str(rows), "--url", server.url, "--out", str(tmp_path / "a.jsonl"), "--concurrency", "4"
    )
    assert done.returncode == 0, done.stderr
    assert len(answers_of(tmp_path / "a.jsonl")) == 6
    assert requests_with_status(server, 529) >= 1, "the run never met overload, so backoff was not exercised"
    assert time.monotonic() - started < 120


def test_bad_files_are_cli_errors_and_nothing_is_sent(tmp_path: Path, openjev_on_fake: RunningOpenJev) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    wrong = write_rows(tmp_path / "wrong.jsonl", [{"state": "s", "question": CHOICE, "gold": "legal"}])
    for path, message in ((empty, "no rows in it"), (wrong, "gold 'legal' is not one of the question's options")):
        done = openjev_cli("eval", str(path), "--url", openjev_on_fake.url, "--out", str(tmp_path / "o"))
        assert done.returncode == 2 and message in done.stderr
    assert requests_with_status(openjev_on_fake, 200) == 0
    assert not (tmp_path / "o" / "answers.jsonl").exists()


def test_classify_asks_a_csv_of_states_the_one_question_of_its_file(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    """The usual classifier run: a CSV holding only states (one quoted, with a comma and a quote in it) and
    `--question FILE`; every row is asked that question and answered under its line number."""
    states = [*STATES[:3], 'Charged twice, "urgent"']
    rows = tmp_path / "tickets.csv"
    rows.write_text("state\n" + "".join('"' + state.replace('"', '""') + '"\n' for state in states))
    question = tmp_path / "team.json"
    question.write_text(json.dumps(CHOICE))
    out = tmp_path / "answers.jsonl"
    url = openjev_on_fake.url
    done = openjev_cli("classify", str(rows), "--question", str(question), "--url", url, "--out", str(out))
    assert done.returncode == 0, done.stderr
    answered = answers_of(out)
    assert answered_lines(out) == list(range(2, len(states) + 2))
    assert all(record["answer"]["choice"] in TEAMS for record in answered.values())
    assert requests_with_status(openjev_on_fake, 200) == len(states)
