"""Reviewer accounts of a store: who may write reviews, judgments and adjudications
through the web service.

The accounts live in ``<store>/reviewers.sqlite``, beside the store (the web service
opens ``store.sqlite`` read-only). ``sourcepage reviewer add NAME`` creates one and prints
its token once; the file keeps only the token's SHA-256. A token is 32 random bytes
(``secrets.token_urlsafe``), so a fast hash is enough: nothing can be guessed from it and
a stolen file gives no token. Adding an existing name again issues a new token (the old
one stops working); removing a name ends its access.

A reviewer may hold roles (``ROLES``): ``editor`` adds, replaces, withdraws and restores
documents from the web page (``service.editor``). Stores made before roles get the column
on first use; their reviewers hold none.
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
    "reviewer_roles",
    "token_hash",
]

DB_NAME = "reviewers.sqlite"
#: a reviewer name: what the review log and the judgments record
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
TOKEN_PREFIX = "sp_"
#: the roles a reviewer may hold besides reviewing: ``editor`` changes the library
ROLES = ("editor",)
EDITOR = "editor"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reviewers (
  name TEXT PRIMARY KEY, token_sha256 TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL,
  roles TEXT NOT NULL DEFAULT '');
"""


@dataclass(frozen=True)
class Reviewer:
    name: str
    created_at: str
    roles: tuple[str, ...] = ()


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
            _add_roles_column(conn)
    return conn


def _add_roles_column(conn: sqlite3.Connection) -> None:
    """The ``roles`` column, added to an accounts file made before it."""
    if "roles" not in {r[1] for r in conn.execute("PRAGMA table_info(reviewers)")}:
        conn.execute("ALTER TABLE reviewers ADD COLUMN roles TEXT NOT NULL DEFAULT ''")


def _roles_text(roles: tuple[str, ...] | list[str]) -> str:
    bad = [r for r in roles if r not in ROLES]
    if bad:
        raise ValueError(f"unknown role(s) {', '.join(map(repr, bad))}; choose from {', '.join(ROLES)}")
    return ",".join(sorted(set(roles)))


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


def add_reviewer(store: str | Path, name: str, roles: tuple[str, ...] | list[str] | None = None) -> str:
    """Create the account ``name`` (or give it a new token) and return its token.
    ``roles``: what it may do besides reviewing (``ROLES``; ``()`` none); None keeps the
    roles an existing account holds (a new one holds none)."""
    check_name(name)
    given = None if roles is None else _roles_text(roles)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    conn = _connect(store, create=True)
    assert conn is not None
    with closing(conn), conn:
        conn.execute(
            "INSERT INTO reviewers (name, token_sha256, created_at, roles) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET token_sha256=excluded.token_sha256, "
            "created_at=excluded.created_at, roles=coalesce(?, roles)",
            (name, token_hash(token), now(), given or "", given),
        )
    return token


def reviewer_roles(store: str | Path, name: str) -> tuple[str, ...]:
    """The roles of reviewer ``name`` (``()`` for none, or no such account)."""
    conn = _connect(store, create=False)
    if conn is None:
        return ()
    with closing(conn):
        try:
            row = conn.execute("SELECT roles FROM reviewers WHERE name=?", (name,)).fetchone()
        except sqlite3.OperationalError:  # no table, or a file made before roles
            return ()
    return _roles(row[0] if row else "")


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
            rows = conn.execute("SELECT * FROM reviewers ORDER BY name").fetchall()
            cols = [d[0] for d in conn.execute("SELECT * FROM reviewers LIMIT 0").description]
        except sqlite3.OperationalError:
            return []
    out = [dict(zip(cols, r, strict=True)) for r in rows]
    return [Reviewer(r["name"], r["created_at"], _roles(r.get("roles"))) for r in out]


def _roles(text: str | None) -> tuple[str, ...]:
    return tuple(r for r in (text or "").split(",") if r)


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
