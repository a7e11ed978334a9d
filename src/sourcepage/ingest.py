"""Ingest a corpus into a store: one loop over any source (corpus.sources).

Sources: a corpus folder (``manifest.csv`` + ``pdf/`` with PDFs and plain-text files,
pages split at form feeds or ``<<<PAGE>>>`` lines; see corpus.textfiles) through
:func:`ingest`, and a BEIR folder (corpus.beir) through :func:`ingest_beir`. For every
document a source yields, the loop decides by its checksum, engine and status whether
to extract it (new, changed, failed before, ``force``), rebuild its text versions from
the stored raw text (only the text settings or its metadata changed), or leave it; it
extracts (in worker processes under limits: one, or one per core for a large batch
of files), audits, cleans, chunks and writes, records failures and warnings in the run
log, marks removed what the source no longer holds, and fills the report.

With an ``executor`` (a process pool, Ray: ``sourcepage.executor``) each document is
extracted, audited, cleaned and chunked in one job (:func:`_prepare_job`) and only
written here; the store is the same as without one.

A document that fails (corrupt, encrypted, empty, image-only) or hits a limit
(:class:`~sourcepage.limits.Limits`: pages, memory, time; files are extracted in worker
processes under them) is reported with the reason and skipped; the others are
ingested. A manifest source writes each document in its own transaction, a BEIR source
each batch (of ``batch_size`` documents) in one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

from sourcepage.corpus.audit import audit_page, refresh_contents_flags, unmapped_glyphs
from sourcepage.corpus.beir import BATCH_SIZE, BEIR_SETTINGS
from sourcepage.corpus.extract import Extracted, ExtractionError
from sourcepage.corpus.pagelabels import labels_from_text, refresh_page_labels
from sourcepage.corpus.sources import OWN_CORPUS, BeirSource, Candidate, ManifestSource, Removed, Source
from sourcepage.corpus.structure import document_structure
from sourcepage.corpus.textfiles import extract_document
from sourcepage.executor import Executor, LimitedPool
from sourcepage.limits import EXTRACT_LIMITS, LimitExceeded, Limits
from sourcepage.records import TEXT_VERSIONS, Document
from sourcepage.store.db import Store
from sourcepage.store.lock import writer_lock
from sourcepage.text.versions import TextSettings, build_versions, check_enrich_fields

Progress = Callable[[int, int, str], None]
#: a batch of files smaller than this is extracted in process when ``workers`` is None
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

    def note_extracted(self, doc_id: str, pages: int, seconds: float) -> None:
        self.extracted.append(doc_id)
        self.pages_extracted += pages
        self.extract_seconds += seconds

    def note_rebuilt(self, doc_id: str) -> None:
        self.rebuilt.append(doc_id)

    def note_unchanged(self, doc_id: str) -> None:
        self.unchanged.append(doc_id)

    def note_failed(self, doc_id: str, message: str) -> None:
        self.failed[doc_id] = message

    def note_warning(self, kind: str, message: str) -> None:
        self.warnings.append(message)

    def note_removed(self, removed: Removed) -> None:
        self.removed.extend([] if isinstance(removed, int) else removed)

    def note_skipped(self, documents: int) -> None:
        """Not used: a manifest is compared document by document, never skipped whole."""

    def finish(self) -> None:
        for names in (self.extracted, self.rebuilt, self.unchanged, self.removed):
            names.sort()


@dataclass
class BeirIngestReport:
    """Counts of one BEIR ingest (no per-document lists: corpora have millions)."""

    store: str
    dataset: str
    documents: int = 0
    written: int = 0
    unchanged: int = 0
    removed: int = 0
    duplicates: int = 0
    empty: int = 0
    skipped_unchanged_file: bool = False
    warnings: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0
    chunks: dict[str, int] = field(default_factory=dict)

    WARNING_LIMIT = 50

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)

    def note_extracted(self, doc_id: str, pages: int, seconds: float) -> None:
        self.documents += 1
        self.written += 1

    def note_rebuilt(self, doc_id: str) -> None:
        self.documents += 1
        self.written += 1

    def note_unchanged(self, doc_id: str) -> None:
        self.documents += 1
        self.unchanged += 1

    def note_failed(self, doc_id: str, message: str) -> None:
        self.documents += 1
        self.note_warning("extract", message)

    def note_warning(self, kind: str, message: str) -> None:
        """Counts duplicate ids and empty documents; keeps the first 50 messages (the
        store's warnings table has them all)."""
        if kind == "beir:duplicate":
            self.duplicates += 1
        elif kind == "beir:empty":
            self.empty += 1
        if len(self.warnings) < self.WARNING_LIMIT:
            self.warnings.append(message)
        elif len(self.warnings) == self.WARNING_LIMIT:
            self.warnings.append("… further warnings left out (see the store's warnings table)")

    def note_removed(self, removed: Removed) -> None:
        self.removed += removed if isinstance(removed, int) else len(removed)

    def note_skipped(self, documents: int) -> None:
        self.skipped_unchanged_file = True
        self.documents = self.unchanged = documents

    def finish(self) -> None:
        pass


Report = IngestReport | BeirIngestReport


def ingest(
    corpus: str | Path | Sequence[str | Path],
    store: str | Path,
    *,
    engine: str = "pypdfium2",
    allow_checksum_mismatch: bool = False,
    settings: TextSettings | None = None,
    workers: int | None = None,
    force: bool = False,
    progress: Progress | None = None,
    limits: Limits = EXTRACT_LIMITS,
    executor: Executor | None = None,
) -> IngestReport:
    """Ingest ``corpus`` (a folder with manifest.csv and pdf/, or several such folders
    that make one collection) into ``store``.

    Raises ManifestError (every problem with file, line, column) before touching the
    store when the manifest is invalid. ``workers``: processes extracting files (None:
    every core for a batch of 64 MB or more, else 1), each under ``limits``; with
    ``executor`` (e.g. Ray) its jobs extract and chunk instead, without the limits.
    ``progress(done, total, doc_id)`` is called after each extracted document.
    """
    t0 = time.perf_counter()
    source = ManifestSource.read(
        with_own_corpus(corpus, store),
        engine=engine,
        settings=settings or TextSettings(),
        allow_checksum_mismatch=allow_checksum_mismatch,
        own=Path(store) / OWN_CORPUS,
    )
    check_enrich_fields(source.settings.enrich_fields, [c for m in source.manifests for c in m.extra_columns])
    report = IngestReport(store=str(store), engine=engine)
    run(
        source,
        store,
        report,
        force=force,
        workers=workers,
        progress=progress,
        executor=executor,
        started=t0,
        limits=limits,
    )
    return report


def with_own_corpus(corpus: str | Path | Sequence[str | Path], store: str | Path) -> list[str | Path]:
    """The corpus folders and the store's own (``<store>/library``: the documents added from
    the web page) when it lists any, so that an ingest keeps them rather than removing them;
    a new edition added there of a corpus document replaces the corpus's row."""
    folders = [corpus] if isinstance(corpus, (str, Path)) else list(corpus)
    own = Path(store) / OWN_CORPUS
    if (own / "manifest.csv").is_file() and own.resolve() not in {Path(f).resolve() for f in folders}:
        folders.append(own)
    return folders


def ingest_beir(
    beir_dir: str | Path,
    store: str | Path,
    *,
    settings: TextSettings | None = None,
    title_in_text: bool = False,
    batch_size: int = BATCH_SIZE,
    force: bool = False,
    progress: Progress | None = None,
) -> BeirIngestReport:
    """Stream ``beir_dir/corpus.jsonl`` into ``store``: one document, one page each.

    ``progress(bytes_read, corpus_bytes, label)`` is called after every batch. Documents
    of the store that the corpus no longer holds are marked removed (a store holds one
    corpus). Returns counts; problems with single documents are warnings.
    """
    t0 = time.perf_counter()
    source = BeirSource(Path(beir_dir), settings or BEIR_SETTINGS, title_in_text, batch_size, progress)
    report = BeirIngestReport(store=str(store), dataset=source.dataset)
    run(source, store, report, force=force, started=t0)
    return report


def run(
    source: Source,
    store: str | Path,
    report: Report,
    *,
    force: bool = False,
    workers: int | None = None,
    progress: Progress | None = None,
    executor: Executor | None = None,
    started: float | None = None,
    limits: Limits = EXTRACT_LIMITS,
) -> Report:
    """The ingest loop: every document of ``source`` into ``store``, noted in ``report``.

    ``executor`` extracts and chunks the files without limits (default: a LimitedPool
    extracting under ``limits``, its size chosen by ``workers``, see :func:`ingest`);
    ``progress(done, total, doc_id)`` follows the extracted documents of each batch.
    """
    t0 = time.perf_counter() if started is None else started
    # one ingest at a time (StoreBusy for the second): two at once left a store matching neither
    with writer_lock(store, source.command), closing(Store(store, create=True)) as st:
        if not force and source.unchanged(st):
            report.note_skipped(st.document_count())
            report.chunks = st.chunk_counts()
            report.wall_seconds = time.perf_counter() - t0
            return report
        run_id = st.start_run(source.command, source.run_args(force))
        loop = _Loop(st, source, report, run_id, force, workers, progress, executor, limits)
        try:
            loop.run()
            for version in TEXT_VERSIONS:  # stored now, so that no search has to hash the chunks
                st.chunk_fingerprint(version)
            report.chunks = st.chunk_counts()
            report.finish()
            report.wall_seconds = time.perf_counter() - t0
            st.finish_run(run_id, "ok", report.as_dict())
            return report
        except BaseException as e:
            st.finish_run(run_id, f"failed: {type(e).__name__}: {e}", report.as_dict())
            raise
        finally:
            loop.close()


#: what the extraction workers import once, in the forkserver
PRELOAD = ("sourcepage.ingest",)


def _extract_job(job: tuple[str, str, int]) -> Extracted | Exception:
    """Extract one file (in a worker process or in this one); an error is returned, not
    raised, so that one bad document does not sink the others."""
    path, engine, max_pages = job
    try:
        return extract_document(path, engine, max_pages)
    except Exception as e:
        return e


@dataclass
class Prepared:
    """A document extracted, audited, cleaned and chunked by one executor job."""

    extracted: Extracted
    audits: list[Any]
    cleaned: list[str]
    chunks: dict[str, Any]
    structure: list[tuple[str, str, str]]


def _prepare_job(job: tuple[str, str, int, Document, TextSettings]) -> Prepared | Exception:
    """Extract one file, then audit, clean and chunk it (an extraction error is returned,
    as by :func:`_extract_job`; an error after it is raised, as in this process)."""
    path, engine, max_pages, doc, settings = job
    result = _extract_job((path, engine, max_pages))
    if isinstance(result, Exception):
        return result
    return Prepared(result, *_audit_and_chunk(doc, result, settings))


def _audit_and_chunk(
    doc: Document, result: Extracted, settings: TextSettings
) -> tuple[list[Any], list[str], dict[str, Any], list[tuple[str, str, str]]]:
    audits = [audit_page(t, la) for t, la in zip(result.texts, result.layouts, strict=True)]
    cleaned, chunks = build_versions(doc, result.texts, settings, result.ordered)
    pages = document_structure(result.texts, result.lines, result.toc, [a.contents_page for a in audits])
    rows = [(p.section, json.dumps(list(p.sections), ensure_ascii=False), p.kind) for p in pages]
    return audits, cleaned, chunks, rows


def _metadata_json(doc: Document) -> str:
    return json.dumps(doc.as_dict(), sort_keys=True)


class _Loop:
    """One run of the ingest loop (state shared by its steps)."""

    def __init__(
        self,
        st: Store,
        source: Source,
        report: Report,
        run_id: int,
        force: bool,
        workers: int | None,
        progress: Progress | None,
        executor: Executor | None,
        limits: Limits,
    ):
        self.st, self.source, self.report, self.run_id = st, source, report, run_id
        self.force, self.workers, self.progress = force, workers, progress
        self.executor: Executor | LimitedPool | None = executor
        self._own_executor, self.limits = False, limits
        self.settings = source.settings

    def close(self) -> None:
        if self._own_executor and self.executor is not None:
            self.executor.close()

    def warn(self, conn: Any, doc_id: str | None, kind: str, message: str) -> None:
        """A warning in the run log (inside the transaction ``conn``) and the report."""
        self.st.warn(conn, self.run_id, doc_id, kind, message)
        self.report.note_warning(kind, message)

    def run(self) -> None:
        st = self.st
        refresh_contents_flags(st)
        self.force = self.force or st.structure_pending()  # schema 5: headings come from the PDFs
        refresh_page_labels(st)
        with st.transaction() as conn:
            for doc_id, kind, message in self.source.warnings():
                self.warn(conn, doc_id, kind, message)
        settings_changed = st.get_meta("text_settings") != self.settings.as_dict()
        for batch in self.source.batches():
            with st.transaction() as conn:
                cands = self.source.identify(
                    st, conn, self.run_id, batch, lambda d, k, m, conn=conn: self.warn(conn, d, k, m)
                )
            self._batch(cands, settings_changed)
        with st.transaction() as conn:
            self.report.note_removed(self.source.finish(st, conn, self.run_id))
            st.set_meta("text_settings", self.settings.as_dict(), conn)
            st.structure_done(conn)

    def _batch(self, cands: list[Candidate], settings_changed: bool) -> None:
        """Classify, then rebuild and write the documents of one batch."""
        states = self.st.document_states([c.doc.doc_id for c in cands])
        rebuild: list[Candidate] = []
        write: list[Candidate] = []
        for c in cands:
            row = states.get(c.doc.doc_id)
            if (
                self.force
                or row is None
                or row["sha256"] != c.doc.sha256
                or row["status"] != "ok"
                or row["engine"] != self.source.engine
            ):
                write.append(c)
            elif settings_changed or row["metadata"] != _metadata_json(c.doc):
                rebuild.append(c)
            else:
                self.report.note_unchanged(c.doc.doc_id)
        # rebuilds first, then the written documents; one transaction each, or one for all
        one_each = self.source.per_document_transactions
        units = chain(((c, None) for c in rebuild), self._extracted(write))
        total, done = len(rebuild) + len(write), 0
        group: list[tuple[Candidate, Extracted | Prepared | Exception | None]] = []
        for unit in units:
            group.append(unit)
            if not one_each and len(group) < total:
                continue
            with self.st.transaction() as conn:
                for c, result in group:
                    if result is None:
                        self._rebuild(conn, c)
                    else:
                        self._write(conn, c, result)
            for c, result in group:
                if result is not None and self.progress:
                    done += 1
                    self.progress(done, len(write), c.doc.doc_id)
            group = []

    def _extracted(
        self, write: list[Candidate]
    ) -> Iterator[tuple[Candidate, Extracted | Prepared | Exception]]:
        """(candidate, pages or error) in the order of ``write``: pages in hand as they
        are, files extracted through the executor a few at a time."""
        need = [c for c in write if c.pages is None]
        if not need:
            yield from ((c, c.pages) for c in write)  # type: ignore[misc]
            return
        ex = self._executor(need)
        step = 1 if ex.workers == 1 else 4 * ex.workers
        for i in range(0, len(write), step):
            part = write[i : i + step]
            jobs = [(str(c.path), self.source.engine, self.limits.pages) for c in part if c.pages is None]
            if isinstance(ex, LimitedPool):
                results = iter(ex.settle(_extract_job, jobs))
            else:  # an executor of the caller's: its jobs chunk too
                docs = [(c.doc, self.settings) for c in part if c.pages is None]
                results = iter(ex.map(_prepare_job, [j + d for j, d in zip(jobs, docs, strict=True)]))
            for c in part:
                yield c, (c.pages if c.pages is not None else next(results))

    def _executor(self, need: list[Candidate]) -> Executor | LimitedPool:
        if self.executor is None:
            workers = self.workers
            if workers is None:
                # spawning processes costs ~0.5 s: worth it only for a sizeable batch (measured: the
                # 6-PDF, 1.6 MB OSHA corpus ingests in 0.3 s serially and 0.9 s with 2 processes)
                size = sum(c.path.stat().st_size for c in need if c.path is not None)
                workers = 1 if size < PARALLEL_MIN_BYTES else (os.cpu_count() or 1)
            self.executor = LimitedPool(max(1, min(workers, len(need))), self.limits, PRELOAD)
            self._own_executor = True
        return self.executor

    def _rebuild(self, conn: Any, c: Candidate) -> None:
        """New text versions from the stored raw text (settings or metadata changed)."""
        raw = self.st.page_texts(c.doc.doc_id, "raw")
        cleaned, chunks = build_versions(c.doc, raw, self.settings, self.st.ordered_texts(c.doc.doc_id))
        self.st.update_metadata(conn, c.doc)
        self.st.set_cleaned(conn, c.doc.doc_id, cleaned)
        self.st.write_chunks(conn, c.doc.doc_id, chunks)
        self.report.note_rebuilt(c.doc.doc_id)

    def _write(self, conn: Any, c: Candidate, result: Extracted | Prepared | Exception) -> None:
        """Audit, clean, chunk and write one extracted document, or record its failure."""
        doc, st = c.doc, self.st
        if isinstance(result, Exception):
            known = isinstance(result, (ExtractionError, LimitExceeded))
            msg = str(result) if known else f"{type(result).__name__}: {result}"
            if c.path is not None:
                msg = f"{c.path}: {msg}"
            st.record_failure(conn, doc, msg)
            st.warn(conn, self.run_id, doc.doc_id, "extract", msg)
            self.report.note_failed(doc.doc_id, msg)
            return
        read = result.extracted.sha256 if isinstance(result, Prepared) else result.sha256
        if read and doc.sha256 and read != doc.sha256:
            changed = ExtractionError(
                f"the file changed during ingest: its manifest row was checked against SHA-256 {doc.sha256}, "
                f"the bytes extracted have {read}; nothing stored, run ingest again"
            )
            self._write(conn, c, changed)
            return
        if isinstance(result, Prepared):
            audits, cleaned, chunks, pages = result.audits, result.cleaned, result.chunks, result.structure
            result = result.extracted
        else:
            audits, cleaned, chunks, pages = _audit_and_chunk(doc, result, self.settings)
        st.write_document(
            conn,
            doc,
            engine=self.source.engine,
            raw=result.texts,
            cleaned=cleaned,
            audits=audits,
            chunks=chunks,
            seconds=result.seconds,
            ocr=result.ocr,
            labels=result.labels or labels_from_text(result.texts),
            ordered=result.ordered,
        )
        st.set_structure(conn, doc.doc_id, pages)
        garbled = [n for n, t in enumerate(result.texts, 1) if unmapped_glyphs(t)]
        if garbled:
            shown = ", ".join(map(str, garbled[:10])) + (" …" if len(garbled) > 10 else "")
            msg = f"page(s) {shown}: mostly control or private-use characters (a font without a Unicode map)"
            st.warn(conn, self.run_id, doc.doc_id, "glyphs", msg)
            self.report.note_warning("glyphs", f"{doc.doc_id}: {msg}")
        for notice in result.notices:
            st.warn(conn, self.run_id, doc.doc_id, "ocr", notice)
            self.report.note_warning("ocr", f"{doc.doc_id}: {notice}")
        if doc.pages and doc.pages.isdigit() and int(doc.pages) != len(result.texts):
            msg = f"manifest says {doc.pages} pages, the PDF has {len(result.texts)}"
            st.warn(conn, self.run_id, doc.doc_id, "pages", msg)
            self.report.note_warning("pages", f"{doc.doc_id}: {msg}")
        self.report.note_extracted(doc.doc_id, len(result.texts), result.seconds)
