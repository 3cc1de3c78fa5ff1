"""`openjev eval` and `openjev classify` as functions: rows in, answers and figures out.

Both ask the rows of one file of any Jev server (`url`) or, without one, of the embedded default
started for the run. `classify` writes each row's answer to a JSONL file as it arrives and resumes a
run that stopped (keeping only answers made for the same row, question and server: `answers_file.py`).
`eval` does the same into `OUT/answers.jsonl`, then judges every answered row against its gold
(`evaluation.py`). Rows that got no answer (a 4xx, or overload past the retry deadline) are counted as
errors and left out of the figures, never scored as wrong. When a run ends, however it ends, its
answers file holds one record per row (`answers_file.compact`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openjev.batch.answers_file import Opened, compact
from openjev.batch.asking import answer_rows
from openjev.batch.client import Sending
from openjev.batch.local_server import embedded_server
from openjev.batch.progress import Progress
from openjev.batch.rows import Row


@dataclass(frozen=True)
class Target:
    """The server asked: a URL, or None for the embedded default started for the run."""

    url: str | None
    api_key: str | None = None
    model: str = "jev-latest"
    concurrency: int = 4
    sending: Sending = field(default_factory=Sending)


@contextlib.contextmanager
def served(target: Target) -> Iterator[str]:
    if target.url is not None:
        yield target.url
    else:
        with embedded_server() as url:
            yield url


def answer_file(
    rows: list[Row],
    target: Target,
    answers_path: Path,
    opened: Opened,
    progress: Progress,
    on_served: Callable[[str], None] = lambda url: None,
) -> dict[str, Any]:
    """Every row asked whose answer in `opened` does not stand (`batch/answers_file.py`); the records by row id.
    `on_served` gets the server's URL before the first row is asked. However the run ends, the answers
    file is compacted to one record per row."""
    try:
        with served(target) as url:
            on_served(url)
            return asyncio.run(
                answer_rows(
                    rows,
                    url=url,
                    opened=opened,
                    answers_path=answers_path,
                    api_key=target.api_key,
                    model=target.model,
                    concurrency=target.concurrency,
                    progress=progress,
                    sending=target.sending,
                )
            )
    finally:
        compact(answers_path, rows)
