"""The chunk fingerprint is stored (with the chunk generation kept by triggers) and read,
not re-hashed; any change to the searchable chunks makes it, and the indexes, stale."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from sourcepage.retrieval.index import build_index, load_index
from sourcepage.retrieval.methods import parse_method
from sourcepage.store.db import DB_NAME, Store

BM25 = parse_method("bm25")


def _hash(st: Store, version: str) -> str:
    """The fingerprint's definition, computed from scratch."""
    h = hashlib.sha256()
    for c in st.chunks(version):
        h.update(c.chunk_id.encode() + b"\0" + c.text.encode() + b"\1")
    return h.hexdigest()


def test_ingest_stores_fingerprint_and_reads_reuse_it(
    fresh_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = Store(fresh_store)
    try:
        stored = {v: st.get_meta(f"chunk_fingerprint:{v}") for v in ("raw", "cleaned", "enriched")}
        for v, value in stored.items():
            assert value == {"generation": st.chunk_generation(), "sha256": _hash(st, v)}

        def no_hashing(*a, **k):
            raise AssertionError("re-hashed the chunks")

        monkeypatch.setattr(Store, "_hash_chunks", no_hashing)
        assert st.chunk_fingerprint("raw") == stored["raw"]["sha256"]
    finally:
        st.close()


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE chunks SET text = text || ' changed' WHERE rowid = (SELECT min(rowid) FROM chunks)",
        "DELETE FROM chunks WHERE rowid = (SELECT max(rowid) FROM chunks WHERE version='raw')",
        "UPDATE documents SET status='removed' WHERE rowid = (SELECT min(rowid) FROM documents)",
        "INSERT INTO chunks SELECT version, chunk_id || 'x', doc_id, page_no, seq + 1000, spans, text"
        " FROM chunks WHERE rowid = (SELECT min(rowid) FROM chunks WHERE version='raw')",
    ],
)
def test_any_change_to_chunks_makes_index_stale(fresh_store: Path, sql: str) -> None:
    """A write by any client (here plain sqlite3, not sourcepage) bumps the generation: the
    stored fingerprint is recomputed and the index built before is stale."""
    st = Store(fresh_store)
    try:
        build_index(st, "raw", BM25)
        assert load_index(st, "raw", BM25) is not None
        before, gen = st.chunk_fingerprint("raw"), st.chunk_generation()
    finally:
        st.close()
    with sqlite3.connect(fresh_store / DB_NAME) as conn:
        conn.execute(sql)
    st = Store(fresh_store)
    try:
        assert st.chunk_generation() > gen
        after = st.chunk_fingerprint("raw")
        assert after == _hash(st, "raw") != before
        assert load_index(st, "raw", BM25) is None
        assert st.get_meta("chunk_fingerprint:raw")["sha256"] == after  # stored again
    finally:
        st.close()


def test_metadata_only_update_keeps_fingerprint(fresh_store: Path) -> None:
    st = Store(fresh_store)
    try:
        gen = st.chunk_generation()
        with st.transaction() as conn:
            conn.execute("UPDATE documents SET metadata = metadata WHERE 1")
        assert st.chunk_generation() == gen
    finally:
        st.close()


def test_read_only_connection_computes_without_storing(fresh_store: Path) -> None:
    with sqlite3.connect(fresh_store / DB_NAME) as conn:
        conn.execute("DELETE FROM meta WHERE key LIKE 'chunk_fingerprint:%'")
    st = Store(fresh_store).read_only()
    try:
        assert st.chunk_fingerprint("cleaned") == _hash(st, "cleaned")
        assert st.get_meta("chunk_fingerprint:cleaned") is None
    finally:
        st.close()


def test_schema_3_store_migrates_with_triggers(fresh_store: Path) -> None:
    """A store made before the generation counter: the migration adds it and its triggers."""
    with sqlite3.connect(fresh_store / DB_NAME) as conn:
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall():
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("DELETE FROM meta WHERE key='chunks_generation' OR key LIKE 'chunk_fingerprint:%'")
        conn.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    st = Store(fresh_store)
    try:
        assert st.get_meta("schema_version") == 5 and st.chunk_generation() == 0
        fp = st.chunk_fingerprint("raw")
        with st.transaction() as conn:
            conn.execute(
                "DELETE FROM chunks WHERE rowid = (SELECT min(rowid) FROM chunks WHERE version='raw')"
            )
        assert st.chunk_generation() == 1 and st.chunk_fingerprint("raw") != fp
    finally:
        st.close()
