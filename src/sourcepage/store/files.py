"""Atomic file writes: write to a temporary file in the same folder, fsync, rename.

A reader never sees a half-written file, and a crash leaves the previous file.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temp file beside ``path``; on success it replaces ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> Path:
    with atomic_open(path) as f:
        f.write(text)
    return Path(path)


def write_json(path: str | Path, obj: Any) -> Path:
    """JSON with sorted keys and a final newline, so equal data gives equal bytes."""
    return write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def write_jsonl(path: str | Path, rows: list[dict[str, Any]]) -> Path:
    with atomic_open(path) as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return Path(path)


#: np.load parses each .npy header with ast.literal_eval, and CPython 3.11 before 3.11.8
#: shares the AST constructor's recursion-depth counter between threads (gh-106905): two
#: requests loading indexes at once failed with "SystemError: AST constructor recursion
#: depth mismatch". The headers are read one at a time; the arrays are memory-mapped, so
#: the lock is held for microseconds.
_NPY_LOCK = threading.Lock()


def load_array(path: str | Path, mmap: bool = False) -> Any:
    """``np.load`` of a .npy file (no pickles), memory-mapped read-only when ``mmap``, as a
    plain ndarray; safe to call from several threads at once."""
    import numpy as np

    with _NPY_LOCK:
        a = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    return a.view(np.ndarray) if mmap else a
