"""Ingest: failures reported and skipped, incremental re-ingest, history, schema guard."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pdf_factory as pf
import pytest

from sourcepage.ingest import ingest
from sourcepage.retrieval.search import Searcher
from sourcepage.store.db import DB_NAME, SCHEMA_VERSION, Store, StoreError
from sourcepage.text.chunk import ChunkConfig
from sourcepage.text.clean import CleanConfig
from sourcepage.text.versions import TextSettings

DOCS = sorted(pf.SAFETY_CORPUS_DOCS)


def _edit_manifest(corpus: Path, doc_id: str, **fields: str) -> None:
    path = corpus / "manifest.csv"
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        header, rows = list(reader.fieldnames or []), list(reader)
    for r in rows:
        if r["doc_id"] == doc_id:
            r.update(fields)
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, lineterminator="\r\n")
        w.writeheader()
        w.writerows(r for r in rows if r["doc_id"] != doc_id or "drop" not in fields)


def _replace_pdf(corpus: Path, doc_id: str, pages: list[str]) -> None:
    pdf = pf.text_pdf(corpus / "pdf" / f"{doc_id}.pdf", pages)
    _edit_manifest(corpus, doc_id, sha256=pf.sha256_file(pdf), pages=str(len(pages)))


@pytest.fixture
def bad_corpus(fresh_corpus: Path) -> Path:
    """The safety corpus plus a corrupt, an encrypted and an image-only PDF."""
    pdf = fresh_corpus / "pdf"
    pf.corrupt_pdf(pdf / "broken.pdf")
    pf.encrypted_pdf(pdf / "locked.pdf", "Locked text about a group lockbox and permits.")
    pf.image_only_pdf(pdf / "scanned.pdf", 2)
    with (fresh_corpus / "manifest.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    rows += [{"doc_id": d} for d in ("broken", "locked", "scanned")]
    pf.write_manifest(fresh_corpus, rows)
    return fresh_corpus


def test_bad_pdfs_reported_good_ones_searchable(bad_corpus: Path, tmp_path: Path) -> None:
    store = tmp_path / "s"
    report = ingest(bad_corpus, store, workers=2)  # the process-pool path
    assert sorted(report.extracted) == DOCS
    assert set(report.failed) == {"broken", "locked", "scanned"}
    assert "unreadable PDF" in report.failed["broken"]
    assert "encrypted PDF" in report.failed["locked"]
    assert "image-only PDF" in report.failed["scanned"]
    for doc_id, reason in report.failed.items():
        assert str(bad_corpus / "pdf" / f"{doc_id}.pdf") in reason
    assert report.pages_extracted == 11

    st = Store(store)
    try:
        assert [d.doc_id for d in st.documents()] == DOCS
        rows = st.document_rows()
        assert {d: rows[d]["status"] for d in ("broken", "locked", "scanned")} == dict.fromkeys(
            ("broken", "locked", "scanned"), "failed"
        )
        assert rows["locked"]["error"] == report.failed["locked"]
        assert {w["doc_id"] for w in st.warnings() if w["kind"] == "extract"} == set(report.failed)
        assert not any(c.doc_id in report.failed for v in ("raw", "cleaned") for c in st.chunks(v))
        assert st.runs()[-1]["status"] == "ok"
        s = Searcher(st, "cleaned")
        assert s.rank("group lockbox", "bm25").pages()[0] == "loto_energy_control#p2"
        assert s.rank("hearing protection", "bm25").pages()[0] == "hse_ppe_at_work#p2"
    finally:
        st.close()


def test_store_holds_pages_and_audit_flags(safety_store: Path) -> None:
    st = Store(safety_store)
    try:
        rows = {(r["doc_id"], r["page_no"]): r for r in st.page_rows()}
        assert len(rows) == 11
        assert rows[("confined_space_entry", 2)]["low_text_100"] == 1
        assert rows[("confined_space_entry", 2)]["chars"] == 0
        assert rows[("machine_guarding", 1)]["multi_column_risk"] == 1
        assert rows[("loto_energy_control", 1)]["multi_column_risk"] == 0
        page = st.page("loto_energy_control", 1)
        assert page is not None and pf.LOTO_HEADER in page["raw"] and pf.LOTO_HEADER not in page["cleaned"]
        types = {d.doc_id: d.get("project_type") for d in st.documents()}
        assert types["machine_guarding"] == "manufacturing"
    finally:
        st.close()


def test_reingest_unchanged_extracts_nothing(fresh_corpus: Path, fresh_store: Path) -> None:
    before = Store(fresh_store)
    chunks_before = {v: before.chunks(v) for v in ("raw", "cleaned", "enriched")}
    before.close()
    report = ingest(fresh_corpus, fresh_store, workers=1)
    assert report.extracted == [] and report.rebuilt == [] and report.failed == {}
    assert sorted(report.unchanged) == DOCS
    assert report.pages_extracted == 0
    after = Store(fresh_store)
    try:
        assert {v: after.chunks(v) for v in chunks_before} == chunks_before
        assert all(r["version"] == 1 for r in after.document_rows().values())
    finally:
        after.close()


def test_changed_pdf_reextracted_alone_with_history(fresh_corpus: Path, fresh_store: Path) -> None:
    st = Store(fresh_store)
    old_sha = st.document_rows()["hse_ppe_at_work"]["sha256"]
    old_raw = st.page_texts("hse_ppe_at_work", "raw")
    st.close()
    _replace_pdf(
        fresh_corpus,
        "hse_ppe_at_work",
        [
            "Head protection\nHard hats protect against falling objects on construction sites.",
            "Gloves\nChoose gloves that resist the chemicals handled.",
        ],
    )
    report = ingest(fresh_corpus, fresh_store, workers=1)
    assert report.extracted == ["hse_ppe_at_work"]
    assert sorted(report.unchanged) == [d for d in DOCS if d != "hse_ppe_at_work"]
    assert report.pages_extracted == 2
    st = Store(fresh_store)
    try:
        row = st.document_rows()["hse_ppe_at_work"]
        assert row["version"] == 2 and row["n_pages"] == 2 and row["sha256"] != old_sha
        hist = st.history("hse_ppe_at_work")
        assert [(h["version"], h["sha256"]) for h in hist] == [(1, old_sha)]
        (old_pages,) = st.conn.execute(
            "SELECT pages FROM document_history WHERE doc_id='hse_ppe_at_work'"
        ).fetchone()
        assert json.loads(old_pages) == old_raw
        assert st.history("loto_energy_control") == []
        s = Searcher(st, "raw")
        assert s.rank("hard hats falling objects", "bm25").pages()[0] == "hse_ppe_at_work#p1"
        assert "hse_ppe_at_work#p3" not in s.rank("face-fit test", "bm25", k=None).pages()
    finally:
        st.close()


def test_pdf_turned_corrupt_keeps_previous_version(fresh_corpus: Path, fresh_store: Path) -> None:
    pdf = pf.corrupt_pdf(fresh_corpus / "pdf" / "hse_ppe_at_work.pdf")
    _edit_manifest(fresh_corpus, "hse_ppe_at_work", sha256=pf.sha256_file(pdf))
    report = ingest(fresh_corpus, fresh_store, workers=1)
    assert list(report.failed) == ["hse_ppe_at_work"]
    st = Store(fresh_store)
    try:
        row = st.document_rows()["hse_ppe_at_work"]
        assert row["status"] == "ok" and "unreadable PDF" in row["error"]
        assert Searcher(st).rank("hearing protection").pages()[0] == "hse_ppe_at_work#p2"
    finally:
        st.close()


def test_future_schema_version_refused(fresh_corpus: Path, fresh_store: Path) -> None:
    conn = sqlite3.connect(fresh_store / DB_NAME)
    with conn:
        conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    conn.close()
    with pytest.raises(StoreError) as ei:
        Store(fresh_store)
    msg = str(ei.value)
    assert "schema version 99" in msg and f"({SCHEMA_VERSION})" in msg
    with pytest.raises(StoreError, match="schema version 99"):
        ingest(fresh_corpus, fresh_store, workers=1)


def test_older_schema_without_migration_refused(fresh_store: Path) -> None:
    conn = sqlite3.connect(fresh_store / DB_NAME)
    with conn:
        conn.execute("UPDATE meta SET value='0' WHERE key='schema_version'")
    conn.close()
    with pytest.raises(StoreError, match="schema version 0; no migration"):
        Store(fresh_store)


def test_missing_store_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no store at"):
        Store(tmp_path / "nowhere")


def test_changed_chunk_settings_rebuild_without_extraction(fresh_corpus: Path, fresh_store: Path) -> None:
    st = Store(fresh_store)
    raw_before = {d: st.page_texts(d, "raw") for d in DOCS}
    n_before = len(st.chunks("raw"))
    st.close()
    settings = TextSettings(chunk=ChunkConfig(size=200, overlap=50))
    report = ingest(fresh_corpus, fresh_store, settings=settings, workers=1)
    assert report.extracted == [] and report.pages_extracted == 0
    assert sorted(report.rebuilt) == DOCS
    st = Store(fresh_store)
    try:
        assert {d: st.page_texts(d, "raw") for d in DOCS} == raw_before
        chunks = st.chunks("cleaned")
        assert len(chunks) > n_before and all(len(c.text) <= 200 for c in chunks)
        assert report.chunks["cleaned"] == len(chunks)
        assert st.get_meta("text_settings") == settings.as_dict()
    finally:
        st.close()
    again = ingest(fresh_corpus, fresh_store, settings=settings, workers=1)
    assert sorted(again.unchanged) == DOCS and again.rebuilt == []


def test_changed_clean_settings_rewrite_cleaned_pages(fresh_corpus: Path, fresh_store: Path) -> None:
    settings = TextSettings(clean=CleanConfig(headers_footers=False))
    report = ingest(fresh_corpus, fresh_store, settings=settings, workers=1)
    assert report.extracted == [] and sorted(report.rebuilt) == DOCS
    st = Store(fresh_store)
    try:
        assert st.page_texts("loto_energy_control", "cleaned")[0].startswith(pf.LOTO_HEADER)
    finally:
        st.close()


def test_changed_metadata_rebuilds_that_document(fresh_corpus: Path, fresh_store: Path) -> None:
    _edit_manifest(fresh_corpus, "machine_guarding", title="Safeguarding Machinery")
    report = ingest(fresh_corpus, fresh_store, workers=1)
    assert report.rebuilt == ["machine_guarding"] and report.extracted == []
    st = Store(fresh_store)
    try:
        c = next(c for c in st.chunks("enriched") if c.doc_id == "machine_guarding")
        assert c.text.startswith("Document: Safeguarding Machinery |")
    finally:
        st.close()


def test_force_and_engine_change_reextract(fresh_corpus: Path, fresh_store: Path) -> None:
    assert sorted(ingest(fresh_corpus, fresh_store, force=True, workers=1).extracted) == DOCS
    report = ingest(fresh_corpus, fresh_store, engine="pypdf", workers=1)
    assert sorted(report.extracted) == DOCS
    st = Store(fresh_store)
    try:
        assert {r["engine"] for r in st.document_rows().values()} == {"pypdf"}
        assert all(r["version"] == 1 for r in st.document_rows().values())  # same files: no history
    finally:
        st.close()


def test_removed_document(fresh_corpus: Path, fresh_store: Path) -> None:
    _edit_manifest(fresh_corpus, "hse_ppe_at_work", drop="1")
    report = ingest(fresh_corpus, fresh_store, workers=1)
    assert report.removed == ["hse_ppe_at_work"]
    st = Store(fresh_store)
    try:
        assert "hse_ppe_at_work" not in [d.doc_id for d in st.documents()]
        assert not any(c.doc_id == "hse_ppe_at_work" for c in st.chunks("raw"))
    finally:
        st.close()


def test_page_count_mismatch_warns(fresh_corpus: Path, tmp_path: Path) -> None:
    _edit_manifest(fresh_corpus, "loto_energy_control", pages="5")
    report = ingest(fresh_corpus, tmp_path / "s2", workers=1)
    assert "loto_energy_control: manifest says 5 pages, the PDF has 3" in report.warnings
    st = Store(tmp_path / "s2")
    try:
        assert [w["doc_id"] for w in st.warnings() if w["kind"] == "pages"] == ["loto_energy_control"]
    finally:
        st.close()


def test_schema_1_store_is_migrated_with_contents_flags(fresh_store: Path) -> None:
    """A store written before schema 2 gains the contents_page column, computed from its text."""
    import sqlite3

    from sourcepage.store.db import SCHEMA_VERSION, Store

    db = sqlite3.connect(fresh_store / "store.sqlite")
    db.execute(
        "UPDATE pages SET raw = raw || ? WHERE doc_id='loto_energy_control' AND page_no=1",
        ("\nA ........ 1\nB ........ 2\nC ........ 3",),
    )
    db.execute("ALTER TABLE pages DROP COLUMN contents_page")
    db.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    db.commit()
    db.close()
    from sourcepage.corpus.audit import refresh_contents_flags

    st = Store(fresh_store)
    assert st.get_meta("schema_version") == SCHEMA_VERSION == 6  # through 2, 3, 4 and 5, to the current one
    assert refresh_contents_flags(st) == 1  # what the next ingest does first
    assert refresh_contents_flags(st) == 0  # once
    flags = {(r["doc_id"], r["page_no"]): r["contents_page"] for r in st.page_rows()}
    assert flags[("loto_energy_control", 1)] == 1
    assert sum(flags.values()) == 1


def _as_schema_2(store: Path, beir_rows: list[tuple[str, str, str, int]] | None) -> None:
    """Turn a store back into schema 2: no beir_ids table, or the one BEIR ingest of
    schema 2 created on demand (same columns), holding ``beir_rows``."""
    db = sqlite3.connect(store / DB_NAME)
    with db:
        db.execute("DROP TABLE beir_ids")
        if beir_rows is not None:
            db.execute(
                "CREATE TABLE beir_ids (beir_id TEXT PRIMARY KEY, doc_id TEXT NOT NULL UNIQUE,"
                " dataset TEXT NOT NULL, seen_run INTEGER NOT NULL DEFAULT 0)"
            )
            db.executemany("INSERT INTO beir_ids VALUES (?,?,?,?)", beir_rows)
        db.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    db.close()


@pytest.mark.parametrize("with_beir_table", [False, True])
def test_schema_2_store_is_migrated_with_beir_ids(fresh_store: Path, with_beir_table: bool) -> None:
    """Schema 3 holds beir_ids in the schema; a schema-2 store gains it, and one that BEIR
    ingest gave the table keeps its rows."""
    rows = [("Doc/1", "doc-1-abcdef01", "tiny", 4), ("7", "7", "tiny", 4)]
    _as_schema_2(fresh_store, rows if with_beir_table else None)
    st = Store(fresh_store)
    try:
        assert st.get_meta("schema_version") == SCHEMA_VERSION == 6
        assert st.beir_id_map() == ({"doc-1-abcdef01": "Doc/1", "7": "7"} if with_beir_table else {})
        assert [d.doc_id for d in st.documents()] == DOCS  # the rest is untouched
    finally:
        st.close()
    again = Store(fresh_store)  # once
    assert again.get_meta("schema_version") == SCHEMA_VERSION
    again.close()
