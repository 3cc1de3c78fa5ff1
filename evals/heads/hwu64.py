"""The HWU64 home-devices question (`HWU64.md`): 8 confusable intents of HWU64's `iot` scenario, its
messages read from a user's local copy of the NLU-Evaluation-Data repository, checked by one sha256
over the files read.

HWU64 publishes no train/test split of its own, only the 10 test folds of its cross-validation, which
partition the annotated messages. The selection reads the 10 folds' test files of each intent in fold
order (`FILES`); of each label the first 20 messages so read are the `test` split and the next 50 the
`train` split, so no message is in both. The text is `answer_from_anno`, the normalised user answer the
intent was annotated on.
"""

from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path
from typing import Any

#: Where the folds' test files lie in the repository.
FOLDS_DIR = "CrossValidation/autoGeneFromRealAnno/autoGene_2018_03_22-13_01_25_169/CrossValidation"
#: sha256 of the files `FILES` names, concatenated in that order (xliuhw/NLU-Evaluation-Data at
#: f6071b496b17d71e6eb43f543af0707f4ff30557).
SOURCE_SHA256 = "47c39aeb44bc819cdbe4fef344eafa022c01f3781aea2cbb7bad1a81658fc771"
#: Messages taken of each label, in fold order: the first 20 are `test`, the next 50 `train`.
TAKEN = {"test": 20, "train": 50}
QUESTION = {
    "type": "choice",
    "instructions": "Which request does the user make of the home assistant?",
    "criteria": {
        "cleaning": "to have the robot vacuum clean the house",
        "coffee": "to make a coffee",
        "hue_lightchange": "to change the colour of the lights",
        "hue_lightdim": "to make the lights dimmer",
        "hue_lightoff": "to turn the lights off",
        "hue_lightup": "to make the lights brighter",
        "wemo_off": "to switch a smart plug or socket off",
        "wemo_on": "to switch a smart plug or socket on",
    },
}
LABELS = list(QUESTION["criteria"])


def files() -> list[str]:
    """The files read, relative to the repository: each label's test file of fold 1 to 10."""
    return [f"{FOLDS_DIR}/KFold_{fold}/testset/csv/iot_{label}.csv" for label in LABELS for fold in range(1, 11)]


def messages(source: Path) -> list[dict[str, Any]]:
    """The question's messages from a local copy of the repository at `source` (the files checked by
    their sha256): for each label, 20 `test` then 50 `train` messages, each with its split, label and
    rank among that label's messages of that split. The dataset stays where the user keeps it."""
    raw = [(source / name).read_bytes() for name in files()]
    if hashlib.sha256(b"".join(raw)).hexdigest() != SOURCE_SHA256:
        raise SystemExit(f"{source} is not NLU-Evaluation-Data at the recorded commit (sha256 differs)")
    texts: dict[str, list[str]] = {label: [] for label in LABELS}
    for name, content in zip(files(), raw, strict=True):
        label = name.rsplit("/iot_", 1)[1].removesuffix(".csv")
        for row in csv.DictReader(io.StringIO(content.decode()), delimiter=";"):
            if f"{row['scenario']}_{row['intent']}" != f"iot_{label}":
                raise SystemExit(f"{name}: a row of intent {row['intent']} in {label}'s file")
            texts[label].append(row["answer_from_anno"])
    rows = []
    for label, found in texts.items():
        start = 0
        for split, taken in TAKEN.items():
            chosen = found[start : start + taken]
            rows += [{"split": split, "label": label, "index": i, "text": text} for i, text in enumerate(chosen)]
            start += taken
    return rows
