"""Where independent jobs run: in this process, or in a pool of worker processes.

An executor has one method, ``map(fn, items) -> list``: the results of ``fn`` over
``items``, in the order of ``items``. Ingest extracts documents through one, and
``retrieval.index.build_indexes`` builds indexes through one; both give the same
results whichever executor runs them.

``make_executor`` chooses by name or worker count: ``"inline"`` (or 1 worker) runs the
jobs one after another in this process; ``"process"`` (or N > 1 workers) runs them in N
spawned processes (``"process:N"``; ``"process"`` alone uses every core). A process
pool needs ``fn`` to be a module-level function and ``items`` and the results to be
picklable; it is started on the first ``map`` that has work, and reused until
``close``. An exception in a job is raised by ``map`` (catch inside ``fn`` to keep the
other results).
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["Executor", "InProcess", "ProcessPool", "make_executor"]


class Executor(Protocol):
    """Runs ``fn`` over ``items``; results in the order of ``items``."""

    workers: int

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]: ...

    def close(self) -> None: ...


class InProcess:
    """Every job in this process, one after another."""

    name = "inline"
    workers = 1

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        return [fn(x) for x in items]

    def close(self) -> None:
        pass

    def __enter__(self) -> InProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class ProcessPool:
    """Jobs spread over ``workers`` spawned processes (no fork: torch and BLAS threads
    may already run in this one)."""

    name = "process"

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        items = list(items)
        if not items:
            return []
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=mp.get_context("spawn"))
        return list(self._pool.map(fn, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self) -> ProcessPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def make_executor(spec: str | int | None = None) -> InProcess | ProcessPool:
    """An executor by name (``"inline"``, ``"process"``, ``"process:N"``) or by worker
    count (1 or fewer, or None: in process; N > 1: a pool of N processes)."""
    if spec is None:
        return InProcess()
    if isinstance(spec, int):
        return ProcessPool(spec) if spec > 1 else InProcess()
    name, _, count = spec.strip().partition(":")
    if name == "inline" and not count:
        return InProcess()
    if name == "process":
        if not count:
            return ProcessPool()
        if count.isdigit() and int(count) >= 1:
            return ProcessPool(int(count))
    raise ValueError(f"unknown executor {spec!r}; use inline, process or process:N")
