"""The CLINC150 banking question (`CLINC150.md`): 8 confusable intents of CLINC150's banking domain, its
messages read from a user's local copy of `data/data_full.json`, checked by its sha256."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

#: sha256 of CLINC150's `data/data_full.json` (clinc/oos-eval at 828f8093932c8fe6ca7936c3d2e52903b1c523de).
SOURCE_SHA256 = "36923c3705a59e08fe9c3883d8bc2dd966ef93e22cb78ac41171782a698d56e0"
#: Messages taken of each label: the first this many of its `train` and `test` lists, in file order.
TAKEN = {"train": 50, "test": 20}
QUESTION = {
    "type": "choice",
    "instructions": "Which request does the bank customer's message make?",
    "criteria": {
        "bill_balance": "how much is owed on a bill",
        "bill_due": "when a bill is due",
        "pay_bill": "to pay a bill",
        "min_payment": "the minimum payment due on a card or loan",
        "balance": "the balance of a bank account",
        "transactions": "the recent transactions on an account",
        "spending_history": "how much was spent over a period or on something",
        "transfer": "to move money to another account or person",
    },
}
LABELS = list(QUESTION["criteria"])


def messages(source: Path) -> list[dict[str, Any]]:
    """The question's messages from a local copy of CLINC150's `data_full.json` (checked by its sha256):
    for each label, the first TAKEN of its `train` and `test` messages, each with its split, label and
    rank among that label's messages of that split. The dataset stays where the user keeps it."""
    raw = source.read_bytes()
    if hashlib.sha256(raw).hexdigest() != SOURCE_SHA256:
        raise SystemExit(f"{source} is not CLINC150's data_full.json at the recorded commit (sha256 differs)")
    data = json.loads(raw)
    rows = []
    for split, taken in TAKEN.items():
        for label in LABELS:
            texts = [text for text, intent in data[split] if intent == label][:taken]
            rows += [{"split": split, "label": label, "index": i, "text": text} for i, text in enumerate(texts)]
    return rows
