"""Sign-in sessions of the web service, shared by every worker process of one server.

They live in ``<store>/reviewers.sqlite`` beside the accounts (the one file the service
writes), so that ``serve --workers N`` sees a sign-in on any worker from all of them
(in one worker's memory, 4-10 of 20 signed-in writes met a worker that did not know the
session). The file keeps the SHA-256 of each session id, never the id itself; a session
ends at its expiry, on sign-out, or when its reviewer's token is replaced or removed
(the caller compares ``token_sha256`` with the account's).
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from sourcepage.store.reviewers import DB_NAME

__all__ = ["StoredSession", "end_session", "find_session", "open_session"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
  sid_sha256 TEXT PRIMARY KEY, reviewer TEXT NOT NULL, token_sha256 TEXT NOT NULL,
  csrf TEXT NOT NULL, expires REAL NOT NULL);
"""


@dataclass(frozen=True)
class StoredSession:
    reviewer: str
    token_sha256: str
    csrf: str
    expires: float


def _key(sid: str) -> str:
    return hashlib.sha256(sid.encode("utf-8")).hexdigest()


def _connect(store: str | Path, create: bool = False) -> sqlite3.Connection | None:
    """The accounts file (None without one); ``create``: with the sessions table."""
    path = Path(store) / DB_NAME
    if not path.exists():
        return None
    conn = sqlite3.connect(path, timeout=30)
    if create:
        with conn:
            conn.executescript(_SCHEMA)
    return conn


def open_session(store: str | Path, sid: str, s: StoredSession) -> None:
    """Record the session ``sid`` (and drop the expired ones)."""
    conn = _connect(store, create=True)
    if conn is None:
        raise FileNotFoundError(f"no reviewer accounts in {store}")
    with closing(conn), conn:
        conn.execute("DELETE FROM sessions WHERE expires < ?", (time.time(),))
        conn.execute(
            "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?, ?)",
            (_key(sid), s.reviewer, s.token_sha256, s.csrf, s.expires),
        )


def find_session(store: str | Path, sid: str) -> StoredSession | None:
    """The unexpired session ``sid``, or None."""
    conn = _connect(store)
    if conn is None:
        return None
    with closing(conn):
        try:
            row = conn.execute(
                "SELECT reviewer, token_sha256, csrf, expires FROM sessions"
                " WHERE sid_sha256=? AND expires >= ?",
                (_key(sid), time.time()),
            ).fetchone()
        except sqlite3.OperationalError:  # no session was ever opened (no table yet)
            return None
    return StoredSession(*row) if row else None


def end_session(store: str | Path, sid: str) -> None:
    conn = _connect(store)
    if conn is None:
        return
    with closing(conn), conn, contextlib.suppress(sqlite3.OperationalError):  # no table: no session
        conn.execute("DELETE FROM sessions WHERE sid_sha256=?", (_key(sid),))
