"""Atomic file writes: write to a temporary file in the same folder, fsync, rename.

A reader never sees a half-written file, and a crash leaves the previous file.
"""

from __future__ import annotations

import json
import os
import tempfile
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
