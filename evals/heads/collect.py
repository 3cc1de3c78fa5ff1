"""`uv run python -m evals.heads.collect (--clinc data_full.json | --hwu NLU-Evaluation-Data) --out FILE
[--train N]`: each message of a heads question read once on the embedded default, with its hidden state.

The questions (`clinc150.py`, `CLINC150.md`; `hwu64.py`, `HWU64.md`) are each one choice over 8
confusable intents of a public set of real users' messages, read from the user's local copy (checked by
its sha256). Each is asked exactly as `/v1/systemone` asks it (openjev's own engine, in this process,
default settings) of the embedded default model on llama.cpp; the readout of the message also returns
the model's final hidden state at the answer position (the same decode). Each row appended to `--out` as
it arrives (a stopped run resumes, a torn last line is dropped): the message's split, label and index,
the answer's label probabilities, the hidden state (float16, base64) and the seconds the request took;
never the message's text. Order (`ordered`): messages 0-4 of every label of both splits, then 5-9,
10-19, and train 20-29, 30-39, 40-49, so a run stopped early still holds whole learning-curve points.
`--model`: another model than the embedded default; `--threads`: llama.cpp's threads (on a loaded
machine one thread spins less: 143 tokens of the 0.5B model took 6 s with one, 14 to 17 s with two, at a
load average of 13 on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from evals.heads import clinc150, hwu64
from openjev.backends.base import Backend, LabelLogprobs, ReadoutCall
from openjev.backends.embedded import LlamaCppBackend
from openjev.config import Settings
from openjev.engine import Engine
from openjev.prompting.tokenizer import ChatTokenizer
from openjev.request.schema import SystemOneRequest

#: Read in blocks of these many messages per label, so a run stopped early holds whole curve points.
READ_STEPS = (5, 10, 20, 30, 40, 50)
DATASETS: dict[str, ModuleType] = {"clinc150": clinc150, "hwu64": hwu64}


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
    """Train messages 0-4 and test messages 0-4 of every label, then 5-9 of each, then 10-19, 20-29 (train
    only from there), 30-39 and 40-49."""
    found = []
    for low, high in zip((0, *READ_STEPS), READ_STEPS, strict=False):
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


def drop_torn_line(out: Path) -> None:
    text = out.read_text() if out.exists() else ""
    if text and not text.endswith("\n"):
        out.write_text(text[: text.rfind("\n") + 1])


async def collect(
    dataset: ModuleType, source: Path, out: Path, train: int, model: str | None, threads: int | None
) -> None:
    backend = LlamaCppBackend(model, threads=threads)
    await backend.start()
    reading = HiddenReading(backend)
    assert backend.tokenizer_dir is not None
    engine = Engine(Settings(), ChatTokenizer(backend.tokenizer_dir), reading)
    seen = done(out)
    every = ordered(dataset.messages(source))
    rows = [row for row in every if row["index"] < train]
    drop_torn_line(out)
    with out.open("a") as file:
        for number, row in enumerate(rows):
            if (row["split"], row["label"], row["index"]) in seen:
                continue
            started = time.monotonic()
            reading.last = None
            body = {"model": "jev-latest", "state": row["text"], "questions": {"q": dataset.QUESTION}}
            request = SystemOneRequest.model_validate(body)
            evaluation = await engine.evaluate(engine.prepare(request))
            probabilities = evaluation.answers["q"]["probabilities"]
            assert reading.last is not None
            state = base64.b64encode(reading.last[1].astype(np.float16).tobytes()).decode()
            answered = [probabilities[label] for label in dataset.LABELS]
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
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--clinc", type=Path, help="a local copy of CLINC150's data/data_full.json")
    source.add_argument("--hwu", type=Path, help="a local copy of the NLU-Evaluation-Data repository (HWU64)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--train", type=int, default=20, help="messages per label and split to read (at most 20 test)")
    parser.add_argument("--model", help="OPENJEV_LOCAL_MODEL of the model to read (default: the embedded default)")
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: the cores this process may use)")
    args = parser.parse_args()
    dataset, path = (clinc150, args.clinc) if args.clinc else (hwu64, args.hwu)
    asyncio.run(collect(dataset, path, args.out, args.train, args.model, args.threads))


if __name__ == "__main__":
    main()
