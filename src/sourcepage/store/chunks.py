"""Reading chunks: the retrieval units of each text version (ingest writes them with
their document, see ``DocumentTables.write_chunks``)."""

from __future__ import annotations

import hashlib
import json
import sqlite3

from sourcepage.records import TEXT_VERSIONS, Chunk, parse_page_id


class ChunkTables:
    """The ``chunks`` table of a Store, read side."""

    conn: sqlite3.Connection

    def chunk_count(self, version: str) -> int:
        """Chunks of a text version over the good documents."""
        return self.conn.execute(
            "SELECT count(*) FROM chunks c JOIN documents d ON d.doc_id=c.doc_id AND"
            " d.status='ok' WHERE c.version=?",
            (version,),
        ).fetchone()[0]

    def chunk_counts(self) -> dict[str, int]:
        """version → chunks over the good documents, for every text version."""
        return {v: int(self.chunk_count(v)) for v in TEXT_VERSIONS}

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

    def chunk(self, version: str, chunk_id: str) -> Chunk | None:
        """One chunk of a text version, or None."""
        row = self.conn.execute(
            "SELECT chunk_id, doc_id, page_no, spans, text FROM chunks WHERE version=? AND chunk_id=?",
            (version, chunk_id),
        ).fetchone()
        if row is None:
            return None
        return Chunk(row[0], row[1], row[2], tuple(tuple(s) for s in json.loads(row[3])), row[4])

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
