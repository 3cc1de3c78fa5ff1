"""Temperature fitting: it recovers a known temperature, and the cross-fitted report is held out."""

import json
import math
import random
from pathlib import Path

import pytest

from evals.harness import calibrate
from openjev.answering.answers import renormalise, sharpen
from openjev.calibration import load_calibration


def synthetic(n: int, true_temperature: float, options: int, seed: int) -> list[calibrate.Example]:
    """Gold drawn from q; the 'model' reports q sharpened to the power T, so tempering by T restores q."""
    rng = random.Random(seed)
    examples = []
    for _ in range(n):
        q = renormalise([rng.gauss(0, 1.5) for _ in range(options)])
        gold = rng.choices(range(options), weights=q)[0]
        examples.append((sharpen(q, 1 / true_temperature), gold))
    return examples


@pytest.mark.parametrize("true_temperature", [0.6, 1.0, 2.5])
def test_fit_recovers_a_known_temperature(true_temperature):
    examples = synthetic(3000, true_temperature, 4, seed=1)
    assert calibrate.fit_temperature(examples) == pytest.approx(true_temperature, rel=0.1)


def test_the_fitted_temperature_minimises_the_nll():
    examples = synthetic(500, 2.0, 10, seed=2)
    best = calibrate.fit_temperature(examples)
    for other in (best * 0.9, best * 1.1):
        assert calibrate.nll_at(examples, 1 / best) < calibrate.nll_at(examples, 1 / other)


def write_run(directory: Path, examples: list[calibrate.Example], suite: str = "mmlu") -> None:
    directory.mkdir()
    (directory / "run.json").write_text(json.dumps({"suite": suite}))
    letters = "ABCDEFGHIJ"
    with (directory / "results.jsonl").open("w") as handle:
        for index, (probabilities, gold) in enumerate(examples):
            record = {
                "position": index,
                "id": f"x/{index}",
                "gold": letters[gold],
                "choice": letters[probabilities.index(max(probabilities))],
                "probabilities": dict(zip(letters, probabilities, strict=False)),
            }
            handle.write(json.dumps(record) + "\n")


def test_the_tool_writes_a_file_the_server_loads_and_reports_held_out_gains(tmp_path: Path, capsys):
    write_run(tmp_path / "four", synthetic(400, 2.0, 4, seed=3))
    write_run(tmp_path / "ten", synthetic(10, 2.0, 10, seed=4))
    out = tmp_path / "calibration.json"
    assert calibrate.main([str(tmp_path / "four"), str(tmp_path / "ten"), "--out", str(out)]) == 0
    calibration = load_calibration(out)
    assert calibration.temperature("choice", 4) == pytest.approx(2.0, rel=0.2)
    assert calibration.temperature("choice", 10) is None  # 10 items: too few to fit
    group = json.loads(out.read_text())["fitted"]["groups"]["choice/3-4"]
    assert group["n"] == 400 and len(group["fold_temperatures"]) == 5
    assert group["after"]["nll"] < group["before"]["nll"]
    assert math.isfinite(group["after"]["ece"])
    assert "choice/3-4: n=400" in capsys.readouterr().out


def test_the_matched_suite_is_never_calibrated_on(tmp_path: Path):
    write_run(tmp_path / "matched", synthetic(30, 1.0, 4, seed=5), suite="mmlu-pro-matched")
    with pytest.raises(SystemExit):
        calibrate.main([str(tmp_path / "matched"), "--out", str(tmp_path / "c.json")])
