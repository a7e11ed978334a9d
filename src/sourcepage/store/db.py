"""The store: one directory holding ``store.sqlite`` (documents, pages, chunks, run
log, warnings, history, embedding cache) and ``indexes/``.

All writes of one document happen in one SQLite transaction, so a failed or
interrupted ingest leaves every document either fully old or fully new. The schema
carries a version: an older store is migrated in place, a newer one is refused with
a message that names both versions.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sourcepage.records import TEXT_VERSIONS, Chunk, Document, PageAudit, parse_page_id

SCHEMA_VERSION = 2
DB_NAME = "store.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
  doc_id TEXT PRIMARY KEY, sha256 TEXT NOT NULL, metadata TEXT NOT NULL,
  status TEXT NOT NULL, error TEXT, engine TEXT, version INTEGER NOT NULL DEFAULT 1,
  n_pages INTEGER, extract_seconds REAL, ingested_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS document_history (
  id INTEGER PRIMARY KEY AUTOINCREMENT, doc_id TEXT NOT NULL, version INTEGER NOT NULL,
  sha256 TEXT NOT NULL, metadata TEXT NOT NULL, pages TEXT NOT NULL, replaced_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pages (
  doc_id TEXT NOT NULL, page_no INTEGER NOT NULL, raw TEXT NOT NULL, cleaned TEXT NOT NULL,
  chars INTEGER NOT NULL, images INTEGER NOT NULL, low_text_100 INTEGER NOT NULL,
  low_text_300 INTEGER NOT NULL, multi_column_risk INTEGER NOT NULL,
  spacing_artifact INTEGER NOT NULL, contents_page INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (doc_id, page_no));
CREATE TABLE IF NOT EXISTS chunks (
  version TEXT NOT NULL, chunk_id TEXT NOT NULL, doc_id TEXT NOT NULL, page_no INTEGER NOT NULL,
  seq INTEGER NOT NULL, spans TEXT NOT NULL, text TEXT NOT NULL,
  PRIMARY KEY (version, chunk_id));
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks (version, doc_id, seq);
CREATE INDEX IF NOT EXISTS chunks_by_doc ON chunks (doc_id);
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT, command TEXT NOT NULL, args TEXT NOT NULL,
  started_at TEXT NOT NULL, finished_at TEXT, status TEXT NOT NULL, summary TEXT);
CREATE TABLE IF NOT EXISTS warnings (
  id INTEGER PRIMARY KEY AUTOINCREMENT, run_id INTEGER, doc_id TEXT, kind TEXT NOT NULL,
  message TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS embeddings (
  model TEXT NOT NULL, text_sha TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL,
  PRIMARY KEY (model, text_sha));
"""


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """Schema 2 adds the contents-page audit flag. The store does not know how to detect a
    contents page (that is the audit's, a later stage), so the migration marks the flags
    as pending and the next ``ingest`` computes them from the stored raw text
    (``Store.pages_needing_contents_flag``)."""
    conn.execute("ALTER TABLE pages ADD COLUMN contents_page INTEGER NOT NULL DEFAULT 0")
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('contents_flag_pending', '1')")


#: migrations[n] upgrades a schema-n store to n+1, inside one transaction.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _migrate_1_to_2}


class StoreError(RuntimeError):
    """A store that cannot be used (missing, or from another schema version)."""


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Store:
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
        self._check_schema(create)

    def _check_schema(self, create: bool) -> None:
        has_meta = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
        ).fetchone()
        if not has_meta:
            with self.conn:
                self.conn.executescript(_SCHEMA)
                self.conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            return
        row = self.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        found = int(row[0]) if row else 0
        if found > SCHEMA_VERSION:
            raise StoreError(
                f"store {self.path} has schema version {found}, newer than this sourcepage "
                f"reads ({SCHEMA_VERSION}); upgrade sourcepage or ingest into a new store"
            )
        while found < SCHEMA_VERSION:
            if found not in MIGRATIONS:
                raise StoreError(
                    f"store {self.path} has schema version {found}; no migration "
                    f"to {SCHEMA_VERSION} exists: re-ingest into a new store"
                )
            with self.conn:
                MIGRATIONS[found](self.conn)
                found += 1
                self.conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(found),))
        # an index added within schema 1 (stores made before it lack it): ingest deletes by doc_id
        with self.conn:
            self.conn.execute("CREATE INDEX IF NOT EXISTS chunks_by_doc ON chunks (doc_id)")

    def close(self) -> None:
        self.conn.close()

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

    # -- documents ------------------------------------------------------------------
    def document_rows(self) -> dict[str, dict[str, Any]]:
        cur = self.conn.execute(
            "SELECT doc_id, sha256, metadata, status, error, engine, version,"
            " n_pages, extract_seconds, ingested_at FROM documents"
        )
        cols = [d[0] for d in cur.description]
        return {r[0]: dict(zip(cols, r, strict=True)) for r in cur.fetchall()}

    def documents(self) -> list[Document]:
        """Successfully ingested documents, ordered by doc_id."""
        rows = self.conn.execute(
            "SELECT metadata FROM documents WHERE status='ok' ORDER BY doc_id"
        ).fetchall()
        return [Document.from_dict(json.loads(r[0])) for r in rows]

    def page_texts(self, doc_id: str, version: str = "raw") -> list[str]:
        col = {"raw": "raw", "cleaned": "cleaned", "enriched": "cleaned"}[version]
        rows = self.conn.execute(
            f"SELECT {col} FROM pages WHERE doc_id=? ORDER BY page_no", (doc_id,)
        ).fetchall()
        return [r[0] for r in rows]

    def page_rows(self) -> list[dict[str, Any]]:
        cur = self.conn.execute(
            "SELECT p.doc_id, p.page_no, p.chars, p.images, p.low_text_100, p.low_text_300,"
            " p.multi_column_risk, p.spacing_artifact, p.contents_page FROM pages p JOIN documents d"
            " ON d.doc_id=p.doc_id AND d.status='ok' ORDER BY p.doc_id, p.page_no"
        )
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    def page_ids(self) -> set[str]:
        """Every page id (``doc#pN``) of the successfully ingested documents."""
        rows = self.conn.execute(
            "SELECT p.doc_id, p.page_no FROM pages p JOIN documents d ON d.doc_id=p.doc_id AND d.status='ok'"
        ).fetchall()
        return {f"{d}#p{n}" for d, n in rows}

    def page(self, doc_id: str, page_no: int) -> dict[str, Any] | None:
        cur = self.conn.execute("SELECT * FROM pages WHERE doc_id=? AND page_no=?", (doc_id, page_no))
        row = cur.fetchone()
        return dict(zip([d[0] for d in cur.description], row, strict=True)) if row else None

    def write_document(
        self,
        conn: sqlite3.Connection,
        doc: Document,
        *,
        engine: str,
        raw: list[str],
        cleaned: list[str],
        audits: list[PageAudit],
        chunks: dict[str, list[Chunk]],
        seconds: float,
    ) -> None:
        """Replace one document's pages and chunks inside the caller's transaction,
        moving the previous version (if its checksum differs) into the history."""
        prev = conn.execute(
            "SELECT sha256, metadata, version, status FROM documents WHERE doc_id=?", (doc.doc_id,)
        ).fetchone()
        version = 1
        if prev is not None:
            version = prev[2]
            if prev[0] != doc.sha256 and prev[3] == "ok":
                old_pages = [
                    r[0]
                    for r in conn.execute(
                        "SELECT raw FROM pages WHERE doc_id=? ORDER BY page_no", (doc.doc_id,)
                    )
                ]
                conn.execute(
                    "INSERT INTO document_history (doc_id, version, sha256, metadata, pages,"
                    " replaced_at) VALUES (?,?,?,?,?,?)",
                    (doc.doc_id, prev[2], prev[0], prev[1], json.dumps(old_pages), now()),
                )
                version = prev[2] + 1
        conn.execute("DELETE FROM pages WHERE doc_id=?", (doc.doc_id,))
        conn.execute("DELETE FROM chunks WHERE doc_id=?", (doc.doc_id,))
        conn.executemany(
            "INSERT INTO pages VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    doc.doc_id,
                    i,
                    r,
                    c,
                    a.chars,
                    a.images,
                    int(a.low_text_100),
                    int(a.low_text_300),
                    int(a.multi_column_risk),
                    int(a.spacing_artifact),
                    int(a.contents_page),
                )
                for i, (r, c, a) in enumerate(zip(raw, cleaned, audits, strict=True), 1)
            ],
        )
        self.write_chunks(conn, doc.doc_id, chunks)
        conn.execute(
            "INSERT OR REPLACE INTO documents VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                doc.doc_id,
                doc.sha256,
                json.dumps(doc.as_dict(), sort_keys=True),
                "ok",
                None,
                engine,
                version,
                len(raw),
                seconds,
                now(),
            ),
        )

    def write_chunks(self, conn: sqlite3.Connection, doc_id: str, chunks: dict[str, list[Chunk]]) -> None:
        conn.execute("DELETE FROM chunks WHERE doc_id=?", (doc_id,))
        conn.executemany(
            "INSERT INTO chunks VALUES (?,?,?,?,?,?,?)",
            [
                (v, c.chunk_id, c.doc_id, c.page, seq, json.dumps(c.spans), c.text)
                for v, cs in chunks.items()
                for seq, c in enumerate(cs)
            ],
        )

    def update_metadata(self, conn: sqlite3.Connection, doc: Document) -> None:
        conn.execute(
            "UPDATE documents SET metadata=? WHERE doc_id=?",
            (json.dumps(doc.as_dict(), sort_keys=True), doc.doc_id),
        )

    def record_failure(self, conn: sqlite3.Connection, doc: Document, error: str) -> None:
        """Mark a document failed. A previously good version stays searchable."""
        prev = conn.execute("SELECT status FROM documents WHERE doc_id=?", (doc.doc_id,)).fetchone()
        if prev is not None and prev[0] == "ok":
            conn.execute("UPDATE documents SET error=? WHERE doc_id=?", (error, doc.doc_id))
            return
        conn.execute(
            "INSERT OR REPLACE INTO documents VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                doc.doc_id,
                doc.sha256,
                json.dumps(doc.as_dict(), sort_keys=True),
                "failed",
                error,
                None,
                1,
                0,
                None,
                now(),
            ),
        )

    def mark_removed(self, conn: sqlite3.Connection, doc_id: str) -> None:
        conn.execute("UPDATE documents SET status='removed' WHERE doc_id=?", (doc_id,))

    def set_cleaned(self, conn: sqlite3.Connection, doc_id: str, cleaned: list[str]) -> None:
        """Replace the cleaned text of a document's pages (page i+1 ← cleaned[i])."""
        conn.executemany(
            "UPDATE pages SET cleaned=? WHERE doc_id=? AND page_no=?",
            [(text, doc_id, i) for i, text in enumerate(cleaned, 1)],
        )

    def chunk_count(self, version: str) -> int:
        """Chunks of a text version over the good documents."""
        return self.conn.execute(
            "SELECT count(*) FROM chunks c JOIN documents d ON d.doc_id=c.doc_id AND"
            " d.status='ok' WHERE c.version=?",
            (version,),
        ).fetchone()[0]

    def pages_needing_contents_flag(self) -> list[tuple[str, int, str]]:
        """(doc_id, page_no, raw) of every page when a migration left the contents-page flag
        to compute, else []."""
        if not self.conn.execute("SELECT 1 FROM meta WHERE key='contents_flag_pending'").fetchone():
            return []
        return self.conn.execute("SELECT doc_id, page_no, raw FROM pages").fetchall()

    def set_contents_flags(self, flags: list[tuple[int, str, int]]) -> None:
        """Write (flag, doc_id, page_no) rows and clear the pending mark, in one transaction."""
        with self.conn:
            self.conn.executemany("UPDATE pages SET contents_page=? WHERE doc_id=? AND page_no=?", flags)
            self.conn.execute("DELETE FROM meta WHERE key='contents_flag_pending'")

    def history(self, doc_id: str) -> list[dict[str, Any]]:
        cur = self.conn.execute(
            "SELECT version, sha256, replaced_at FROM document_history WHERE doc_id=? ORDER BY version",
            (doc_id,),
        )
        return [dict(zip(("version", "sha256", "replaced_at"), r, strict=True)) for r in cur]

    # -- chunks -----------------------------------------------------------------------
    def chunks(self, version: str) -> list[Chunk]:
        """All chunks of a text version of the good documents, in (doc_id, order)."""
        if version not in TEXT_VERSIONS:
            raise ValueError(f"unknown text version {version!r}; choose from {TEXT_VERSIONS}")
        rows = self.conn.execute(
            "SELECT c.chunk_id, c.doc_id, c.page_no, c.spans, c.text FROM chunks c JOIN documents d"
            " ON d.doc_id=c.doc_id AND d.status='ok' WHERE c.version=? ORDER BY c.doc_id, c.seq",
            (version,),
        ).fetchall()
        return [Chunk(r[0], r[1], r[2], tuple(tuple(s) for s in json.loads(r[3])), r[4]) for r in rows]

    def chunk_text(self, version: str, chunk_id: str) -> str:
        """The text of one chunk ('' when the version has no such chunk)."""
        row = self.conn.execute(
            "SELECT text FROM chunks WHERE version=? AND chunk_id=?", (version, chunk_id)
        ).fetchone()
        return row[0] if row else ""

    def page_chunks(self, version: str, page: str) -> list[tuple[str, str]]:
        """(chunk id, text) of the chunks credited to ``page`` in ``version``, in chunk order."""
        doc_id, number = parse_page_id(page)
        rows = self.conn.execute(
            "SELECT chunk_id, text FROM chunks WHERE version=? AND doc_id=? AND page_no=? ORDER BY seq",
            (version, doc_id, number),
        ).fetchall()
        return [(r[0], r[1]) for r in rows]

    def chunk_fingerprint(self, version: str) -> str:
        """SHA-256 over the chunk ids and texts of a version: an index built from other
        chunks is stale."""
        h = hashlib.sha256()
        for c in self.chunks(version):
            h.update(c.chunk_id.encode())
            h.update(b"\0")
            h.update(c.text.encode())
            h.update(b"\1")
        return h.hexdigest()

    # -- embedding cache ------------------------------------------------------------
    def cached_embeddings(self, model: str, shas: list[str]) -> dict[str, Any]:
        """Vectors cached for ``model`` by chunk-text SHA-256."""
        import numpy as np

        out: dict[str, Any] = {}
        for i in range(0, len(shas), 500):
            part = shas[i : i + 500]
            marks = ",".join("?" * len(part))
            q = f"SELECT text_sha, dim, vector FROM embeddings WHERE model=? AND text_sha IN ({marks})"
            with self._cache_lock:
                rows = self.conn.execute(q, (model, *part)).fetchall()
            for sha, _dim, blob in rows:
                out[sha] = np.frombuffer(blob, dtype=np.float32)
        return out

    def cache_embeddings(self, model: str, vectors: dict[str, Any]) -> None:
        with self._cache_lock, self.conn:
            self.conn.executemany(
                "INSERT OR REPLACE INTO embeddings VALUES (?,?,?,?)",
                [(model, s, int(v.shape[0]), v.astype("float32").tobytes()) for s, v in vectors.items()],
            )

    # -- run log ------------------------------------------------------------------
    def start_run(self, command: str, args: dict[str, Any]) -> int:
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO runs (command, args, started_at, status) VALUES (?,?,?, 'running')",
                (command, json.dumps(args, default=str), now()),
            )
        return int(cur.lastrowid or 0)

    def finish_run(self, run_id: int, status: str, summary: dict[str, Any]) -> None:
        with self.conn:
            self.conn.execute(
                "UPDATE runs SET finished_at=?, status=?, summary=? WHERE id=?",
                (now(), status, json.dumps(summary, default=str), run_id),
            )

    def warn(
        self, conn: sqlite3.Connection, run_id: int, doc_id: str | None, kind: str, message: str
    ) -> None:
        conn.execute(
            "INSERT INTO warnings (run_id, doc_id, kind, message, created_at) VALUES (?,?,?,?,?)",
            (run_id, doc_id, kind, message, now()),
        )

    def warnings(self, run_id: int | None = None) -> list[dict[str, Any]]:
        q = "SELECT run_id, doc_id, kind, message, created_at FROM warnings"
        rows = self.conn.execute(
            q + (" WHERE run_id=?" if run_id else "") + " ORDER BY id", (run_id,) if run_id else ()
        ).fetchall()
        return [
            dict(zip(("run_id", "doc_id", "kind", "message", "created_at"), r, strict=True)) for r in rows
        ]

    def content_stamp(self) -> tuple[int, str | None]:
        """A cheap value that changes with every ingest run (started or finished): a cached
        searcher or service compares it to notice a re-ingest by another process."""
        n, last = self.conn.execute("SELECT count(*), max(finished_at) FROM runs").fetchone()
        return int(n), last

    def runs(self) -> list[dict[str, Any]]:
        cur = self.conn.execute(
            "SELECT id, command, started_at, finished_at, status, summary FROM runs ORDER BY id"
        )
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    # -- shared reads (the web service; kept together here) -------------------------
    #: Serialises the embedding cache's write transactions (and the reads beside them) on
    #: a connection that several threads share: a search may fill the cache (rerank,
    #: calibrated features) while another thread searches the same Searcher's store.
    _cache_lock = threading.Lock()

    def read_only(self) -> Store:
        """This store with its connection made read-only (``PRAGMA query_only``), for
        sharing between the threads of the web service.

        The connection is opened with ``check_same_thread=False``. Sharing it is safe
        because the sqlite3 module reports ``threadsafety == 3`` (SQLite built in
        serialized mode: every call on a connection holds that connection's mutex), the
        read methods below and above each run one statement in their own cursor and fetch
        all rows before returning, and ``query_only`` guarantees no thread can open a
        write transaction whose state the others would share.
        """
        self.conn.execute("PRAGMA query_only=ON")
        return self

    def document(self, doc_id: str) -> Document | None:
        """One successfully ingested document, or None."""
        row = self.conn.execute(
            "SELECT metadata FROM documents WHERE doc_id=? AND status='ok'", (doc_id,)
        ).fetchone()
        return Document.from_dict(json.loads(row[0])) if row else None

    def page_count(self, doc_id: str) -> int:
        """How many pages a document has in the store (0 when none)."""
        row = self.conn.execute("SELECT COUNT(*) FROM pages WHERE doc_id=?", (doc_id,)).fetchone()
        return int(row[0])

    def chunk(self, version: str, chunk_id: str) -> Chunk | None:
        """One chunk of a text version, or None."""
        row = self.conn.execute(
            "SELECT chunk_id, doc_id, page_no, spans, text FROM chunks WHERE version=? AND chunk_id=?",
            (version, chunk_id),
        ).fetchone()
        if row is None:
            return None
        return Chunk(row[0], row[1], row[2], tuple(tuple(s) for s in json.loads(row[3])), row[4])

    def run_args(self, command: str) -> list[Any]:
        """The arguments of every run of ``command``, newest first (None where the
        recorded JSON does not parse)."""
        rows = self.conn.execute(
            "SELECT args FROM runs WHERE command=? ORDER BY id DESC", (command,)
        ).fetchall()
        out: list[Any] = []
        for (args,) in rows:
            try:
                out.append(json.loads(args))
            except ValueError:
                out.append(None)
        return out
