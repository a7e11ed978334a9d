"""The schema of ``store.sqlite``: its tables, its version, and the migrations that bring
an older store up to date.

A store carries ``meta.schema_version``. Opening an older store migrates it in place, one
version at a time, each step in one transaction; a newer store is refused with a message
that names both versions.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

SCHEMA_VERSION = 6
DB_NAME = "store.sqlite"

_BEIR_IDS = """CREATE TABLE IF NOT EXISTS beir_ids (
  beir_id TEXT PRIMARY KEY, doc_id TEXT NOT NULL UNIQUE, dataset TEXT NOT NULL,
  seen_run INTEGER NOT NULL DEFAULT 0)"""

#: Triggers that count every change to the searchable chunks (a chunk written or deleted, a
#: document added, removed or changing status) in ``meta.chunks_generation``. Any writer,
#: through sourcepage or not, bumps it; a stored chunk fingerprint records the generation it
#: was computed at and is reused only while the generation is unchanged (store.chunks).
_GENERATION = "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'chunks_generation'"
_TRIGGERS = tuple(
    f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {event} BEGIN {_GENERATION}; END"
    for name, event in (
        ("chunks_generation_insert", "INSERT ON chunks"),
        ("chunks_generation_update", "UPDATE ON chunks"),
        ("chunks_generation_delete", "DELETE ON chunks"),
        ("documents_generation_insert", "INSERT ON documents"),
        ("documents_generation_status", "UPDATE OF status ON documents"),
        ("documents_generation_delete", "DELETE ON documents"),
    )
)

SCHEMA = (
    """
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
  section TEXT NOT NULL DEFAULT '', sections TEXT NOT NULL DEFAULT '[]', page_kind TEXT NOT NULL DEFAULT '',
  ocr_confidence REAL, page_label TEXT NOT NULL DEFAULT '', ordered TEXT,
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
    + _BEIR_IDS
    + ";\n"
    + "INSERT OR IGNORE INTO meta VALUES ('chunks_generation', '0');\n"
    + "".join(t + ";\n" for t in _TRIGGERS)
)


class StoreError(RuntimeError):
    """A store that cannot be used (missing, or from another schema version)."""


def now() -> str:
    """The one timestamp format: UTC to the second, ISO 8601 (``2026-01-31T12:00:00Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """Schema 2 adds the contents-page audit flag. The store does not know how to detect a
    contents page (that is the audit's, a later stage), so the migration marks the flags
    as pending and the next ``ingest`` computes them from the stored raw text
    (``Store.pages_needing_contents_flag``)."""
    conn.execute("ALTER TABLE pages ADD COLUMN contents_page INTEGER NOT NULL DEFAULT 0")
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('contents_flag_pending', '1')")


def _migrate_2_to_3(conn: sqlite3.Connection) -> None:
    """Schema 3 makes ``beir_ids`` (BEIR ``_id`` ↔ doc_id) part of the schema. A schema-2
    store that ingested a BEIR corpus already has the table, with the same columns (BEIR
    ingest created it on demand): it is kept as it is."""
    conn.execute(_BEIR_IDS)  # not executescript: that would commit the open transaction


def _migrate_3_to_4(conn: sqlite3.Connection) -> None:
    """Schema 4 counts changes to the searchable chunks (``meta.chunks_generation``, kept by
    triggers) so that the chunk fingerprint is stored, not re-hashed at every start."""
    conn.execute("INSERT OR IGNORE INTO meta VALUES ('chunks_generation', '0')")
    for trigger in _TRIGGERS:
        conn.execute(trigger)


_STRUCTURE_COLUMNS = (
    ("section", "TEXT NOT NULL DEFAULT ''"),
    ("sections", "TEXT NOT NULL DEFAULT '[]'"),
    ("page_kind", "TEXT NOT NULL DEFAULT ''"),
)


def _migrate_4_to_5(conn: sqlite3.Connection) -> None:
    """Schema 5 adds each page's heading path and kind (corpus.structure). They come from
    the PDF (its outline, its fonts), so the migration marks them pending and the next
    ``ingest`` re-extracts every document (dense embeddings are reused: cached by text)."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(pages)")}
    for name, decl in _STRUCTURE_COLUMNS:
        if name not in have:
            conn.execute(f"ALTER TABLE pages ADD COLUMN {name} {decl}")
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('structure_pending', '1')")


def _migrate_5_to_6(conn: sqlite3.Connection) -> None:
    """Schema 6 records per page the mean OCR confidence (NULL: the text was not read by
    OCR), the printed page label ('' unknown) and the text re-read column by column where
    the extraction ran two columns together (NULL: the raw text's order stands). Stores
    made before it have none of these: their labels are read from the stored text at the
    next ingest (``Store.pages_needing_labels``); OCR and column order need the document
    re-extracted (ingest --force)."""
    cols = {r[1] for r in conn.execute("PRAGMA table_info(pages)")}
    if "ocr_confidence" not in cols:
        conn.execute("ALTER TABLE pages ADD COLUMN ocr_confidence REAL")
    if "page_label" not in cols:
        conn.execute("ALTER TABLE pages ADD COLUMN page_label TEXT NOT NULL DEFAULT ''")
    if "ordered" not in cols:
        conn.execute("ALTER TABLE pages ADD COLUMN ordered TEXT")
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('page_labels_pending', '1')")


#: migrations[n] upgrades a schema-n store to n+1, inside one transaction.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _migrate_1_to_2,
    2: _migrate_2_to_3,
    3: _migrate_3_to_4,
    4: _migrate_4_to_5,
    5: _migrate_5_to_6,
}


def ensure_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Create the tables of a new store, or migrate an older one to SCHEMA_VERSION."""
    has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
    if not has_meta:
        with conn:
            conn.executescript(SCHEMA)
            conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        return
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    found = int(row[0]) if row else 0
    if found > SCHEMA_VERSION:
        raise StoreError(
            f"store {path} has schema version {found}, newer than this sourcepage "
            f"reads ({SCHEMA_VERSION}); upgrade sourcepage or ingest into a new store"
        )
    while found < SCHEMA_VERSION:
        if found not in MIGRATIONS:
            raise StoreError(
                f"store {path} has schema version {found}; no migration "
                f"to {SCHEMA_VERSION} exists: re-ingest into a new store"
            )
        with conn:
            MIGRATIONS[found](conn)
            found += 1
            conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(found),))
    # an index added within schema 1 (stores made before it lack it): ingest deletes by doc_id
    with conn:
        conn.execute("CREATE INDEX IF NOT EXISTS chunks_by_doc ON chunks (doc_id)")
