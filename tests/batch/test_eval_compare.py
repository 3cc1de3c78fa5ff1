"""`openjev eval compare A B` on two runs of one file whose answers differ (the fake SGLang's label
logprobs reversed between them), checked against the 2x2 table counted here from the two answer files;
and on constructed runs whose paired difference and interval are known by hand."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evals.harness import compare as harness_compare
from openjev.batch.answers_file import read_answers
from tests.batch.test_eval_cli import CHOICE, STATES, TEAMS, openjev_cli, write_rows
from tests.conftest import RunningOpenJev
from tests.fake_sglang import FakeSGLang, hashed_logprobs

YESNO = {"type": "noul", "instructions": "Is the customer angry?"}


def right_flags(out: Path) -> dict[str, bool]:
    """Each row's right/wrong, from the answer and the gold as the answers file holds them."""
    flags = {}
    for record in read_answers(out / "answers.jsonl").values():
        answer = record["answer"]
        predicted = answer["choice"] if answer["type"] == "choice" else ("yes" if answer["noul"] >= 0.5 else "no")
        flags[record["id"]] = predicted == record["gold"]
    return flags


def table(a: dict[str, bool], b: dict[str, bool], ids: list[str]) -> tuple[int, int, int, int]:
    both = sum(a[i] and b[i] for i in ids)
    only_a = sum(a[i] and not b[i] for i in ids)
    only_b = sum(b[i] and not a[i] for i in ids)
    return both, only_a, only_b, len(ids) - both - only_a - only_b


def test_compare_pairs_two_runs_per_question_and_overall(
    tmp_path: Path, openjev_on_fake: RunningOpenJev, fake_sglang: FakeSGLang, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"id": f"t{i}", "state": s, "question": CHOICE, "gold": list(TEAMS)[i % 3]} for i, s in enumerate(STATES)]
    rows += [{"id": f"n{i}", "state": s, "question": YESNO, "gold": i % 2} for i, s in enumerate(STATES)]
    gold = write_rows(tmp_path / "gold.jsonl", rows)
    url = openjev_on_fake.url
    assert openjev_cli("eval", str(gold), "--url", url, "--out", str(tmp_path / "a")).returncode == 0
    fake_sglang.logprobs = lambda prompt, ids: hashed_logprobs(prompt, ids)[::-1]
    assert openjev_cli("eval", str(gold), "--url", url, "--out", str(tmp_path / "b")).returncode == 0
    done = openjev_cli("eval", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json", str(tmp_path / "c.json"))
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "c.json").read_text())
    a, b = right_flags(tmp_path / "a"), right_flags(tmp_path / "b")
    assert a != b, "the two runs answered alike, so nothing was compared"
    for name, ids in (("overall", list(a)), (0, [f"t{i}" for i in range(12)]), (1, [f"n{i}" for i in range(12)])):
        figures = result["overall"] if name == "overall" else result["questions"][name]
        both, only_a, only_b, neither = table(a, b, ids)
        assert (figures["both_right"], figures["only_a_right"], figures["only_b_right"]) == (both, only_a, only_b)
        assert figures["both_wrong"] == neither and figures["n"] == len(ids)
        assert figures["difference"] == pytest.approx((only_b - only_a) / len(ids))
        low, high = figures["ci95"]
        assert low <= figures["difference"] <= high
        assert f"B - A {figures['difference']:+.3f} [95% CI {low:+.3f}, {high:+.3f}]" in done.stdout
    again = openjev_cli("eval", "compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert again.stdout == done.stdout, "the bootstrap is seeded: the same runs print the same figures"
    # The eval harness's compare.py takes eval outputs too, and prints the same comparison.
    assert harness_compare.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert capsys.readouterr().out == done.stdout
    assert harness_compare.main([str(tmp_path / "a"), str(tmp_path)]) == 2


def constructed(source: Path, target: Path, correct: bool, changed: str | None = None) -> Path:
    """A copy of the eval output `source` whose every row is marked right (or wrong); `changed`: a row
    whose content is made to differ."""
    shutil.copytree(source, target)
    records = [json.loads(line) for line in (target / "answers.jsonl").read_text().splitlines()]
    for record in records:
        if "id" not in record:  # the header naming the run
            continue
        record["correct"] = correct
        if record["id"] == changed:
            record["row_sha256"] = record["item_sha256"] = "0" * 64
    (target / "answers.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    return target


def test_compare_of_constructed_runs_matches_the_hand_computation(
    tmp_path: Path, openjev_on_fake: RunningOpenJev
) -> None:
    rows = [{"id": f"t{i}", "state": s, "question": CHOICE, "gold": "billing"} for i, s in enumerate(STATES[:8])]
    made = openjev_cli(
        "eval",
        str(write_rows(tmp_path / "gold.jsonl", rows)),
        "--url",
        openjev_on_fake.url,
        "--out",
        str(tmp_path / "run"),
    )
    assert made.returncode == 0, made.stderr
    wrong = constructed(tmp_path / "run", tmp_path / "wrong", correct=False)
    right = constructed(tmp_path / "run", tmp_path / "right", correct=True, changed="t7")
    done = openjev_cli("eval", "compare", str(wrong), str(right), "--json", str(tmp_path / "c.json"))
    assert done.returncode == 0, done.stderr
    overall = json.loads((tmp_path / "c.json").read_text())["overall"]
    # t7 differs in content and is left out: 7 pairs, A wrong and B right on each, so B - A = 7/7 = 1;
    # every bootstrap draw resamples only (wrong, right) pairs, so the interval is [1, 1].
    assert overall["n"] == 7 and overall["only_b_right"] == 7 and overall["both_right"] == 0
    assert overall["difference"] == 1.0 and overall["ci95"] == [1.0, 1.0]
    assert "same id but another row 1 (left out)" in done.stdout
    # McNemar: 7 discordant pairs all one way, p = 2 * (1/2)^7.
    assert overall["mcnemar_p"] == pytest.approx(2 / 2**7)
    # The CI gate: B worse than A with an interval wholly below 0 fails; better passes.
    worse = openjev_cli("eval", "compare", str(right), str(wrong), "--fail-if-worse")
    assert worse.returncode == 1 and "wholly below 0" in worse.stderr
    assert openjev_cli("eval", "compare", str(wrong), str(right), "--fail-if-worse").returncode == 0
