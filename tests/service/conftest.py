"""The service answers from built indexes only (a request never builds one): the stores
the service tests serve have their BM25 and LSA indexes for every text version, built
once per session and copied (an index is valid for a store with the same chunks)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sourcepage.retrieval.index import build_indexes


@pytest.fixture(scope="session")
def built_indexes(safety_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """indexes/ of a copy of the session store: bm25 and lsa on raw, cleaned, enriched."""
    store = Path(shutil.copytree(safety_store, tmp_path_factory.mktemp("indexed") / "store"))
    build_indexes(store, ["raw", "cleaned", "enriched"], ["bm25", "lsa"])
    build_indexes(store, "raw", ["dense"])  # the default method (sect:route:rrf:bm25+dense) reads it
    return store / "indexes"


@pytest.fixture
def fresh_store(fresh_store: Path, built_indexes: Path) -> Path:
    shutil.copytree(built_indexes, fresh_store / "indexes", dirs_exist_ok=True)
    return fresh_store


#: seconds after which a browser test's Chromium and Playwright driver are killed: each takes
#: at most 7 s alone (2026-12-04), and a hang at 180 s took a CI run from 6.4 to 9.6 minutes
BROWSER_WATCHDOG = 60


def _descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (from /proc: psutil is not a dependency)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


@pytest.fixture
def browser_watchdog() -> Iterator[None]:
    """Once in a full run a browser test hung with every thread idle and Chromium waiting
    (not reproduced alone or under load). After ``BROWSER_WATCHDOG`` seconds the test's
    Chromium and Playwright driver are killed: the test fails with the driver's error and
    is run once more (``flaky(reruns=1)``) instead of hanging the suite."""

    def kill() -> None:
        for pid in _descendants(os.getpid()):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"chromium" in cmd or b"playwright/driver" in cmd:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    timer = threading.Timer(BROWSER_WATCHDOG, kill)
    timer.daemon = True
    timer.start()
    yield
    timer.cancel()
