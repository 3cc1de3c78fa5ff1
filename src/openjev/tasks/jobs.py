"""Fits as jobs: one asyncio task per fit, its progress and events, cancel, and its readouts kept.

A job's id is the task's (a hash of question, examples and model), so identical fits posted while one
runs share that job. Each readout is appended, as it arrives, to `<tasks dir>/fits/<id>.jsonl`
(`KeptReadouts`); a fit stopped by a client that left or a restart, and posted again, reads only
what it lacks (one that failed on the way, overloaded say, too). A readout is what it is under the answer
settings it was read with (`answering/answer_settings.py`, the settings a task is stamped with): the
file's first line names them, and a file kept under other ones (a restart with another answer cue, say)
is started again, its readouts read anew, never mixed with the new ones. The file goes when the fit is
refused or cancelled (`cancel`: `DELETE /v1/tasks/fits/{id}`); one that ends in a task is kept beside
the task (`growing.ReadoutFiles`). The files kept count with
the tasks against OPENJEV_TASK_MAX_TASKS (`make_room`: the oldest of fits not running go first).

At most OPENJEV_TASK_MAX_FITS jobs run at once: `start` refuses one more with `Overloaded` (a 529 with
Retry-After), before it reads anything. Jobs are held in memory (the newest `KEPT_JOBS` finished ones
with them); the task a job made is in the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

from openjev.answering.answer_settings import as_stamped_now
from openjev.collector import frozen
from openjev.errors import OpenJevError, Overloaded, RequestRejected

log = logging.getLogger(__name__)
#: Finished jobs kept for `GET`, newest last; running ones are always kept.
KEPT_JOBS = 64
#: Events a job keeps, newest last.
KEPT_EVENTS = 50


class KeptReadouts(MutableMapping[str, Any]):
    """Readouts by request key, appended to a JSON-lines file as they arrive and read back from it, under
    the answer settings its first line names (module doc): a file under others is started again and
    `discarded` says how many readouts went with it."""

    def __init__(self, path: Path, answer_settings: dict[str, Any]) -> None:
        self.path = path
        self._header = json.dumps({"answer_settings": answer_settings})
        self._items: dict[str, Any] = {}
        self.discarded = 0
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            if not text.endswith("\n") and text:
                # A torn last line (a process died mid-write) goes, so the next entry starts a line of its own.
                text = text[: text.rfind("\n") + 1]
                path.write_text(text, encoding="utf-8")
            header, *lines = text.splitlines() or [""]
            if not _same_settings(header, answer_settings):
                self.discarded = len(lines)
                path.unlink()
                return
            for line in lines:
                with contextlib.suppress(ValueError, TypeError, KeyError):  # a torn last line is read again
                    entry = json.loads(line)
                    self._items[str(entry["key"])] = entry["readouts"]

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._items[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as file:
            if file.tell() == 0:
                file.write(self._header + "\n")
            file.write(json.dumps({"key": key, "readouts": value}) + "\n")

    def __delitem__(self, key: str) -> None:
        raise TypeError("kept readouts are never removed one by one")

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


def _same_settings(header: str, answer_settings: dict[str, Any]) -> bool:
    """Whether a kept file's first line names these answer settings (module doc)."""
    with contextlib.suppress(ValueError, TypeError, KeyError):
        stamped = json.loads(header)["answer_settings"]
        return as_stamped_now(stamped) == as_stamped_now(json.loads(json.dumps(answer_settings)))
    return False


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
        #: Cancelled by `FitJobs.cancel`: its readouts go with it.
        self.discarded = False
        if kept.discarded:
            self.event(f"{kept.discarded} readouts kept under other answer settings removed: read again")
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
    def __init__(self, directory: Path, max_running: int, answer_settings: dict[str, Any]) -> None:
        self.directory = directory / "fits"
        self.max_running = max_running
        #: What every readout of this server is read under (`KeptReadouts`).
        self.answer_settings = answer_settings
        self._jobs: dict[str, FitJob] = {}

    @property
    def running(self) -> int:
        return sum(job.status == "running" for job in self._jobs.values())

    def get(self, identifier: str) -> FitJob | None:
        return self._jobs.get(identifier)

    def start(self, identifier: str, run: Run) -> FitJob:
        """The running job for `identifier`, or a new one running `run(kept, progress)`."""
        job = self._jobs.get(identifier)
        if job is not None and job.status == "running":
            job.event("an identical fit was posted: it shares this job")
            return job
        if self.running >= self.max_running:
            raise Overloaded(f"{self.running} fits are running (OPENJEV_TASK_MAX_FITS={self.max_running}); retry later")
        job = FitJob(identifier, KeptReadouts(self.directory / f"{identifier}.jsonl", self.answer_settings))
        self._jobs.pop(identifier, None)
        self._jobs[identifier] = job
        job.task = asyncio.ensure_future(self._run(job, run))
        self._forget_old()
        return job

    async def _run(self, job: FitJob, run: Run) -> None:
        try:
            with frozen():  # the fit's examples out of the collector's walk while it runs (`collector.py`)
                job.document = await run(job.kept, job.progress)
        except asyncio.CancelledError:
            job.status = "cancelled"
            if job.discarded:
                job.kept.path.unlink(missing_ok=True)
                job.event(f"cancelled; its {len(job.kept)} readouts removed")
            else:
                job.event(f"cancelled; {len(job.kept)} readouts kept for a fit posted again")
            return
        except Exception as error:  # the job reports it; the route renders it as the error response it is
            job.status, job.error = "failed", error
            job.event(f"failed: {error}")
            if isinstance(error, RequestRejected):
                job.kept.path.unlink(missing_ok=True)
            elif not isinstance(error, OpenJevError):
                log.exception("fit %s failed", job.id)
            return
        job.status = "done"
        job.event("done: the task is stored")
        job.kept.path.unlink(missing_ok=True)

    def cancel(self, identifier: str) -> FitJob | None:
        """Cancel the running job and remove its readouts (module doc)."""
        job = self._jobs.get(identifier)
        if job is not None and job.task is not None and job.status == "running":
            job.discarded = True
            job.task.cancel()
        return job

    def kept_files(self) -> list[Path]:
        """The readout files kept (regular files only), oldest first."""
        if not self.directory.is_dir():
            return []
        found = [entry for entry in os.scandir(self.directory) if entry.name.endswith(".jsonl")]
        regular = [entry for entry in found if entry.is_file(follow_symlinks=False)]
        return [Path(entry.path) for entry in sorted(regular, key=lambda entry: entry.stat().st_mtime)]

    def make_room(self, room: int, identifier: str) -> bool:
        """Remove the oldest readout files of fits not running, and not `identifier`'s, until at most `room`
        are left besides that one's; False when the running fits' files alone are more."""
        running = {f"{key}.jsonl" for key, job in self._jobs.items() if job.status == "running"}
        others = [path for path in self.kept_files() if path.name != f"{identifier}.jsonl"]
        removable = [path for path in others if path.name not in running]
        for path in removable[: max(0, len(others) - room)]:
            path.unlink(missing_ok=True)
            log.info("fit readouts %s removed to make room (OPENJEV_TASK_MAX_TASKS)", path.name)
        return len(others) - len(removable) <= room

    def _forget_old(self) -> None:
        finished = [key for key, job in self._jobs.items() if job.status != "running"]
        for key in finished[: max(0, len(finished) - KEPT_JOBS)]:
            del self._jobs[key]
