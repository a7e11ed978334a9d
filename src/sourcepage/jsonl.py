"""The one JSONL line reader: a line ends at ``\\n`` and nowhere else.

``str.splitlines()`` also ends lines at U+2028, U+2029, U+0085 and others, which JSON
allows raw inside strings: a valid question whose text held one was read as two broken
lines ("invalid JSON"), so the project's own ``reviews --export`` could not be read back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

__all__ = ["jsonl_lines"]


def jsonl_lines(path: str | Path) -> Iterator[tuple[int, int, str]]:
    """(line number, bytes read so far, line) of every line of ``path``, decoded as UTF-8
    (a BOM at the start is dropped; a ``\\r`` before the ``\\n`` too). UnicodeDecodeError
    for bytes that are not UTF-8."""
    done = 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):  # a binary file splits at b"\n" only
            done += len(raw)
            line = raw.decode("utf-8")
            if lineno == 1:
                line = line.removeprefix("\ufeff")
            yield lineno, done, line.rstrip("\r\n")
