"""The heads measurement's analysis (`evals/heads/analyse.py`) on synthetic readouts whose answers
are known: the hidden state carries the label, the readout does not."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np

from evals.heads import analyse, collect
from evals.heads.clinc150 import LABELS


def rows(per_label: int, split: str, rng: np.random.Generator, centres: np.ndarray) -> list[dict]:
    found = []
    for label_index, label in enumerate(LABELS):
        for index in range(per_label):
            state = (centres[label_index] + 0.5 * rng.normal(size=centres.shape[1])).astype(np.float16)
            hidden = base64.b64encode(state.tobytes()).decode()
            readout = rng.dirichlet(np.ones(len(LABELS))).tolist()
            row = {"split": split, "label": label, "index": index, "text": f"{label} {index}"}
            found.append({**row, "probabilities": readout, "hidden": hidden, "seconds": 1.0})
    return found


def test_the_curve_scores_every_way_of_answering_on_the_same_test_messages(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(len(LABELS), 32))
    lines = [json.dumps(row) for row in rows(10, "train", rng, centres) + rows(4, "test", rng, centres)]
    (tmp_path / "readouts.jsonl").write_text("\n".join(lines) + '\n{"split": "te')  # a torn last line
    collect.drop_torn_line(tmp_path / "readouts.jsonl")
    assert (tmp_path / "readouts.jsonl").read_text().endswith("\n")
    loaded = analyse.load(tmp_path / "readouts.jsonl")
    assert len(loaded) == 14 * len(LABELS)
    test = [row for row in loaded if row["split"] == "test"]
    train = [row for row in loaded if row["split"] == "train" and row["index"] < 5]
    found = analyse.point(train, test, LABELS)
    assert found["test"] == 4 * len(LABELS) and found["train"] == 5 * len(LABELS)
    assert found["zero_shot"]["minus_zero_shot"] == 0 and 0 <= found["head"]["macro_f1"] <= 1
    assert found["head"]["accuracy"] >= 0.9 > 0.5 > found["zero_shot"]["accuracy"]
    assert found["head"]["minus_zero_shot_ci95"][0] > 0
    assert found["task"]["answers_with"] == "head" and found["task"]["nested"]["adopted"]
