"""The jev-dev harness end to end against a real openjev on the fake SGLang; its variants and report maths."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from evals.harness import compare, report, run, runs
from evals.jev_dev import asking as jev_asking
from evals.jev_dev import report as jev_report
from evals.jev_dev import variants as jev_variants
from tests.conftest import RunningOpenJev

#: A server that corrects nothing itself: every readout raw, so every offline variant can be derived.
#: A server that corrects nothing itself.
RAW = {
    "OPENJEV_CONTEXTUAL_CALIBRATION": "",
    "OPENJEV_SCORE_REVERSE": "false",
    "OPENJEV_SCORE_TEMPERATURE": "1.0",
    "OPENJEV_OPTION_SHIFTS": "1",
}
#: A server that calibrates score questions and nothing else.
SCORES_CALIBRATED = {**RAW, "OPENJEV_CONTEXTUAL_CALIBRATION": "score"}


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_same_answers(ours: list[dict], theirs: list[dict]) -> None:
    assert [record["id"] for record in ours] == [record["id"] for record in theirs] != []
    for mine, other in zip(ours, theirs, strict=True):
        assert mine["probabilities"] == pytest.approx(other["probabilities"], abs=1e-6)
        assert mine["choice"] == other["choice"]


@pytest.fixture
def openjev_raw(serve_openjev, fake_sglang, qwen_tokenizer_dir: Path) -> RunningOpenJev:
    return serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env=RAW)


def test_a_jev_dev_run_writes_the_report_the_issue_asks_for(openjev_raw: RunningOpenJev, tmp_path: Path) -> None:
    openjev_on_fake = openjev_raw
    out = tmp_path / "jev"
    assert run.main(["jev-dev", "--url", openjev_on_fake.url, "--limit", "5", "--out", str(out)]) == 0
    lines = read_lines(out / "results.jsonl")
    assert len(lines) == 5 * 7 and [line["position"] for line in lines] == list(range(35))
    for line in lines:
        assert math.isclose(sum(line["probabilities"].values()), 1.0, rel_tol=1e-9)
        assert line["choice"] in line["probabilities"] or line["type"] == "noul"
        assert line["content_free"]["plain"]
    summary = json.loads((out / "report.json").read_text())
    assert summary["suite"] == "jev-dev" and summary["n"] == 35
    assert {kind: summary["by_type"][kind]["n"] for kind in ("noul", "choice", "score")} == {
        "noul": 15, "choice": 10, "score": 10,
    }  # fmt: skip
    assert sum(map(sum, (cell for matrix in summary["score_confusion"].values() for cell in matrix))) == 10
    assert set(summary["coherence"]) == set(jev_report.COHERENCE_LAWS)
    assert summary["coherence"]["renaming"] == pytest.approx(0.0, abs=1e-6)
    assert {"reverse", "cc", "reverse+cc"} <= set(summary["variants"])
    assert "jev-dev" in (out / "report.md").read_text()
    # Resumed: nothing is asked again; report.py rebuilds the same figures.
    assert run.main(["jev-dev", "--url", openjev_on_fake.url, "--limit", "5", "--out", str(out)]) == 0
    assert read_lines(out / "results.jsonl") == lines
    assert report.main([str(out)]) == 0 and json.loads((out / "report.json").read_text())["n"] == 35
    # Paired comparisons: per type, and a variant against the plain readout.
    assert compare.main(["--type", "score", str(out), f"{out}@reverse+cc"]) == 0
    assert compare.compare(out, out, "noul").n == 15
    scores = tmp_path / "scores"
    assert (
        run.main(["jev-dev", "--url", openjev_on_fake.url, "--limit", "5", "--types", "score", "--out", str(scores)])
        == 0
    )
    assert compare.compare(out, scores, "score").difference == 0
    first = tmp_path / "first"
    assert run.main(["jev-dev", "--url", openjev_on_fake.url, "--limit", "2", "--types", "score",
                     "--out", str(first)]) == 0  # fmt: skip
    with pytest.raises(compare.Incomparable):
        compare.compare(out, first, "score")
    assert compare.compare(out, first, "score", common=True).n == 4
    assert compare.main(["--type", "score", "--common", str(out), str(first)]) == 0
    # --model names the model in every state's request (the thinking tier, say), and run.json keeps it.
    think = tmp_path / "think"
    args = ["jev-dev", "--url", openjev_on_fake.url, "--limit", "1", "--types", "score", "--model", "openjev-think"]
    assert run.main([*args, "--out", str(think)]) == 0
    assert {line["model"] for line in read_lines(think / "results.jsonl")} == {"openjev-think"}
    assert json.loads((think / "run.json").read_text())["model"] == "openjev-think"
    # Resumed with the other types on fewer states: one run, every question at its place in the suite.
    assert run.main(["jev-dev", "--url", openjev_on_fake.url, "--limit", "2", "--types", "noul,choice",
                     "--out", str(scores)]) == 0  # fmt: skip
    mixed = json.loads((scores / "report.json").read_text())
    assert {kind: row["n"] for kind, row in mixed["by_type"].items()} == {"noul": 6, "choice": 4, "score": 10}
    merged = runs.read_results(scores)
    assert [line["id"] for line in merged if line["position"] < 14] == [line["id"] for line in lines[:14]]
    assert [session["types"] for session in json.loads((scores / "run.json").read_text())["sessions"]] == [
        "score",
        "choice,noul",
    ]


def record(kind: str, plain: dict, views: dict | None = None, content_free: dict | None = None) -> dict:
    return {
        "id": "s/q", "type": kind, "gold": "0", "choice": "0", "fact": "level", "probabilities": plain,
        "views": views or {}, "content_free": content_free or {},
    }  # fmt: skip


def test_reverse_and_contextual_calibration_remove_a_level_bias() -> None:
    # The model likes the third shown position: forward it favours level 2, reversed it favours level 0.
    forward = {"0": 0.3, "1": 0.1, "2": 0.5, "3": 0.1}
    backward_shown = [0.1, 0.1, 0.5, 0.3]  # position j shows level 3 - j
    backward = {str(i): backward_shown[3 - i] for i in range(4)}
    line = record("score", forward, {"rev": backward}, {"plain": [0.1, 0.1, 0.7, 0.1], "rev": [0.1, 0.7, 0.1, 0.1]})
    reversed_only = jev_variants.jev_variant_record(line, "reverse")
    assert reversed_only["choice"] == "0"  # level 0 is liked by both views; level 2 by the forward one only
    calibrated = jev_variants.jev_variant_record(line, "cc")
    assert calibrated["choice"] == "0" and math.isclose(sum(calibrated["probabilities"].values()), 1.0)
    assert jev_variants.jev_variant_record(line, "noul:cc") is line  # a type left out stays plain


def test_an_unknown_variant_is_named() -> None:
    with pytest.raises(ValueError, match="unknown"):
        jev_variants.parse_variant("score:sideways")


def test_coherence_gaps_are_total_variation_distances() -> None:
    score = record("score", {"0": 0.5, "1": 0.5}, {"rev": {"0": 0.2, "1": 0.8}})
    noul = record(
        "noul", {"yes": 0.9, "no": 0.1}, {"score2": {"yes": 0.6, "no": 0.4}, "alone": {"yes": 0.9, "no": 0.1}}
    )
    gaps = jev_report.coherence([score, noul])
    assert gaps["score_mirror"] == pytest.approx(0.3) and gaps["noul_vs_score2"] == pytest.approx(0.3)
    assert gaps["batching"] == pytest.approx(0.0) and gaps["choice_permutation"] is None


def test_against_a_server_that_calibrates_scores_only_what_its_answers_give_is_derived(
    serve_openjev, fake_sglang, qwen_tokenizer_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir)]
    raw, default = serve_openjev(*base, env=RAW), serve_openjev(*base, env=SCORES_CALIBRATED)
    raw_dir, default_dir = tmp_path / "raw", tmp_path / "default"
    for server, out in ((raw, raw_dir), (default, default_dir)):
        capsys.readouterr()
        assert run.main(["jev-dev", "--url", server.url, "--limit", "4", "--types", "score", "--out", str(out)]) == 0
    note = capsys.readouterr().err
    assert "applies score: cc itself" in note and "OPENJEV_CONTEXTUAL_CALIBRATION= (empty)" in note
    # Its content-free readouts would come back divided by themselves: none are asked.
    assert jev_asking.read_content_free(default_dir / "content_free.json") == {}
    assert jev_asking.read_content_free(raw_dir / "content_free.json") != {}
    # What it serves is what the raw server's readouts give with contextual calibration, offline; and a
    # variant that keeps the calibration is derived from its answers as from the raw ones.
    served = runs.read_results(default_dir)
    assert_same_answers(served, compare.read_scored(f"{raw_dir}@cc")[1])
    assert_same_answers(compare.read_scored(f"{default_dir}@cc")[1], served)
    derived = compare.read_scored(f"{default_dir}@reverse+cc")[1]
    assert_same_answers(derived, compare.read_scored(f"{raw_dir}@reverse+cc")[1])
    summary = json.loads((default_dir / "report.json").read_text())
    assert summary["served_corrections"] == {"score": ["cc"]}
    assert {"cc", "reverse+cc"} <= set(summary["variants"]) and "reverse" not in summary["variants"]
    assert "cannot be derived" in summary["variants_not_derivable"]["reverse"]
    assert "| as served (score: cc) |" in (default_dir / "report.md").read_text()
    assert json.loads((raw_dir / "report.json").read_text())["served_corrections"] == {}
    # `@reverse` would be the calibrated readout mislabelled: refused, as is pairing runs of other settings.
    capsys.readouterr()
    assert compare.main(["--type", "score", str(default_dir), f"{default_dir}@reverse"]) == 2
    assert "applied cc to score questions itself" in capsys.readouterr().err
    assert compare.main(["--type", "score", str(raw_dir), str(default_dir)]) == 2
    refused = capsys.readouterr().err
    assert "contextual_calibration '' and 'score'" in refused and "--across-settings" in refused
    assert compare.main(["--type", "score", "--across-settings", f"{raw_dir}@cc", str(default_dir)]) == 0
    assert capsys.readouterr().out.startswith("answer settings differ: contextual_calibration '' and 'score'")
    assert compare.compare(f"{raw_dir}@cc", default_dir, "score", across_settings=True).difference == 0
