"""Changes of a store's library run in the background (the library page's editor): a job
runs one change of :mod:`sourcepage.editions` in a thread and keeps its state — phase,
percent, message, the file and the error — in ``<store>/library/jobs/<id>.json``, written
atomically at each step, so that every worker process of the service reads it
(``GET /documents/jobs/{id}``) and it outlives the process.

``start`` returns once the job holds the store's edit lock, or raises StoreBusy when
another change holds it (the service answers 409): one change at a time per store.
Searches keep being served meanwhile (``api.service`` keeps the indexes it loaded while
the lock is held). When the change is done the new indexes are loaded once (phase
``loading``) so that the next search does not pay for it.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sourcepage.corpus.sources import OWN_CORPUS
from sourcepage.editions import Progress, known_error
from sourcepage.store.files import write_text
from sourcepage.store.lock import pid_alive

__all__ = ["Job", "latest_job", "read_job", "start"]

JOB_ID = re.compile(r"^[0-9a-f]{16}\Z")
#: seconds between two writes of a job's state within one phase
WRITE_EVERY = 0.2


@dataclass
class Job:
    """One change and where it is: ``phase`` is queued, reading, ingesting, indexing,
    loading, then done or failed (``error`` says why, naming the file)."""

    id: str
    kind: str  # add, replace, withdraw, restore
    doc_id: str = ""
    file: str = ""
    by: str = ""
    phase: str = "queued"
    percent: int = 0
    message: str = ""
    error: str = ""
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    pid: int = field(default_factory=os.getpid)  # the process running it

    @property
    def finished(self) -> bool:
        return self.phase in ("done", "failed")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"finished": self.finished}


def _folder(store: str | Path) -> Path:
    return Path(store) / OWN_CORPUS / "jobs"


def _write(store: str | Path, job: Job) -> None:
    write_text(_folder(store) / f"{job.id}.json", json.dumps(job.as_dict()))


def read_job(store: str | Path, job_id: str) -> Job | None:
    """The state of job ``job_id`` of ``store``, or None (no such job, or a malformed id)."""
    if not JOB_ID.match(job_id):
        return None
    try:
        d = json.loads((_folder(store) / f"{job_id}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    d.pop("finished", None)
    job = Job(**d)
    if not job.finished and not pid_alive(job.pid):
        job.phase = "failed"
        job.error = (
            f"{job.file or job.doc_id}: interrupted (the process running it, {job.pid}, ended); the next "
            "change finishes or undoes it, or `sourcepage document recover` at once"
        )
    return job


def latest_job(store: str | Path) -> Job | None:
    """The job of ``store`` started last, or None."""
    folder = _folder(store)
    files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime) if folder.is_dir() else []
    return read_job(store, files[-1].stem) if files else None


def start(
    store: str | Path,
    job: Job,
    work: Callable[[Progress], Any],
    warm: Callable[[], Any] | None = None,
) -> Job:
    """Run ``work(progress)`` (a change of :mod:`sourcepage.editions`, which takes the edit
    lock) in a thread as ``job``; returns once it holds the lock. StoreBusy (or any other
    refusal before the change began) is raised here, and no job is recorded. ``warm``
    loads the new indexes after the change."""
    job.id = job.id or secrets.token_hex(8)
    began, refused = threading.Event(), []
    last = [0.0, ""]

    def progress(phase: str, percent: int, message: str) -> None:
        t = time.monotonic()
        job.phase, job.percent = phase, max(job.percent, min(percent, 99))
        job.message = message or job.message
        if phase != last[1] or t - last[0] >= WRITE_EVERY:
            last[:] = [t, phase]
            _write(store, job)
        began.set()  # after the first write: the job's state is there to read

    def body() -> None:
        try:
            work(progress)
            if warm is not None:
                progress("loading", 97, "loading the new indexes")
                warm()
            job.phase, job.percent, job.message = "done", 100, _done(job)
        except BaseException as e:  # a job's thread must record every failure
            if not began.is_set():
                refused.append(e)
                began.set()
                return
            job.phase = "failed"
            job.error = str(e) if known_error(e) else f"{job.file or job.doc_id}: {type(e).__name__}: {e}"
        job.finished_at = time.time()
        _write(store, job)
        began.set()

    thread = threading.Thread(target=body, name=f"sourcepage-job-{job.id}", daemon=True)
    thread.start()
    began.wait()
    if refused:
        raise refused[0]
    return job


def _done(job: Job) -> str:
    what = {"add": "added", "replace": "replaced", "withdraw": "withdrawn", "restore": "restored"}[job.kind]
    return f"{job.doc_id or job.file} {what}; searches read it now"
