"""The HWU64 question's reader (`evals/heads/hwu64.py`) on a written copy of the repository's fold files:
20 test then 50 train messages of each label in fold order, none in both, and a copy whose bytes or
intents differ from the recorded one refused."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest

from evals.heads import collect, hwu64

HEADER = "answerid;scenario;intent;answer_annotation;answer_from_anno;answer_from_user\n"


def write_copy(root: Path, per_fold: int, intent_of: dict[str, str] | None = None) -> str:
    """Every file `hwu64.files()` names, `per_fold` rows each; returns the sha256 of their bytes in order."""
    digest = hashlib.sha256()
    for name in hwu64.files():
        label = name.rsplit("/iot_", 1)[1].removesuffix(".csv")
        fold = name.split("KFold_")[1].split("/")[0]
        intent = (intent_of or {}).get(label, label)
        lines = [f'{i};iot;{intent};"a";"{label} fold {fold} row {i}";"raw"\n' for i in range(per_fold)]
        content = (HEADER + "".join(lines)).encode()
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
        digest.update(content)
    return digest.hexdigest()


def test_each_label_gives_20_test_then_50_train_messages_in_fold_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hwu64, "SOURCE_SHA256", write_copy(tmp_path, per_fold=8))
    rows = hwu64.messages(tmp_path)
    for label in hwu64.LABELS:
        test = [row["text"] for row in rows if row["label"] == label and row["split"] == "test"]
        train = [row["text"] for row in rows if row["label"] == label and row["split"] == "train"]
        assert len(test) == 20 and len(train) == 50 and not set(test) & set(train)
        assert test[0] == f"{label} fold 1 row 0" and test[19] == f"{label} fold 3 row 3"
        assert train[0] == f"{label} fold 3 row 4"
    indices = [row["index"] for row in rows if row["label"] == "coffee" and row["split"] == "train"]
    assert indices == list(range(50))


def test_a_copy_other_than_the_recorded_one_is_refused(tmp_path: Path) -> None:
    write_copy(tmp_path, per_fold=8)
    with pytest.raises(SystemExit, match="sha256 differs"):
        hwu64.messages(tmp_path)


def test_a_row_of_another_intent_in_a_labels_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hwu64, "SOURCE_SHA256", write_copy(tmp_path, per_fold=8, intent_of={"coffee": "hue_lightup"}))
    with pytest.raises(SystemExit, match="intent hue_lightup"):
        hwu64.messages(tmp_path)


def test_a_run_is_read_in_whole_blocks_of_every_label(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hwu64, "SOURCE_SHA256", write_copy(tmp_path, per_fold=8))
    rows = collect.ordered(hwu64.messages(tmp_path))
    assert len(rows) == 70 * len(hwu64.LABELS)
    for read, train, test in ((80, 5, 5), (160, 10, 10), (320, 20, 20), (400, 30, 20), (480, 40, 20)):
        counts = Counter((row["split"], row["label"]) for row in rows[:read])
        assert {counts["train", label] for label in hwu64.LABELS} == {train}
        assert {counts["test", label] for label in hwu64.LABELS} == {test}
