"""The store: one directory holding ``store.sqlite`` (documents, pages, chunks, run
log, warnings, history, embedding cache, BEIR ids) and ``indexes/``.

All SQL of ``store.sqlite`` lives in this package: the schema and its migrations
(store.schema), documents and pages (store.documents), chunks (store.chunks), the
embedding cache (store.embeddings), the run log (store.runs) and BEIR ids
(store.beir_ids); ``Store`` combines them.

All writes of one document happen in one SQLite transaction, so a failed or
interrupted ingest leaves every document either fully old or fully new. The schema
carries a version: an older store is migrated in place, a newer one is refused with
a message that names both versions.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sourcepage.store.beir_ids import BeirIdTables
from sourcepage.store.chunks import ChunkTables
from sourcepage.store.documents import DocumentTables
from sourcepage.store.embeddings import EmbeddingTables
from sourcepage.store.runs import RunTables
from sourcepage.store.schema import DB_NAME, MIGRATIONS, SCHEMA_VERSION, StoreError, ensure_schema, now

__all__ = ["DB_NAME", "MIGRATIONS", "SCHEMA_VERSION", "Store", "StoreError", "now"]


class Store(DocumentTables, ChunkTables, EmbeddingTables, RunTables, BeirIdTables):
    """A store directory. Open with ``Store(path)``; ``create=True`` makes a new one."""

    def __init__(self, path: str | Path, *, create: bool = False):
        self.path = Path(path)
        db = self.path / DB_NAME
        if not db.exists():
            if not create:
                raise StoreError(f"no store at {self.path} (run `sourcepage ingest` first)")
            self.path.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(db, timeout=30, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        try:
            ensure_schema(self.conn, self.path)
        except BaseException:
            self.conn.close()
            raise

    def read_only(self) -> Store:
        """This store with its connection made read-only (``PRAGMA query_only``), for
        sharing between the threads of the web service.

        The connection is opened with ``check_same_thread=False``. Sharing it is safe
        because the sqlite3 module reports ``threadsafety == 3`` (SQLite built in
        serialized mode: every call on a connection holds that connection's mutex), the
        read methods each run one statement in their own cursor and fetch all rows before
        returning, and ``query_only`` guarantees no thread can open a write transaction
        whose state the others would share.
        """
        self.conn.execute("PRAGMA query_only=ON")
        self.readonly = True
        return self

    def close(self) -> None:
        self.conn.close()

    def copy_to(self, dest: str | Path) -> Path:
        """A copy of this store's database (not its indexes) as the new store ``dest``,
        written to a temporary file and renamed, so ``dest`` is whole or absent. Used to
        re-chunk under other text settings without extracting again."""
        dest = Path(dest)
        target = dest / DB_NAME
        if target.exists():
            raise StoreError(f"{dest} already holds a store")
        dest.mkdir(parents=True, exist_ok=True)
        tmp = dest / f".{DB_NAME}.tmp"
        tmp.unlink(missing_ok=True)
        conn = sqlite3.connect(tmp)
        try:
            self.conn.backup(conn)
        finally:
            conn.close()
        tmp.replace(target)
        return dest

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One SQLite transaction: committed on success, rolled back on any error."""
        with self.conn:
            yield self.conn

    # -- meta -------------------------------------------------------------------
    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def set_meta(self, key: str, value: Any, conn: sqlite3.Connection | None = None) -> None:
        (conn or self.conn).execute(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value, sort_keys=True))
        )
