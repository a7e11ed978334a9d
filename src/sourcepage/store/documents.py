"""Documents, their pages and history: what ingest writes and the audit, the CLI and
search read.

``write_document`` replaces one document's pages and chunks inside the caller's
transaction and moves the previous version (when its checksum differs) into the history.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from typing import Any

from sourcepage.records import Chunk, Document, PageAudit, page_id
from sourcepage.store.schema import now

_STATE_BATCH = 500


def _metadata_json(doc: Document) -> str:
    return json.dumps(doc.as_dict(), sort_keys=True)


class DocumentMap(Mapping[str, Document]):
    """doc_id → Document of the good documents, read from the store on demand: a store of
    a million BEIR documents is not loaded to answer one query. Looked-up documents are
    cached (up to ``CACHE`` of them); iterating reads every document once and keeps them."""

    CACHE = 65_536

    def __init__(self, tables: DocumentTables):
        self._tables = tables
        self._cache: dict[str, Document | None] = {}
        self._all: dict[str, Document] | None = None

    def __getitem__(self, doc_id: str) -> Document:
        if self._all is not None:
            return self._all[doc_id]
        if doc_id not in self._cache:
            if len(self._cache) >= self.CACHE:
                self._cache.clear()
            self._cache[doc_id] = self._tables.document(doc_id)
        doc = self._cache[doc_id]
        if doc is None:
            raise KeyError(doc_id)
        return doc

    def _every(self) -> dict[str, Document]:
        if self._all is None:
            self._all = {d.doc_id: d for d in self._tables.documents()}
        return self._all

    def __iter__(self) -> Iterator[str]:
        return iter(self._every())

    def __len__(self) -> int:
        return len(self._all) if self._all is not None else self._tables.document_count()


class DocumentTables:
    """The ``documents``, ``pages`` and ``document_history`` tables of a Store."""

    conn: sqlite3.Connection

    def document_rows(self) -> dict[str, dict[str, Any]]:
        cur = self.conn.execute(
            "SELECT doc_id, sha256, metadata, status, error, engine, version,"
            " n_pages, extract_seconds, ingested_at FROM documents"
        )
        cols = [d[0] for d in cur.description]
        return {r[0]: dict(zip(cols, r, strict=True)) for r in cur.fetchall()}

    def document_states(self, doc_ids: list[str]) -> dict[str, dict[str, Any]]:
        """doc_id → sha256, metadata (JSON), status and engine of those of ``doc_ids`` that
        the store holds: what ingest compares to decide whether a document changed."""
        out: dict[str, dict[str, Any]] = {}
        for i in range(0, len(doc_ids), _STATE_BATCH):
            part = doc_ids[i : i + _STATE_BATCH]
            marks = ",".join("?" * len(part))
            cur = self.conn.execute(
                f"SELECT doc_id, sha256, metadata, status, engine FROM documents WHERE doc_id IN ({marks})",
                part,
            )
            for d, sha, meta, status, engine in cur:
                out[d] = {"sha256": sha, "metadata": meta, "status": status, "engine": engine}
        return out

    def document_count(self, status: str = "ok") -> int:
        return int(
            self.conn.execute("SELECT count(*) FROM documents WHERE status=?", (status,)).fetchone()[0]
        )

    def documents(self) -> list[Document]:
        """Successfully ingested documents, ordered by doc_id."""
        rows = self.conn.execute(
            "SELECT metadata FROM documents WHERE status='ok' ORDER BY doc_id"
        ).fetchall()
        return [Document.from_dict(json.loads(r[0])) for r in rows]

    def document_map(self) -> DocumentMap:
        """The good documents by doc_id, read on demand (see DocumentMap)."""
        return DocumentMap(self)

    def document(self, doc_id: str, withdrawn: bool = False) -> Document | None:
        """One successfully ingested document (or a withdrawn one, when ``withdrawn``: its
        pages stay citable), or None."""
        statuses = ("ok", "withdrawn") if withdrawn else ("ok", "ok")
        row = self.conn.execute(
            "SELECT metadata FROM documents WHERE doc_id=? AND status IN (?,?)", (doc_id, *statuses)
        ).fetchone()
        return Document.from_dict(json.loads(row[0])) if row else None

    def page_count(self, doc_id: str) -> int:
        """How many pages a document has in the store (0 when none)."""
        row = self.conn.execute("SELECT COUNT(*) FROM pages WHERE doc_id=?", (doc_id,)).fetchone()
        return int(row[0])

    def page_texts(self, doc_id: str, version: str = "raw") -> list[str]:
        col = {"raw": "raw", "cleaned": "cleaned", "enriched": "cleaned"}[version]
        rows = self.conn.execute(
            f"SELECT {col} FROM pages WHERE doc_id=? ORDER BY page_no", (doc_id,)
        ).fetchall()
        return [r[0] for r in rows]

    def page_rows(self) -> list[dict[str, Any]]:
        cur = self.conn.execute(
            "SELECT p.doc_id, p.page_no, p.chars, p.images, p.low_text_100, p.low_text_300,"
            " p.multi_column_risk, p.spacing_artifact, p.contents_page, p.ocr_confidence, p.page_label"
            " FROM pages p JOIN documents d"
            " ON d.doc_id=p.doc_id AND d.status='ok' ORDER BY p.doc_id, p.page_no"
        )
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    def page_ids(self) -> set[str]:
        """Every page id (``doc#pN``) of the successfully ingested documents."""
        rows = self.conn.execute(
            "SELECT p.doc_id, p.page_no FROM pages p JOIN documents d ON d.doc_id=p.doc_id AND d.status='ok'"
        ).fetchall()
        return {page_id(d, n) for d, n in rows}

    def contents_pages(self) -> set[str]:
        """Page ids (``doc#pN``) the audit flags as a table of contents."""
        rows = self.conn.execute("SELECT doc_id, page_no FROM pages WHERE contents_page=1").fetchall()
        return {page_id(d, n) for d, n in rows}

    def set_structure(self, conn: sqlite3.Connection, doc_id: str, rows: list[tuple[str, str, str]]) -> None:
        """Store each page's (section, JSON list of heading paths, page kind), in page order,
        inside the caller's transaction (corpus.structure computes them)."""
        conn.executemany(
            "UPDATE pages SET section=?, sections=?, page_kind=? WHERE doc_id=? AND page_no=?",
            [(sec, secs, kind, doc_id, i) for i, (sec, secs, kind) in enumerate(rows, 1)],
        )

    def structure_done(self, conn: sqlite3.Connection) -> None:
        """Every document was re-extracted after the schema-5 migration."""
        conn.execute("DELETE FROM meta WHERE key='structure_pending'")

    def page_structure(self) -> dict[str, tuple[str, str, str]]:
        """page id → (section, JSON list of heading paths, page kind) of every stored page."""
        rows = self.conn.execute("SELECT doc_id, page_no, section, sections, page_kind FROM pages").fetchall()
        return {page_id(d, n): (sec, secs, kind) for d, n, sec, secs, kind in rows}

    def structure_pending(self) -> bool:
        """True when a migration added the structure columns and no ingest has filled them."""
        return self.conn.execute("SELECT 1 FROM meta WHERE key='structure_pending'").fetchone() is not None

    def raw_pages(self, page_ids: list[str]) -> dict[str, tuple[str, bool]]:
        """page id → (raw text, columns interleaved in the text) of each of ``page_ids`` that
        the store holds (``multi_column_risk`` is 2 for interleaved columns, 1 for other
        multi-column risks). Where the columns were re-read in order (``ordered``), that
        text is given, and its columns are no longer interleaved."""
        out: dict[str, tuple[str, bool]] = {}
        for pid in page_ids:
            doc_id, _, n = pid.rpartition("#p")
            row = self.conn.execute(
                "SELECT COALESCE(ordered, raw), multi_column_risk = 2 AND ordered IS NULL"
                " FROM pages WHERE doc_id=? AND page_no=?",
                (doc_id, int(n) if n.isdigit() else -1),
            ).fetchone()
            if row:
                out[pid] = (row[0], bool(row[1]))
        return out

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
        ocr: list[float | None] | None = None,
        labels: list[str] | None = None,
        ordered: list[str | None] | None = None,
    ) -> None:
        """Replace one document's pages and chunks inside the caller's transaction,
        moving the previous version (if its checksum differs) into the history.
        ``ocr``: each page's mean OCR confidence (None: not OCR'd); ``labels``: each
        page's printed label ('' unknown); ``ordered``: a page's text in column order
        where the raw text interleaves columns (None: the raw order stands)."""
        version = _archive_previous(conn, doc)
        conn.execute("DELETE FROM pages WHERE doc_id=?", (doc.doc_id,))
        conn.execute("DELETE FROM chunks WHERE doc_id=?", (doc.doc_id,))
        ocr = ocr or [None] * len(raw)
        labels = labels or [""] * len(raw)
        ordered = ordered or [None] * len(raw)
        conn.executemany(
            "INSERT INTO pages (doc_id, page_no, raw, cleaned, chars, images, low_text_100, low_text_300,"
            " multi_column_risk, spacing_artifact, contents_page, ocr_confidence, page_label, ordered)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                (doc.doc_id, i, r, c, *_audit_columns(a), o, lab, od)
                for i, (r, c, a, o, lab, od) in enumerate(
                    zip(raw, cleaned, audits, ocr, labels, ordered, strict=True), 1
                )
            ],
        )
        self.write_chunks(conn, doc.doc_id, chunks)
        conn.execute(
            "INSERT OR REPLACE INTO documents VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                doc.doc_id,
                doc.sha256,
                _metadata_json(doc),
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
        """Replace one document's chunks (of every text version) inside the caller's transaction."""
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
        conn.execute("UPDATE documents SET metadata=? WHERE doc_id=?", (_metadata_json(doc), doc.doc_id))

    def record_failure(self, conn: sqlite3.Connection, doc: Document, error: str) -> None:
        """Mark a document failed. A previously good version stays searchable."""
        prev = conn.execute("SELECT status FROM documents WHERE doc_id=?", (doc.doc_id,)).fetchone()
        if prev is not None and prev[0] == "ok":
            conn.execute("UPDATE documents SET error=? WHERE doc_id=?", (error, doc.doc_id))
            return
        conn.execute(
            "INSERT OR REPLACE INTO documents VALUES (?,?,?,?,?,?,?,?,?,?)",
            (doc.doc_id, doc.sha256, _metadata_json(doc), "failed", error, None, 1, 0, None, now()),
        )

    def undo_failure(self, conn: sqlite3.Connection, doc_id: str) -> None:
        """Put a document back as it was before an add that failed: a new one's failure row
        goes, a stored one (still searchable) loses the error noted."""
        conn.execute("DELETE FROM documents WHERE doc_id=? AND status='failed'", (doc_id,))
        conn.execute("UPDATE documents SET error=NULL WHERE doc_id=? AND status='ok'", (doc_id,))

    def mark_removed(self, conn: sqlite3.Connection, doc_id: str) -> None:
        conn.execute("UPDATE documents SET status='removed' WHERE doc_id=?", (doc_id,))

    def set_withdrawn(self, conn: sqlite3.Connection, doc_id: str, withdrawn: bool, note: str) -> bool:
        """Withdraw a searchable document (status ``withdrawn``, ``note`` in its error column:
        who, when, why) or restore a withdrawn one; its pages, chunks and history stay. False
        when the store has no such document in the state to change."""
        before, after = ("ok", "withdrawn") if withdrawn else ("withdrawn", "ok")
        cur = conn.execute(
            "UPDATE documents SET status=?, error=? WHERE doc_id=? AND status=?",
            (after, note if withdrawn else None, doc_id, before),
        )
        return cur.rowcount == 1

    def withdrawal_note(self, doc_id: str) -> str:
        """The note of a withdrawn document (who, when, why); '' for any other."""
        row = self.conn.execute(
            "SELECT error FROM documents WHERE doc_id=? AND status='withdrawn'", (doc_id,)
        ).fetchone()
        return (row[0] or "withdrawn") if row else ""

    def withdrawn_documents(self) -> list[tuple[Document, str]]:
        """The withdrawn documents by doc_id, each with its withdrawal note."""
        rows = self.conn.execute(
            "SELECT metadata, error FROM documents WHERE status='withdrawn' ORDER BY doc_id"
        ).fetchall()
        return [(Document.from_dict(json.loads(m)), e or "") for m, e in rows]

    def set_cleaned(self, conn: sqlite3.Connection, doc_id: str, cleaned: list[str]) -> None:
        """Replace the cleaned text of a document's pages (page i+1 ← cleaned[i])."""
        conn.executemany(
            "UPDATE pages SET cleaned=? WHERE doc_id=? AND page_no=?",
            [(text, doc_id, i) for i, text in enumerate(cleaned, 1)],
        )

    def ordered_texts(self, doc_id: str) -> list[str | None]:
        """Each page's text in column order, None where the raw text's order stands."""
        rows = self.conn.execute("SELECT ordered FROM pages WHERE doc_id=? ORDER BY page_no", (doc_id,))
        return [r[0] for r in rows.fetchall()]

    def page_marks(self, doc_id: str, page_no: int) -> tuple[str, float | None]:
        """(printed label, mean OCR confidence or None) of one page; ('', None) when the
        store does not hold it."""
        row = self.conn.execute(
            "SELECT page_label, ocr_confidence FROM pages WHERE doc_id=? AND page_no=?", (doc_id, page_no)
        ).fetchone()
        return (row[0], row[1]) if row else ("", None)

    def page_labels(self, doc_id: str) -> list[str]:
        """The printed label of each page of a document, in page order ('' unknown)."""
        rows = self.conn.execute(
            "SELECT page_label FROM pages WHERE doc_id=? ORDER BY page_no", (doc_id,)
        ).fetchall()
        return [r[0] for r in rows]

    def pages_needing_labels(self) -> dict[str, list[str]]:
        """doc_id → raw page texts, when a migration (schema 4 → 5) left the printed page
        labels pending; {} otherwise."""
        if self.get_meta("page_labels_pending") is None:
            return {}
        out: dict[str, list[str]] = {}
        for d, raw in self.conn.execute("SELECT doc_id, raw FROM pages ORDER BY doc_id, page_no"):
            out.setdefault(d, []).append(raw)
        return out

    def set_page_labels(self, labels: dict[str, list[str]]) -> None:
        """Write the printed labels of whole documents (in one transaction) and clear the
        pending mark."""
        with self.conn:
            for doc_id, labs in labels.items():
                self.conn.executemany(
                    "UPDATE pages SET page_label=? WHERE doc_id=? AND page_no=?",
                    [(lab, doc_id, i) for i, lab in enumerate(labs, 1)],
                )
            self.conn.execute("DELETE FROM meta WHERE key='page_labels_pending'")

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


def _archive_previous(conn: sqlite3.Connection, doc: Document) -> int:
    """The version number ``doc`` gets: a stored document with another checksum moves
    (its metadata and page texts) into the history and the version goes up by one."""
    prev = conn.execute(
        "SELECT sha256, metadata, version, status FROM documents WHERE doc_id=?", (doc.doc_id,)
    ).fetchone()
    if prev is None:
        return 1
    if prev[0] != doc.sha256 and prev[3] == "ok":
        old_pages = [
            r[0] for r in conn.execute("SELECT raw FROM pages WHERE doc_id=? ORDER BY page_no", (doc.doc_id,))
        ]
        conn.execute(
            "INSERT INTO document_history (doc_id, version, sha256, metadata, pages,"
            " replaced_at) VALUES (?,?,?,?,?,?)",
            (doc.doc_id, prev[2], prev[0], prev[1], json.dumps(old_pages), now()),
        )
        return prev[2] + 1
    return prev[2]


def _audit_columns(a: PageAudit) -> tuple[int, ...]:
    """A page audit as the pages table stores it (multi_column_risk 2: columns interleaved)."""
    return (
        a.chars,
        a.images,
        int(a.low_text_100),
        int(a.low_text_300),
        2 if a.interleaved_columns else int(a.multi_column_risk),
        int(a.spacing_artifact),
        int(a.contents_page),
    )
