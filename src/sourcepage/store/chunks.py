"""Reading chunks: the retrieval units of each text version (ingest writes them with
their document, see ``DocumentTables.write_chunks``)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator

from sourcepage.records import TEXT_VERSIONS, Chunk, check_text_version, parse_page_id

#: the chunks of one version over the good documents, in chunk order (as ``ChunkTables.chunks``)
_ORDERED = (
    "SELECT {cols} FROM chunks c JOIN documents d ON d.doc_id=c.doc_id AND d.status='ok'"
    " WHERE c.version=? ORDER BY c.doc_id, c.seq"
)


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
        check_text_version(version)
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

    def chunk_generation(self) -> int:
        """A counter of every change to the searchable chunks (kept by triggers, store.schema)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key='chunks_generation'").fetchone()
        return int(row[0]) if row else 0

    def iter_chunk_texts(self, version: str, batch: int = 4096) -> Iterator[tuple[str, str]]:
        """(chunk id, text) of every chunk of ``version`` (good documents, chunk order),
        streamed: memory does not grow with the store."""
        check_text_version(version)
        cur = self.conn.execute(_ORDERED.format(cols="c.chunk_id, c.text"), (version,))
        try:
            while rows := cur.fetchmany(batch):
                yield from rows
        finally:
            cur.close()

    def chunk_ids(self, version: str) -> list[str]:
        """The chunk ids of ``version`` in chunk order (as ``chunks``)."""
        return [r[0] for r in self.conn.execute(_ORDERED.format(cols="c.chunk_id"), (version,))]

    def chunk_fingerprint(self, version: str) -> str:
        """SHA-256 over the chunk ids and texts of a version: an index built from other
        chunks is stale.

        Stored in ``meta`` with the chunk generation it was computed at (ingest stores it)
        and reused while the generation is unchanged, so opening a store does not re-read
        every chunk. On a read-only connection a missing value is computed, not stored."""
        key = f"chunk_fingerprint:{version}"
        for _ in range(3):
            generation = self.chunk_generation()
            row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
            stored = json.loads(row[0]) if row else None
            if stored and stored.get("generation") == generation:
                return str(stored["sha256"])
            value = self._hash_chunks(version)
            if self.chunk_generation() != generation:
                continue  # chunks changed while hashing: hash again
            try:
                with self.conn:
                    self.conn.execute(
                        "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                        (key, json.dumps({"generation": generation, "sha256": value}, sort_keys=True)),
                    )
            except sqlite3.OperationalError:  # a read-only (query_only) connection
                pass
            return value
        raise RuntimeError(f"the chunks of {version!r} keep changing (an ingest is running); try again")

    def _hash_chunks(self, version: str) -> str:
        h = hashlib.sha256()
        for chunk_id, text in self.iter_chunk_texts(version):
            h.update(chunk_id.encode())
            h.update(b"\0")
            h.update(text.encode())
            h.update(b"\1")
        return h.hexdigest()
