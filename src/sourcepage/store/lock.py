"""The store's writer lock: one ingest at a time.

Two ingests into one store interleaved their documents and both exited 0, leaving a
store that matched neither manifest. ``writer_lock`` takes an exclusive ``flock`` on
``<store>/.ingest.lock`` without waiting; the second ingest gets :class:`StoreBusy` at
once, naming the process that holds the lock. The kernel drops the lock when its
holder exits, however it exits (kill -9 included), so a crash never leaves the store
locked.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sourcepage.store.schema import StoreError

__all__ = ["EDIT_LOCK_NAME", "LOCK_NAME", "StoreBusy", "edit_lock", "editing", "pid_alive", "writer_lock"]

LOCK_NAME = ".ingest.lock"
#: held for a whole change of the library (add, replace, withdraw, restore: ingest, then
#: the indexes), one at a time; while it is held searches keep their loaded indexes
EDIT_LOCK_NAME = ".edit.lock"


class StoreBusy(StoreError):
    """Another process is writing the store."""


@contextmanager
def writer_lock(store: str | Path, what: str = "ingest") -> Iterator[None]:
    """Hold the store's writer lock for the block (StoreBusy when another holds it)."""
    folder = Path(store)
    folder.mkdir(parents=True, exist_ok=True)
    with _held(
        folder / LOCK_NAME,
        what,
        lambda holder: f"another ingest is writing {folder} ({holder or 'another process'}); "
        "wait for it to finish, then run this again",
    ):
        yield


@contextmanager
def edit_lock(store: str | Path, what: str) -> Iterator[None]:
    """Hold the store's edit lock for a change of its library (StoreBusy, naming the change
    under way, when another holds it). flock: per open file, so a second change in the same
    process is refused too, and a killed process never leaves it held."""
    with _held(
        Path(store) / EDIT_LOCK_NAME,
        what,
        lambda holder: f"the library of {store} is being changed ({holder or 'another change'}); "
        "wait for it to finish",
    ):
        yield


@contextmanager
def _held(path: Path, what: str, busy: Callable[[str], str]) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` for the block, without waiting: StoreBusy with
    ``busy(holder)`` (the holder as it wrote itself into the file) when another holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 300, 0).decode("utf-8", "replace").strip()
            raise StoreBusy(busy(holder)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{what}, pid {os.getpid()}".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (it may belong to another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def editing(store: str | Path) -> bool:
    """Whether a change of the store's library is under way (its edit lock is held)."""
    path = Path(store) / EDIT_LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
