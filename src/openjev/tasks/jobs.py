"""Fits as jobs: one asyncio task per fit, its progress and events, cancel, and its readouts kept.

A job's id is the task's (a hash of question, examples and model), so identical fits posted while one
runs share that job. Each readout is appended, as it arrives, to `<tasks dir>/fits/<id>.jsonl`
(`KeptReadouts`); a fit stopped by a cancel, a client that left or a restart, and posted again,
reads only what it lacks. The file goes when the fit ends in a task or is refused; a cancelled or
interrupted one keeps it. Jobs are held in memory (the newest `KEPT_JOBS` finished ones with them);
the task a job made is in the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

from openjev.errors import RequestRejected

log = logging.getLogger(__name__)
#: Finished jobs kept for `GET`, newest last; running ones are always kept.
KEPT_JOBS = 64
#: Events a job keeps, newest last.
KEPT_EVENTS = 50


class KeptReadouts(MutableMapping[str, Any]):
    """Readouts by request key, appended to a JSON-lines file as they arrive and read back from it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._items: dict[str, Any] = {}
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            if not text.endswith("\n") and text:
                # A torn last line (a process died mid-write) goes, so the next entry starts a line of its own.
                path.write_text(text[: text.rfind("\n") + 1], encoding="utf-8")
            for line in text.splitlines():
                with contextlib.suppress(ValueError, TypeError, KeyError):  # a torn last line is read again
                    entry = json.loads(line)
                    self._items[str(entry["key"])] = entry["readouts"]

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._items[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as file:
            file.write(json.dumps({"key": key, "readouts": value}) + "\n")

    def __delitem__(self, key: str) -> None:
        raise TypeError("kept readouts are never removed one by one")

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


Run = Callable[[MutableMapping[str, Any], Callable[[int, int], None]], Awaitable[dict[str, Any]]]


class FitJob:
    def __init__(self, identifier: str, kept: KeptReadouts) -> None:
        self.id = identifier
        self.kept = kept
        self.status = "running"
        self.done = self.total = 0
        self.events: list[dict[str, Any]] = []
        self.document: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.task: asyncio.Task[None] | None = None
        #: Clients waiting on it, and whether one posted it in the background: it runs on without them.
        self.waiters = 0
        self.detached = False
        self.event(f"started; {len(kept)} readouts kept from before")

    def event(self, what: str) -> None:
        self.events = [*self.events[-(KEPT_EVENTS - 1) :], {"at": time.time(), "event": what}]

    def progress(self, done: int, total: int) -> None:
        self.done, self.total = done, total

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "progress": {"readouts_done": self.done, "readouts_planned": self.total},
            "events": self.events,
        }


class FitJobs:
    def __init__(self, directory: Path) -> None:
        self.directory = directory / "fits"
        self._jobs: dict[str, FitJob] = {}

    def get(self, identifier: str) -> FitJob | None:
        return self._jobs.get(identifier)

    def start(self, identifier: str, run: Run) -> FitJob:
        """The running job for `identifier`, or a new one running `run(kept, progress)`."""
        job = self._jobs.get(identifier)
        if job is not None and job.status == "running":
            job.event("an identical fit was posted: it shares this job")
            return job
        job = FitJob(identifier, KeptReadouts(self.directory / f"{identifier}.jsonl"))
        self._jobs.pop(identifier, None)
        self._jobs[identifier] = job
        job.task = asyncio.ensure_future(self._run(job, run))
        self._forget_old()
        return job

    async def _run(self, job: FitJob, run: Run) -> None:
        try:
            job.document = await run(job.kept, job.progress)
        except asyncio.CancelledError:
            job.status = "cancelled"
            job.event(f"cancelled; {len(job.kept)} readouts kept for a fit posted again")
            return
        except Exception as error:  # the job reports it; the route renders it as the error response it is
            job.status, job.error = "failed", error
            job.event(f"failed: {error}")
            if isinstance(error, RequestRejected):
                job.kept.path.unlink(missing_ok=True)
            else:
                log.exception("fit %s failed", job.id)
            return
        job.status = "done"
        job.event("done: the task is stored")
        job.kept.path.unlink(missing_ok=True)

    def cancel(self, identifier: str) -> FitJob | None:
        job = self._jobs.get(identifier)
        if job is not None and job.task is not None and job.status == "running":
            job.task.cancel()
        return job

    def _forget_old(self) -> None:
        finished = [key for key, job in self._jobs.items() if job.status != "running"]
        for key in finished[: max(0, len(finished) - KEPT_JOBS)]:
            del self._jobs[key]
