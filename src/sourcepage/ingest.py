"""Ingest a corpus folder into a store: validate, extract, audit, clean, chunk, persist.

Corpus files are PDFs or plain text (``.txt``/``.md``, pages split at form feeds or
``<<<PAGE>>>`` lines; see corpus.textfiles). A BEIR folder goes through corpus.beir.

Incremental: a document whose file checksum and engine are unchanged is not
re-extracted; if only the text settings or its manifest fields changed, its
versions are rebuilt from the stored raw text. A document that fails (corrupt,
encrypted, empty, image-only) is reported and skipped; the others are ingested,
each in its own transaction.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from sourcepage.corpus.audit import audit_page, refresh_contents_flags
from sourcepage.corpus.extract import ENGINES, Extracted, ExtractionError
from sourcepage.corpus.manifest import read_manifest
from sourcepage.corpus.textfiles import extract_document
from sourcepage.records import Document
from sourcepage.store.db import Store
from sourcepage.text.versions import TextSettings, build_versions

Progress = Callable[[int, int, str], None]
PARALLEL_MIN_BYTES = 64 * 1024 * 1024


@dataclass
class IngestReport:
    """What one ingest did, for people (CLI) and programs (tests, run log)."""

    store: str
    engine: str
    extracted: list[str] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    pages_extracted: int = 0
    extract_seconds: float = 0.0
    wall_seconds: float = 0.0
    chunks: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def _extract_job(path: str, engine: str) -> Extracted:
    return extract_document(path, engine)


def ingest(
    corpus: str | Path,
    store: str | Path,
    *,
    engine: str = "pypdfium2",
    allow_checksum_mismatch: bool = False,
    settings: TextSettings | None = None,
    workers: int | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> IngestReport:
    """Ingest ``corpus`` (a folder with manifest.csv and pdf/) into ``store``.

    Raises ManifestError (every problem with file, line, column) before touching the
    store when the manifest is invalid.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown extraction engine {engine!r}; choose from {ENGINES}")
    t_start = time.perf_counter()
    settings = settings or TextSettings()
    manifest = read_manifest(corpus, allow_checksum_mismatch=allow_checksum_mismatch)
    st = Store(store, create=True)
    report = IngestReport(store=str(store), engine=engine)
    run_id = st.start_run(
        "ingest", {"corpus": str(corpus), "engine": engine, "settings": settings.as_dict(), "force": force}
    )
    try:
        refresh_contents_flags(st)
        with st.transaction() as conn:
            for w in manifest.warnings:
                report.warnings.append(str(w))
                st.warn(conn, run_id, w.doc_id or None, f"manifest:{w.column}", str(w))
        rows = st.document_rows()
        settings_changed = st.get_meta("text_settings") != settings.as_dict()
        todo: list[Document] = []
        for doc in manifest.documents:
            row = rows.get(doc.doc_id)
            if (
                force
                or row is None
                or row["sha256"] != doc.sha256
                or row["status"] != "ok"
                or row["engine"] != engine
            ):
                todo.append(doc)
            elif settings_changed or row["metadata"] != _metadata_json(doc):
                _rebuild(st, doc, settings)
                report.rebuilt.append(doc.doc_id)
            else:
                report.unchanged.append(doc.doc_id)
        _extract_all(st, manifest, todo, engine, settings, workers, progress, report, run_id)
        listed = {d.doc_id for d in manifest.documents}
        with st.transaction() as conn:
            for doc_id, row in rows.items():
                if doc_id not in listed and row["status"] == "ok":
                    st.mark_removed(conn, doc_id)
                    report.removed.append(doc_id)
            st.set_meta("text_settings", settings.as_dict(), conn)
        for v in ("raw", "cleaned", "enriched"):
            report.chunks[v] = st.chunk_count(v)
        for names in (report.extracted, report.rebuilt, report.unchanged, report.removed):
            names.sort()  # completion order of parallel workers is not deterministic
        report.wall_seconds = time.perf_counter() - t_start
        st.finish_run(run_id, "ok", report.as_dict())
        return report
    except BaseException as e:
        st.finish_run(run_id, f"failed: {type(e).__name__}: {e}", report.as_dict())
        raise
    finally:
        st.close()


def _metadata_json(doc: Document) -> str:
    import json

    return json.dumps(doc.as_dict(), sort_keys=True)


def _rebuild(st: Store, doc: Document, settings: TextSettings) -> None:
    raw = st.page_texts(doc.doc_id, "raw")
    cleaned, chunks = build_versions(doc, raw, settings)
    with st.transaction() as conn:
        st.update_metadata(conn, doc)
        st.set_cleaned(conn, doc.doc_id, cleaned)
        st.write_chunks(conn, doc.doc_id, chunks)


def _extract_all(
    st: Store,
    manifest,
    todo: list[Document],
    engine: str,
    settings: TextSettings,
    workers: int | None,
    progress: Progress | None,
    report: IngestReport,
    run_id: int,
) -> None:
    if not todo:
        return
    if workers is None:
        # spawning processes costs ~0.5 s: worth it only for a sizeable batch (measured: the
        # 6-PDF, 1.6 MB OSHA corpus ingests in 0.3 s serially and 0.9 s with 2 processes)
        size = sum(manifest.pdf_path(d).stat().st_size for d in todo)
        workers = 1 if size < PARALLEL_MIN_BYTES else (os.cpu_count() or 1)
    n_workers = max(1, min(workers, len(todo)))

    def store_one(doc: Document, result: Extracted | BaseException) -> None:
        with st.transaction() as conn:
            if isinstance(result, BaseException):
                msg = (
                    str(result)
                    if isinstance(result, ExtractionError)
                    else f"{type(result).__name__}: {result}"
                )
                msg = f"{manifest.pdf_path(doc)}: {msg}"
                st.record_failure(conn, doc, msg)
                st.warn(conn, run_id, doc.doc_id, "extract", msg)
                report.failed[doc.doc_id] = msg
                return
            audits = [audit_page(t, la) for t, la in zip(result.texts, result.layouts, strict=True)]
            cleaned, chunks = build_versions(doc, result.texts, settings)
            st.write_document(
                conn,
                doc,
                engine=engine,
                raw=result.texts,
                cleaned=cleaned,
                audits=audits,
                chunks=chunks,
                seconds=result.seconds,
            )
            if doc.pages and doc.pages.isdigit() and int(doc.pages) != len(result.texts):
                msg = f"manifest says {doc.pages} pages, the PDF has {len(result.texts)}"
                st.warn(conn, run_id, doc.doc_id, "pages", msg)
                report.warnings.append(f"{doc.doc_id}: {msg}")
            report.extracted.append(doc.doc_id)
            report.pages_extracted += len(result.texts)
            report.extract_seconds += result.seconds

    done = 0
    if n_workers == 1:
        for doc in todo:
            try:
                res: Extracted | BaseException = extract_document(manifest.pdf_path(doc), engine)
            except Exception as e:  # one bad document must not sink the others
                res = e
            store_one(doc, res)
            done += 1
            if progress:
                progress(done, len(todo), doc.doc_id)
        return
    ctx = mp.get_context("spawn")  # no fork: torch/BLAS threads may already run
    with ProcessPoolExecutor(max_workers=n_workers, mp_context=ctx) as pool:
        futures = {pool.submit(_extract_job, str(manifest.pdf_path(d)), engine): d for d in todo}
        for fut in as_completed(futures):
            doc = futures[fut]
            try:
                res = fut.result()
            except Exception as e:
                res = e
            store_one(doc, res)
            done += 1
            if progress:
                progress(done, len(todo), doc.doc_id)
