"""Where independent jobs run: in this process, or in a pool of worker processes.

An executor has ``map(fn, items) -> list``, the results in the order of ``items``, and
``imap``, the same each as it comes while the later jobs run. Ingest extracts documents
and ``retrieval.index`` builds and embeds through one; every executor gives the same results.

``make_executor`` chooses by name or worker count: ``"inline"`` (or 1 worker) runs the jobs
in this process; ``"process"`` (or N > 1 workers) in N spawned processes (``"process:N"``;
alone, one a core), started on first use and reused until ``close``: ``fn`` must be a
module-level function, ``items`` and results picklable. A job's exception is raised by
``map`` (catch inside ``fn`` to keep the other results).

``"ray"`` runs the jobs as Ray tasks (:class:`RayExecutor`) on a local, loopback-only Ray
started for this executor; ``"ray:ADDRESS"`` joins a running cluster (whose nodes have
sourcepage installed and see the same paths). Ray is imported only then.

:class:`LimitedPool` runs jobs on untrusted input (a PDF to extract, a page to render)
in worker processes under :class:`~sourcepage.limits.Limits` (``RLIMIT_AS`` and a wall
time per job). A job that breaks one ends its worker and gives
:class:`~sourcepage.limits.LimitExceeded`; ``settle`` returns every job's result or
exception, so one bad document does not sink the others. Its workers are forked from a
forkserver (clean, single-threaded, started once per process): tens of milliseconds each.

Every worker of either pool dies with the process that started it (:func:`die_with_parent`),
and a program a worker runs (``tesseract``) dies with the worker
(:func:`child_dies_with_parent`): a killed ``ingest --workers 2`` leaves no process behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import select
import signal
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol, TypeVar

from sourcepage.limits import LimitExceeded, Limits

T = TypeVar("T")
R = TypeVar("R")

__all__ = [
    "Executor",
    "InProcess",
    "LimitedPool",
    "ProcessPool",
    "RayExecutor",
    "child_dies_with_parent",
    "die_with_parent",
    "make_executor",
]


class Executor(Protocol):
    """Runs ``fn`` over ``items``; results in the order of ``items`` (``imap``: as they come)."""

    workers: int

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]: ...

    def imap(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]: ...

    def close(self) -> None: ...


class InProcess:
    """Every job in this process, one after another."""

    name = "inline"
    workers = 1

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        return list(self.imap(fn, items))

    def imap(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        return map(fn, list(items))

    def close(self) -> None:
        pass

    def __enter__(self) -> InProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class ProcessPool:
    """Jobs over ``workers`` spawned processes (no fork: torch and BLAS threads may run here)."""

    name = "process"

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        return list(self.imap(fn, items))

    def imap(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """``map``'s results, each as it comes: every job is queued at once, so the workers go
        on while the caller handles a result."""
        items = list(items)
        if not items:
            return iter(())
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=mp.get_context("spawn"), initializer=die_with_parent
            )
        return self._pool.map(fn, items)

    def close(self) -> None:
        """Stop the workers, dropping the jobs not started (an interrupted build stops at once)."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def __enter__(self) -> ProcessPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class RayExecutor:
    """Jobs as Ray tasks (one CPU each), results in order.

    ``address`` None starts a local Ray for this executor: loopback only (no port on
    another interface), no dashboard, no usage statistics, ``cpus`` CPUs (default every
    core), its logs and sockets in a temporary folder removed at ``close``. An address
    joins that cluster (``host:port`` of its head, or ``ray://host:10001``); ``close``
    then only disconnects. A Ray already initialised in this process is used as it is,
    and left running."""

    name = "ray"

    def __init__(self, address: str | None = None, cpus: int | None = None):
        ray = _import_ray()
        self._ray = ray
        self._temp: str | None = None
        self._owner = not ray.is_initialized()
        if self._owner:
            if address is None:
                import tempfile

                from ray._private import ray_constants

                # a Ray imported before _import_ray set the variable: this process's copy too
                ray_constants.ENABLE_RAY_CLUSTER = False
                self._temp = tempfile.mkdtemp(prefix="sourcepage-ray-")
                ray.init(
                    address="local",
                    num_cpus=cpus or os.cpu_count() or 1,
                    include_dashboard=False,
                    log_to_driver=False,
                    configure_logging=False,
                    _temp_dir=self._temp,
                    # workers with this machine's BLAS/torch threads, as a pool worker has (Ray
                    # would force 1): LSA's scores differ in the last bits with the thread count
                    runtime_env={
                        "env_vars": {
                            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS") or str(os.cpu_count() or 1)
                        }
                    },
                )
            else:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._task = ray.remote(num_cpus=1, max_retries=0)(_apply)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        refs = [self._task.remote(fn, x) for x in items]
        return self._get(refs) if refs else []

    def imap(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        return (self._get(ref) for ref in [self._task.remote(fn, x) for x in items])

    def _get(self, refs: Any) -> Any:
        try:
            return self._ray.get(refs)
        except self._ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)  # the job's own exception, as a process pool raises it
            raise (cause if isinstance(cause, BaseException) else e.as_instanceof_cause()) from None

    def close(self) -> None:
        if self._owner and self._ray.is_initialized():
            self._ray.shutdown()
        self._owner = False
        if self._temp is not None:
            import shutil

            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _apply(fn: Callable[[T], R], item: T) -> R:
    """One Ray task: ``fn`` (a module-level function, pickled by name) on ``item``."""
    return fn(item)


def _import_ray() -> Any:
    """Ray, with a local cluster kept on the loopback interface and without usage
    statistics (read from the environment by this process when Ray is first imported, and
    by the processes a local cluster starts)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # off: a node's address is the loopback one (Ray's rule for a single-machine OS)
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError as e:
        raise ValueError(
            "the Ray executor needs the package ray: pip install 'sourcepage[ray]' (or pip install ray)"
        ) from e
    return ray


def make_executor(spec: str | int | None = None) -> InProcess | ProcessPool | RayExecutor:
    """An executor by name (``"inline"``, ``"process"``, ``"process:N"``, ``"ray"``,
    ``"ray:ADDRESS"``) or by worker count (1 or fewer, or None: in process; N > 1: a pool
    of N processes)."""
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
    if name == "ray":
        return RayExecutor(count or None)
    raise ValueError(f"unknown executor {spec!r}; use inline, process, process:N, ray or ray:ADDRESS")


# --------------------------------------------------------------------------- workers


def _set_deathsig() -> None:
    """Ask the kernel to SIGKILL this process when the thread that forked it ends
    (``PR_SET_PDEATHSIG``, Linux; elsewhere nothing)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def die_with_parent(deathsig: bool = False, owner: int | None = None) -> None:
    """Make this worker process exit when its parent process dies, or ``owner`` (the
    process that asked for it: a forkserver's worker outlives its client otherwise, and
    the forkserver waits for its workers) does.

    A daemon thread checks every 0.2 s whether the process was re-parented (its parent
    died) or the owner ended (a pidfd, so a reused PID cannot fool it) and then exits at
    once; with ``deathsig`` the kernel also sends SIGKILL on the parent's death
    (``PR_SET_PDEATHSIG``, Linux; only for a parent that is single-threaded, as the
    forkserver is, because the signal follows the parent *thread*)."""
    parent = os.getppid()
    if deathsig:
        _set_deathsig()
    watched: list[int] = []
    if owner is not None and owner != parent:
        try:
            watched.append(os.pidfd_open(owner))
        except ProcessLookupError:
            os._exit(1)
        except (OSError, AttributeError):  # no pidfd here: the parent alone is watched
            pass

    def watch() -> None:
        while True:
            if os.getppid() != parent or (watched and select.select(watched, [], [], 0)[0]):
                os._exit(1)
            time.sleep(0.2)

    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


def child_dies_with_parent() -> Callable[[], None]:
    """A ``preexec_fn`` for ``subprocess``: the child (``tesseract``) is SIGKILLed when
    this process ends, also by SIGKILL at a time limit, instead of living on under PID 1.
    The prctl function is looked up here, before the fork; the child only calls it."""
    parent = os.getpid()
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return lambda: None

    def preexec() -> None:
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the line above
            os._exit(1)

    return preexec


def _address_space() -> int:
    """This process's virtual memory size in bytes (0 where /proc is not there)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _limited_worker(conn: Connection, memory_bytes: int, owner: int) -> None:
    """A LimitedPool worker: jobs ``(fn, item)`` in, ``(kind, value)`` out, under RLIMIT_AS
    set to what the worker holds at start plus ``memory_bytes``; it ends when the
    forkserver or the pool's ``owner`` process does."""
    import resource

    die_with_parent(deathsig=True, owner=owner)
    limit = _address_space() + memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        fn, item = job
        try:
            out: tuple[str, Any] = ("ok", fn(item))
        except MemoryError:
            out = ("memory", None)
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the caller
            out = ("error", e)
        try:
            conn.send(out)
        except MemoryError:
            conn.send(("memory", None))
        except Exception as e:  # an unpicklable result or exception
            conn.send(("error", RuntimeError(f"{type(e).__name__}: {e}")))
        if out[0] == "memory":
            return


_DIED = {signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGTRAP, signal.SIGKILL}


class _Worker:
    def __init__(self, ctx: Any, limits: Limits):
        self.conn, child = ctx.Pipe()
        args = (child, limits.memory_bytes, os.getpid())
        self.process = ctx.Process(target=_limited_worker, args=args, daemon=True)
        self.process.start()
        child.close()

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            self.process.kill()
        self.process.join(5)
        self.conn.close()


def _kill_all(workers: list[_Worker]) -> None:
    for w in workers:
        w.kill()
    workers.clear()


class LimitedPool:
    """Jobs in ``workers`` forked processes under ``limits`` (memory and time per job).

    Not thread-safe: callers from several threads share one pool behind a lock.
    ``preload`` names modules the forkserver imports once (when this pool starts it),
    so that workers start without importing them again; the main module is among them
    (else every worker would import it again, as spawned processes do)."""

    name = "limited"

    def __init__(self, workers: int = 1, limits: Limits | None = None, preload: Sequence[str] = ()):
        self.workers = max(1, workers)
        self.limits = limits or Limits()
        self._ctx = mp.get_context("forkserver")
        self._ctx.set_forkserver_preload(["__main__", *preload])
        self._idle: list[_Worker] = []
        self._all: list[_Worker] = []
        self._finalizer = weakref.finalize(self, _kill_all, self._all)

    def _worker(self) -> _Worker:
        if self._idle:
            return self._idle.pop()
        w = _Worker(self._ctx, self.limits)
        self._all.append(w)
        return w

    def _retire(self, w: _Worker) -> None:
        w.kill()
        if w in self._all:
            self._all.remove(w)

    def _died(self, w: _Worker) -> LimitExceeded:
        w.process.join(5)
        code = w.process.exitcode
        self._retire(w)
        if code is not None and code < 0 and -code in _DIED:
            how = signal.Signals(-code).name
            mb = self.limits.memory_mb
            return LimitExceeded("memory", f"stopped at the memory limit of {mb} MiB (worker ended by {how})")
        return LimitExceeded("crash", f"the worker process ended unexpectedly (exit code {code})")

    def settle(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R | BaseException]:
        """Each job's result, or the exception it raised, or LimitExceeded; in order."""
        items = list(items)
        results: list[Any] = [None] * len(items)
        todo = deque(enumerate(items))
        busy: dict[_Worker, tuple[int, float]] = {}
        while todo or busy:
            while todo and len(busy) < self.workers:
                i, item = todo.popleft()
                w = self._worker()
                try:
                    w.conn.send((fn, item))
                except (OSError, ValueError):  # a worker that died while idle: use a new one
                    self._retire(w)
                    todo.appendleft((i, item))
                    continue
                busy[w] = (i, time.monotonic() + self.limits.seconds)
            next_deadline = min(d for _, d in busy.values())
            waitables: list[Any] = [w.conn for w in busy] + [w.process.sentinel for w in busy]
            wait(waitables, timeout=max(0.0, next_deadline - time.monotonic()))
            for w, (i, deadline) in list(busy.items()):
                done: Any = None
                if w.conn.poll():
                    try:
                        kind, value = w.conn.recv()
                    except (EOFError, OSError):
                        done = self._died(w)
                    else:
                        if kind == "ok":
                            done = (value,)
                            self._idle.append(w)
                        elif kind == "error":
                            done = value
                            self._idle.append(w)
                        else:
                            w.process.join(5)
                            self._retire(w)
                            done = LimitExceeded(
                                "memory", f"stopped at the memory limit of {self.limits.memory_mb} MiB"
                            )
                elif not w.process.is_alive():
                    done = self._died(w)
                elif time.monotonic() >= deadline:
                    self._retire(w)
                    done = LimitExceeded("time", f"stopped at the time limit of {self.limits.seconds:g} s")
                if done is not None:
                    del busy[w]
                    results[i] = done[0] if isinstance(done, tuple) else done
        return results

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Results in order; the first job's exception (or LimitExceeded) is raised."""
        results = self.settle(fn, items)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return results  # type: ignore[return-value]

    def imap(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        return iter(self.map(fn, items))  # every job settled first

    def close(self) -> None:
        for w in self._idle:
            with contextlib.suppress(OSError, ValueError):
                w.conn.send(None)
        for w in self._idle:
            w.process.join(1)
        self._idle.clear()
        _kill_all(self._all)

    def __enter__(self) -> LimitedPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
