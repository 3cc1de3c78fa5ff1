"""`uv run python -m evals.heads.collect --clinc data_full.json --out FILE [--train N]`: each message of
the CLINC150 banking question (`CLINC150.md`) read once on the embedded default, with its hidden state.

The question is one choice over 8 confusable banking intents (`QUESTION`), asked exactly as
`/v1/systemone` asks it (openjev's own engine, in this process, default settings) of the embedded
default model on llama.cpp; the readout of the message also returns the model's final hidden state at
the answer position (the same decode). Each row appended to `--out` as it arrives (a stopped run
resumes, a torn last line is dropped): the message's split, label and index, the answer's label
probabilities, the hidden state (float16, base64) and the seconds the request took. Order (`ordered`):
messages 0-4 of every label of both splits, then 5-9, 10-19 and 20-49, so a run stopped early still
holds whole learning-curve points. `--model`: another model than the embedded default; `--threads`:
llama.cpp's threads (on a loaded machine one thread spins less: 143 tokens of the 0.5B model took 6 s
with one, 14 to 17 s with two, at a load average of 13 on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from openjev.backends.base import Backend, LabelLogprobs, ReadoutCall
from openjev.backends.embedded import LlamaCppBackend
from openjev.config import Settings
from openjev.engine import Engine
from openjev.prompting.tokenizer import ChatTokenizer
from openjev.request.schema import SystemOneRequest

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
TRAIN_STEPS = (5, 10, 20, 50)


class HiddenReading(Backend):
    """`inner` with every readout asking for the hidden state; keeps the state of the longest prompt read
    (the message's readout: the others are content-free ones)."""

    def __init__(self, inner: LlamaCppBackend) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.last: tuple[int, np.ndarray] | None = None

    async def readout(self, call: ReadoutCall) -> LabelLogprobs:
        return (await self.readout_batch([call]))[0]

    async def readout_batch(self, calls: Sequence[ReadoutCall]) -> list[LabelLogprobs]:
        asked = [
            ReadoutCall(c.rid, c.input_ids, c.label_token_ids, c.ids_in_vocabulary, hidden_state=True) for c in calls
        ]
        found = await self.inner.readout_batch(asked)
        for call, one in zip(calls, found, strict=True):
            if one.hidden_state is not None and (self.last is None or len(call.input_ids) > self.last[0]):
                self.last = (len(call.input_ids), one.hidden_state)
        return found

    @property
    def context_length(self) -> int | None:
        return self.inner.context_length

    @property
    def vocab_size(self) -> int | None:
        return self.inner.vocab_size


def ordered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Test messages 0-4 and train messages 0-4 of every label, then 5-9 of each, then 10-19, 20-49."""
    found = []
    for low, high in zip((0, *TRAIN_STEPS), TRAIN_STEPS, strict=False):
        for split in ("train", "test"):
            found += [row for row in rows if row["split"] == split and low <= row["index"] < high]
    return found


def done(path: Path) -> set[tuple[str, str, int]]:
    if not path.exists():
        return set()
    keys = set()
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line: read again
        keys.add((row["split"], row["label"], row["index"]))
    return keys


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


def drop_torn_line(out: Path) -> None:
    text = out.read_text() if out.exists() else ""
    if text and not text.endswith("\n"):
        out.write_text(text[: text.rfind("\n") + 1])


async def collect(source: Path, out: Path, train: int, model: str | None, threads: int | None) -> None:
    backend = LlamaCppBackend(model, threads=threads)
    await backend.start()
    reading = HiddenReading(backend)
    assert backend.tokenizer_dir is not None
    engine = Engine(Settings(), ChatTokenizer(backend.tokenizer_dir), reading)
    seen = done(out)
    every = ordered(messages(source))
    rows = [row for row in every if row["index"] < train]
    drop_torn_line(out)
    with out.open("a") as file:
        for number, row in enumerate(rows):
            if (row["split"], row["label"], row["index"]) in seen:
                continue
            started = time.monotonic()
            reading.last = None
            body = {"model": "jev-latest", "state": row["text"], "questions": {"q": QUESTION}}
            request = SystemOneRequest.model_validate(body)
            evaluation = await engine.evaluate(engine.prepare(request))
            probabilities = evaluation.answers["q"]["probabilities"]
            assert reading.last is not None
            state = base64.b64encode(reading.last[1].astype(np.float16).tobytes()).decode()
            answered = [probabilities[label] for label in LABELS]
            seconds = round(time.monotonic() - started, 2)
            # The message's text stays out of the run: the dataset is the user's copy, not the repository's.
            where = {key: row[key] for key in ("split", "label", "index")}
            record = {**where, "probabilities": answered, "hidden": state, "seconds": seconds}
            file.write(json.dumps(record) + "\n")
            file.flush()
            print(f"{number + 1}/{len(rows)} {row['split']} {row['label']} {record['seconds']} s", flush=True)
    await backend.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clinc", type=Path, required=True, help="a local copy of CLINC150's data/data_full.json")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--train", type=int, default=20, help="messages per label and split to read (at most 20 test)")
    parser.add_argument("--model", help="OPENJEV_LOCAL_MODEL of the model to read (default: the embedded default)")
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: the cores this process may use)")
    args = parser.parse_args()
    asyncio.run(collect(args.clinc, args.out, args.train, args.model, args.threads))


if __name__ == "__main__":
    main()
