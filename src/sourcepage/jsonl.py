"""The one JSONL line reader: a line ends at ``\\n`` and nowhere else.

``str.splitlines()`` also ends lines at U+2028, U+2029, U+0085 and others, which JSON
allows raw inside strings: a valid question whose text held one was read as two broken
lines ("invalid JSON"), so the project's own ``reviews --export`` could not be read back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

__all__ = ["LineDecodeError", "jsonl_lines"]


class LineDecodeError(UnicodeDecodeError):
    """Bytes of a line that are not UTF-8, with the line's number (``lineno``) and the
    column in it (a byte offset into a file says nothing to the person fixing it)."""

    def __init__(self, e: UnicodeDecodeError, lineno: int) -> None:
        super().__init__(e.encoding, e.object, e.start, e.end, e.reason)
        self.lineno = lineno

    def __str__(self) -> str:
        return f"line {self.lineno}: not UTF-8 ({self.reason} at byte {self.start + 1} of the line)"


def jsonl_lines(path: str | Path) -> Iterator[tuple[int, int, str]]:
    """(line number, bytes read so far, line) of every line of ``path``, decoded as UTF-8
    (a BOM at the start is dropped; a ``\\r`` before the ``\\n`` too). LineDecodeError (a
    UnicodeDecodeError naming the line) for bytes that are not UTF-8."""
    done = 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):  # a binary file splits at b"\n" only
            done += len(raw)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise LineDecodeError(e, lineno) from None
            if lineno == 1:
                line = line.removeprefix("\ufeff")
            yield lineno, done, line.rstrip("\r\n")
