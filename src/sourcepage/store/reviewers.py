"""Reviewer accounts of a store: who may write reviews, judgments and adjudications
through the web service.

The accounts live in ``<store>/reviewers.sqlite``, beside the store (the web service
opens ``store.sqlite`` read-only). ``sourcepage reviewer add NAME`` creates one and prints
its token once; the file keeps only the token's SHA-256. A token is 32 random bytes
(``secrets.token_urlsafe``), so a fast hash is enough: nothing can be guessed from it and
a stolen file gives no token. Adding an existing name again issues a new token (the old
one stops working); removing a name ends its access.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from sourcepage.store.schema import now

__all__ = [
    "DB_NAME",
    "NAME",
    "Reviewer",
    "add_reviewer",
    "check_name",
    "has_reviewers",
    "list_reviewers",
    "remove_reviewer",
    "reviewer_for_hash",
    "token_hash",
]

DB_NAME = "reviewers.sqlite"
#: a reviewer name: what the review log and the judgments record
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
TOKEN_PREFIX = "sp_"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reviewers (
  name TEXT PRIMARY KEY, token_sha256 TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL);
"""


@dataclass(frozen=True)
class Reviewer:
    name: str
    created_at: str


def token_hash(token: str) -> str:
    """What the accounts file keeps of a token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _connect(store: str | Path, create: bool) -> sqlite3.Connection | None:
    path = Path(store) / DB_NAME
    if not path.exists():
        if not create:
            return None
        if not Path(store).is_dir():
            raise FileNotFoundError(f"no store folder at {store}")
    conn = sqlite3.connect(path, timeout=30)
    if create:
        with conn:
            conn.executescript(_SCHEMA)
    return conn


def check_name(name: str) -> str:
    """``name`` when it is a valid reviewer name, else ValueError saying what one is
    (every command that records a reviewer checks the same rule)."""
    if not NAME.match(name):
        shown = repr(name) if len(name) <= 80 else repr(name[:80]) + f" … ({len(name)} characters)"
        raise ValueError(
            f"reviewer name {shown}: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def add_reviewer(store: str | Path, name: str) -> str:
    """Create the account ``name`` (or give it a new token) and return its token."""
    check_name(name)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    conn = _connect(store, create=True)
    assert conn is not None
    with closing(conn), conn:
        conn.execute(
            "INSERT INTO reviewers (name, token_sha256, created_at) VALUES (?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET token_sha256=excluded.token_sha256, "
            "created_at=excluded.created_at",
            (name, token_hash(token), now()),
        )
    return token


def remove_reviewer(store: str | Path, name: str) -> bool:
    """End the access of ``name``; False when there was no such account."""
    conn = _connect(store, create=False)
    if conn is None:
        return False
    with closing(conn), conn:
        try:
            return conn.execute("DELETE FROM reviewers WHERE name=?", (name,)).rowcount > 0
        except sqlite3.OperationalError:
            return False


def list_reviewers(store: str | Path) -> list[Reviewer]:
    conn = _connect(store, create=False)
    if conn is None:
        return []
    with closing(conn):
        try:
            rows = conn.execute("SELECT name, created_at FROM reviewers ORDER BY name").fetchall()
        except sqlite3.OperationalError:
            return []
    return [Reviewer(n, c) for n, c in rows]


def has_reviewers(store: str | Path) -> bool:
    return bool(list_reviewers(store))


def reviewer_for_hash(store: str | Path, digest: str) -> str | None:
    """The reviewer whose current token has SHA-256 ``digest``, or None."""
    conn = _connect(store, create=False)
    if conn is None:
        return None
    with closing(conn):
        try:
            row = conn.execute("SELECT name FROM reviewers WHERE token_sha256=?", (digest,)).fetchone()
        except sqlite3.OperationalError:  # a file without the table
            return None
    return row[0] if row else None
