"""Resource limits on work done for untrusted input: a PDF to extract, a page to render.

A PDF is input from outside: a 2 MB file can inflate to gigabytes, hold thousands of
pages, or take minutes to parse. Extraction and rendering therefore run in worker
processes (:class:`sourcepage.executor.LimitedPool`) with an address-space limit
(``RLIMIT_AS``) and a wall-time limit per job, and check page counts and pixel counts
before they start. A document that hits a limit is skipped with that reason; a page
that would render too large is rendered at a smaller scale.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EXTRACT_LIMITS", "RENDER_LIMITS", "LimitExceeded", "Limits"]


@dataclass(frozen=True)
class Limits:
    """What one job may use.

    ``memory_mb``: address space (``RLIMIT_AS``) a worker may add to what it holds when
    it starts (the interpreter and its imports), in MiB.
    ``seconds``: wall time of one job (one document, one page), then the worker is killed.
    ``pages``: pages a document may have (more: it is skipped).
    ``pixels``: pixels of one rendered page image (more: the scale is lowered).
    """

    memory_mb: int = 1024
    seconds: float = 300.0
    pages: int = 5000
    pixels: int = 25_000_000

    def __post_init__(self) -> None:
        for name in ("memory_mb", "seconds", "pages", "pixels"):
            if not getattr(self, name) > 0:
                raise ValueError(f"limit {name} must be positive, got {getattr(self, name)!r}")

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_mb) << 20


class LimitExceeded(Exception):
    """A job stopped at a limit: ``limit`` is ``memory``, ``time``, ``pages`` or
    ``crash``; the message says which limit and its value, in words."""

    def __init__(self, limit: str, message: str):
        super().__init__(message)
        self.limit = limit

    def __reduce__(self) -> tuple[type, tuple[str, str]]:  # picklable across processes
        return (type(self), (self.limit, str(self)))


#: defaults of ingest (one document a job)
EXTRACT_LIMITS = Limits()
#: defaults of the web service (one page image a job)
RENDER_LIMITS = Limits(memory_mb=1024, seconds=30.0)
