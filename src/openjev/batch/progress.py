"""What a run of `eval` or `classify` shows while it works: rows done of the total, rate, ETA, retries
and errors. On a terminal a rich progress bar; otherwise (a log, CI) one plain line every
PLAIN_EVERY_S seconds and a last one at the end, so a long run never looks stuck.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.progress import Progress as Bar

PLAIN_EVERY_S = 10.0


class Progress:
    """Counts of one run; `started`, `retried` and `finished` are called by the client as it goes."""

    def __init__(self, total: int, stream: TextIO | None = None, every_s: float = PLAIN_EVERY_S) -> None:
        self.total, self.stream, self.every_s = total, stream or sys.stderr, every_s
        self.done = self.kept = self.errors = 0
        self.retries: Counter[str] = Counter()
        self.began = self.shown = time.monotonic()
        self.bar: Bar | None = None
        self.task: Any = None

    def __enter__(self) -> Progress:
        if self.stream.isatty():
            self.bar = Bar(
                TextColumn("answering"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[counts]}"),
                console=Console(file=self.stream),
            )
            self.bar.__enter__()
            self.task = self.bar.add_task("answering", total=self.total, rate="", counts="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
        elif self.done:
            self._say(self.line())

    def started(self, kept: int, *, changed: int, other_server: int, lost: int) -> None:
        self.kept = kept
        lines = [f"{self.total} rows, {kept} already answered"]
        if changed:
            lines.append(f"{changed} answers were made for another state or question: asked again")
        if other_server:
            lines.append(f"{other_server} answers came from another served model or answer settings: asked again")
        if lost:
            lines.append(f"{lost} lost records (a torn or unreadable line) repaired: their rows are asked again")
        self._say("; ".join(lines))
        self._update()

    def retried(self, reason: str) -> None:
        self.retries[reason] += 1
        self._update()

    def finished(self, record: dict[str, Any]) -> None:
        self.done += 1
        self.errors += "error" in record
        self._update()

    def retry_text(self) -> str:
        counts = ", ".join(f"{reason}: {n}" for reason, n in sorted(self.retries.items()))
        return f"{sum(self.retries.values())} retries" + (f" ({counts})" if counts else "")

    def line(self) -> str:
        rate = self.done / max(time.monotonic() - self.began, 1e-9)
        left = self.total - self.kept - self.done
        eta = f"ETA {left / rate:.0f} s" if rate > 0 else "ETA -"
        return (
            f"answered {self.kept + self.done}/{self.total} rows, {rate:.1f} rows/s, {eta}, "
            f"{self.retry_text()}, {self.errors} errors"
        )

    def _update(self) -> None:
        if self.bar is not None:
            rate = self.done / max(time.monotonic() - self.began, 1e-9)
            counts = f"{self.retry_text()}, {self.errors} errors"
            self.bar.update(self.task, completed=self.kept + self.done, rate=f"{rate:.1f} rows/s", counts=counts)
        elif time.monotonic() - self.shown >= self.every_s:
            self._say(self.line())

    def _say(self, text: str) -> None:
        self.shown = time.monotonic()
        if self.bar is not None:
            self.bar.console.print(text)
        else:
            print(text, file=self.stream, flush=True)
