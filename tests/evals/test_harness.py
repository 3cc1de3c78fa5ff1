"""The harness end to end against a real openjev on the fake SGLang, and its retry and contract checks."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import httpx
import pytest

from evals.harness import compare, report, run, runs, transport
from evals.mmlu import asking, suites
from tests.conftest import RunningOpenJev


def test_retry_delay_reads_the_headers() -> None:
    assert transport.retry_delay(httpx.Headers({"retry-after-ms": "250", "retry-after": "3"})) == 0.25
    assert transport.retry_delay(httpx.Headers({"retry-after": "3"})) == 3.0
    # An HTTP date: the seconds until it (none once it is past).
    assert transport.retry_delay(httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0
    assert transport.retry_delay(httpx.Headers({"retry-after": "Wed, 21 Oct 2099 07:28:00 GMT"})) == 60.0
    assert transport.retry_delay(httpx.Headers({})) is None
    assert transport.retry_delay(httpx.Headers({"retry-after": "3600"})) == transport.MAX_RETRY_WAIT_S


def test_overload_and_not_ready_are_retried() -> None:
    statuses = iter([529, 503, 200])

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(next(statuses), headers={"retry-after-ms": "1"})

    async def send() -> tuple[httpx.Response, int, float]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://jev") as client:
            return await transport.send_with_retry(lambda: client.post("/v1/systemone"))

    response, attempts, _ = asyncio.run(send())
    assert (response.status_code, attempts) == (200, 3)


def test_an_answer_that_breaks_the_contract_is_refused() -> None:
    item = suites.Item(id="x", row=0, subject="s", question="q", options=("one", "two"), gold="A")
    good = {"type": "choice", "choice": "B", "probabilities": {"A": 0.4, "B": 0.6}, "confidence": 0.2}
    assert asking.read_answer({"model": "m", "answers": {"answer": good}}, item)["choice"] == "B"
    for broken in (
        {**good, "choice": "C"},
        {**good, "probabilities": {"A": 1.0}},
        {**good, "probabilities": {"A": 0.4, "B": 0.5, "C": 0.1}},
        {**good, "type": "score"},
    ):
        with pytest.raises(ValueError):
            asking.read_answer({"answers": {"answer": broken}}, item)


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_on_three_items_resumes_reports_and_compares(openjev_on_fake: RunningOpenJev, tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = run.main(["mmlu-pro-matched", "--url", openjev_on_fake.url, "--limit", "3", "--out", str(out)])
    assert first == 0
    matched = suites.load_suite("mmlu-pro-matched").items
    lines = read_lines(out / "results.jsonl")
    assert [(line["position"], line["id"]) for line in lines] == [(i, matched[i].id) for i in range(3)]
    for line, item in zip(lines, matched, strict=False):
        assert line["gold"] == item.gold
        assert list(line["probabilities"]) == list(item.letters)
        assert line["choice"] in item.letters
        assert set(line["usage"]) >= {"input_tokens", "output_tokens"}
        assert line["latency_s"] > 0

    meta = json.loads((out / "run.json").read_text())
    assert meta["suite"] == "mmlu-pro-matched"
    assert meta["protocol"] == suites.PROTOCOL
    assert meta["dataset_sha256"] == suites.MMLU_PRO_TEST_SHA256
    assert "jev-latest" in runs.model_names(meta["server_models"])
    assert meta["openjev_version"]

    summary = json.loads((out / "report.json").read_text())
    assert summary["suite"] == "mmlu-pro-matched"
    assert summary["n"] == 3
    assert summary["errors"] == 0
    assert summary["accuracy"] == sum(line["choice"] == line["gold"] for line in lines) / 3
    assert summary["dataset_sha256"] == suites.MMLU_PRO_TEST_SHA256
    for key in ("accuracy_ci95", "nll", "brier", "ece", "per_subject", "baselines", "automate", "letters"):
        assert key in summary
    assert (out / "reliability.png").read_bytes().startswith(b"\x89PNG")
    assert "mmlu-pro-matched" in (out / "report.md").read_text()

    # Resuming with a larger limit asks only the new item; the three answers stay as they were.
    assert run.main(["mmlu-pro-matched", "--url", openjev_on_fake.url, "--limit", "4", "--out", str(out)]) == 0
    resumed = read_lines(out / "results.jsonl")
    assert resumed[:3] == lines
    assert [line["id"] for line in resumed] == [item.id for item in matched[:4]]
    assert [session["asked"] for session in json.loads((out / "run.json").read_text())["sessions"]] == [3, 1]
    # report.py rebuilds the same figures from the directory alone.
    assert report.main([str(out)]) == 0
    assert json.loads((out / "report.json").read_text())["n"] == 4

    # The same DIR cannot be reused for another suite.
    assert run.main(["mmlu-pro-dev", "--url", openjev_on_fake.url, "--limit", "1", "--out", str(out)]) == 2

    # Compared with itself: no difference. With a run of other items: refused.
    assert compare.main([str(out), str(out)]) == 0
    assert compare.compare(out, out).difference == 0
    other = tmp_path / "other"
    assert run.main(["mmlu-pro-matched", "--url", openjev_on_fake.url, "--limit", "3", "--out", str(other)]) == 0
    assert compare.main([str(out), str(other)]) == 2


def test_shifted_requests_name_each_rotation_by_the_original_letters() -> None:
    item = suites.Item(id="x", row=0, subject="s", question="q", options=("one", "two", "three"), gold="A")
    request = item.shifted_request([0, 1, 2])
    assert request["questions"]["answer"] == item.request()["questions"]["answer"]
    assert list(request["questions"]["answer@1"]["criteria"].items()) == [("B", "two"), ("C", "three"), ("A", "one")]
    assert list(request["questions"]["answer@2"]["criteria"]) == ["C", "A", "B"]


def test_a_shifted_run_reports_its_variants_and_compares_them(openjev_on_fake: RunningOpenJev, tmp_path: Path) -> None:
    out = tmp_path / "shifted"
    argv = ["mmlu", "--url", openjev_on_fake.url, "--limit", "3", "--shifts", "4", "--out", str(out)]
    assert run.main(argv) == 0
    lines = read_lines(out / "results.jsonl")
    for line in lines:
        assert line["shifts"]["offsets"] == [0, 1, 2, 3]
        assert line["shifts"]["probabilities"][0] == line["probabilities"]
        # Billed: one answer per rotation asked; the warm-up and each rotation's second reading by the
        # default server (OPENJEV_OPTION_SHIFTS=2) are its own work.
        assert line["usage"]["output_tokens"] == 4
        assert set(line["server_timing_ms"]) == {"prep", "prefill", "branches"}
    summary = json.loads((out / "report.json").read_text())
    assert summary["shifts"] == 4
    assert set(summary["variants"]) == {"shift0", "average", "log"}
    assert summary["variants"]["shift0"]["accuracy"] == summary["accuracy"]
    assert "Option-order variants" in (out / "report.md").read_text()
    assert compare.main([str(out), f"{out}@average"]) == 0
    assert compare.main([str(out), f"{out}@nonsense"]) == 2
    # A run with another --shifts is another run: refused, not mixed.
    assert run.main([*argv[:-4], "--shifts", "2", "--out", str(out)]) == 2


def test_a_shifted_run_is_not_resumed_without_its_shifts(openjev_on_fake: RunningOpenJev, tmp_path: Path) -> None:
    out = tmp_path / "shifted"
    assert run.main(["mmlu", "--url", openjev_on_fake.url, "--limit", "1", "--shifts", "4", "--out", str(out)]) == 0
    assert run.main(["mmlu", "--url", openjev_on_fake.url, "--limit", "2", "--out", str(out)]) == 2
    plain = tmp_path / "plain"
    assert run.main(["mmlu", "--url", openjev_on_fake.url, "--limit", "1", "--out", str(plain)]) == 0
    assert json.loads((plain / "run.json").read_text())["shifts"] == 1
    assert run.main(["mmlu", "--url", openjev_on_fake.url, "--limit", "2", "--shifts", "4", "--out", str(plain)]) == 2


def test_the_server_answer_settings_are_recorded_and_a_resume_against_others_refused(
    serve_openjev, fake_sglang, qwen_tokenizer_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calibration = tmp_path / "calibration.json"
    calibration.write_text(json.dumps({"format": "openjev-calibration/1", "temperatures": {"choice": {"3-4": 1.5}}}))
    base = ["--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir)]
    first = serve_openjev(*base, env={"OPENJEV_CALIBRATION_FILE": str(calibration)})
    out = tmp_path / "run"
    assert run.main(["mmlu", "--url", first.url, "--limit", "1", "--out", str(out)]) == 0
    recorded = json.loads((out / "run.json").read_text())["answer_settings"]
    assert recorded == httpx.get(f"{first.url}/v1/limits").json()["answer_settings"]
    assert recorded["calibration_sha256"] == hashlib.sha256(calibration.read_bytes()).hexdigest()
    assert run.main(["mmlu", "--url", first.url, "--limit", "2", "--out", str(out)]) == 0
    # Another server that differs only in its cue, or in the calibration file's content: refused, not mixed.
    # (run.json is pointed at its URL, so that only the answer settings differ.)
    calibration.write_text(json.dumps({"format": "openjev-calibration/1", "temperatures": {"choice": {"3-4": 1.2}}}))
    for env in (
        {"OPENJEV_CALIBRATION_FILE": str(calibration), "OPENJEV_ANSWER_CUE": "json"},
        {"OPENJEV_CALIBRATION_FILE": str(calibration)},
    ):
        other = serve_openjev(*base, env=env)
        meta = json.loads((out / "run.json").read_text())
        (out / "run.json").write_text(json.dumps({**meta, "url": other.url}))
        capsys.readouterr()
        assert run.main(["mmlu", "--url", other.url, "--limit", "3", "--out", str(out)]) == 2
        assert "another answer_settings" in capsys.readouterr().err
    assert len(read_lines(out / "results.jsonl")) == 2


def test_a_run_from_before_answer_settings_were_recorded_is_read_and_resumed(
    openjev_on_fake: RunningOpenJev, tmp_path: Path
) -> None:
    out = tmp_path / "old"
    assert run.main(["mmlu", "--url", openjev_on_fake.url, "--limit", "1", "--out", str(out)]) == 0
    meta = json.loads((out / "run.json").read_text())
    old = {key: value for key, value in meta.items() if key not in ("answer_settings", "shifts")}
    (out / "run.json").write_text(json.dumps(old))  # as evals/runs/ holds them
    assert report.main([str(out)]) == 0 and compare.main([str(out), str(out)]) == 0
    assert run.main(["mmlu", "--url", openjev_on_fake.url, "--limit", "2", "--out", str(out)]) == 0
    assert json.loads((out / "run.json").read_text())["answer_settings"] == meta["answer_settings"]


@pytest.mark.parametrize(
    "directory", sorted(path.parent for path in (Path(__file__).parents[2] / "evals" / "runs").glob("*/*/run.json"))
)
def test_the_committed_runs_are_still_read(directory: Path, tmp_path: Path) -> None:
    copy = tmp_path / directory.name
    copy.mkdir()
    for name in ("run.json", "results.jsonl"):
        (copy / name).write_bytes((directory / name).read_bytes())
    assert report.main([str(copy)]) == 0
    assert compare.main([str(copy), str(copy)]) == 0


def test_a_thinking_tier_run_reports_escalations_and_pairs_with_one_token(
    serve_openjev, fake_sglang, qwen_tokenizer_dir: Path, tmp_path: Path
) -> None:
    env = {
        "OPENJEV_THINK_MARGIN": "1000",
        "OPENJEV_THINK_MAX_SHARE": "0.5",
        "OPENJEV_THINK_BUDGET_TOKENS": "6",
        "OPENJEV_OPTION_SHIFTS": "1",
    }
    server = serve_openjev("--connect", fake_sglang.url, "--tokenizer", str(qwen_tokenizer_dir), env=env)
    one, think = tmp_path / "one", tmp_path / "think"
    assert run.main(["mmlu-pro-dev", "--url", server.url, "--limit", "4", "--out", str(one)]) == 0
    args = ["mmlu-pro-dev", "--url", server.url, "--limit", "4", "--model", "openjev-think", "--out", str(think)]
    assert run.main(args) == 0
    lines = read_lines(think / "results.jsonl")
    assert all(line["model"] == "openjev-think" for line in lines)
    # One question a request, a share of 0.5: ceil(0.5 * 1) escalates the first, then every other one.
    assert [line["escalated"] for line in lines] == [1, 0, 1, 0]
    assert [line["reasoning_tokens"] for line in lines] == [6, 0, 6, 0]
    assert json.loads((think / "run.json").read_text())["model"] == "openjev-think"
    thinking = json.loads((think / "report.json").read_text())["thinking"]
    assert thinking == {
        "n": 4,
        "escalated": 2,
        "escalated_share": 0.5,
        "reasoning_tokens_p50": 6,
        "reasoning_tokens_p95": 6,
    }
    assert "escalated (thinking tier) | 2 of 4" in (think / "report.md").read_text()
    assert json.loads((one / "report.json").read_text())["thinking"] is None
    # The tiers pair item by item; resuming the thinking run with another --model is refused.
    assert compare.main([str(one), str(think)]) == 0
    assert run.main([*args[:-4], "--out", str(think)]) == 2
