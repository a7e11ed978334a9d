"""Sources: what ingest reads. A source yields the documents of a corpus, each with its
pages or the file to extract them from; ``sourcepage.ingest`` does the rest (change
detection, extraction, transactions, history, warnings, chunking, the report) once for
every source.

* :class:`ManifestSource`: a corpus folder, ``manifest.csv`` + ``pdf/`` holding PDFs and
  plain-text files (corpus.manifest, corpus.textfiles). All documents come in one batch;
  their files are extracted (in parallel for a large batch), each document is written
  in its own transaction.
* :class:`BeirSource`: a BEIR folder's ``corpus.jsonl`` (corpus.beir), streamed in
  batches of ``batch_size`` lines; each document is one page whose text is in hand; the
  documents of a batch are written in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sourcepage.corpus.beir import (
    BATCH_SIZE,
    ENGINE,
    BeirDoc,
    BeirError,
    beir_doc_id,
    beir_document,
    beir_page_text,
    dataset_name,
    iter_corpus,
)
from sourcepage.corpus.extract import ENGINES, Extracted
from sourcepage.corpus.manifest import Manifest, read_manifest
from sourcepage.records import Document, PageLayout
from sourcepage.store.db import Store
from sourcepage.text.versions import TextSettings

__all__ = ["BeirSource", "Candidate", "ManifestSource", "Removed", "Source", "Warn"]

Progress = Callable[[int, int, str], None]
#: ``warn(doc_id, kind, message)``: a warning for the run log and the report
Warn = Callable[[str | None, str, str], None]
#: the doc_ids a source marked removed, or just their count (a BEIR corpus has millions)
Removed = Sequence[str] | int


@dataclass(frozen=True)
class Candidate:
    """One document of a source: its manifest record (``sha256`` decides whether it
    changed), and either its pages in hand or the file to extract them from."""

    doc: Document
    path: Path | None = None
    pages: Extracted | None = None


class Source(Protocol):
    """What ingest asks of a source, in this order."""

    command: str  # the run-log command ("ingest", "ingest-beir")
    engine: str  # recorded with each document; another engine re-extracts it
    settings: TextSettings
    per_document_transactions: bool  # True: one transaction a document; False: one a batch

    def run_args(self, force: bool) -> dict[str, Any]:
        """The arguments recorded in the run log."""

    def unchanged(self, store: Store) -> bool:
        """True when the whole source is unchanged since the store's last ingest of it
        (nothing is read, no run is logged)."""

    def warnings(self) -> list[tuple[str | None, str, str]]:
        """(doc_id, kind, message) of the source as a whole, logged before any document."""

    def batches(self) -> Iterator[list[Any]]:
        """The source's items in batches; the next batch is read after the previous one
        is written."""

    def identify(self, store: Store, conn: Any, run_id: int, items: list[Any], warn: Warn) -> list[Candidate]:
        """The documents of a batch, inside a transaction (a source may record ids)."""

    def finish(self, store: Store, conn: Any, run_id: int) -> Removed:
        """Inside the last transaction: mark removed the documents the source no longer
        holds, record what the next ``unchanged`` compares."""


@dataclass
class ManifestSource:
    """One or more corpus folders: ``manifest.csv`` and the PDF and text files under
    ``pdf/``. Several folders ingest into one store as one collection (a doc_id may appear
    in only one of them); a document listed in none of them is marked removed."""

    corpus: str | Path  # the first folder (kept for the run log's "corpus")
    manifest: Manifest  # the first folder's manifest
    engine: str
    settings: TextSettings
    manifests: tuple[Manifest, ...] = ()
    own: Path | None = None  # the store's own folder: its rows replace the same doc_id's elsewhere

    command = "ingest"
    per_document_transactions = True

    def __post_init__(self) -> None:
        self.manifests = self.manifests or (self.manifest,)
        own = [m for m in self.manifests if self.own is not None and _same(m.corpus_dir, self.own)]
        rest = [m for m in self.manifests if m not in own]
        self._owner = {d.doc_id: m for m in (*rest, *own) for d in m.documents}

    @classmethod
    def read(
        cls,
        corpus: str | Path | Sequence[str | Path],
        *,
        engine: str,
        settings: TextSettings,
        allow_checksum_mismatch: bool = False,
        own: Path | None = None,
    ) -> ManifestSource:
        """Validate the engine and the manifests (ManifestError lists every problem of a
        manifest; a doc_id in two folders is an error naming both manifests, unless one of
        them is ``own``, the store's own folder: an edition added there replaces the row of
        the corpus)."""
        if engine not in ENGINES:
            raise ValueError(f"unknown extraction engine {engine!r}; choose from {ENGINES}")
        own = _key(own) if own is not None else None
        folders = [corpus] if isinstance(corpus, (str, Path)) else list(corpus)
        if not folders:
            raise ValueError("no corpus folder given")
        manifests = tuple(read_manifest(f, allow_checksum_mismatch=allow_checksum_mismatch) for f in folders)
        seen: dict[str, Path] = {}
        for m in manifests:
            for d in m.documents:
                if d.doc_id in seen and not (own and own in (_key(m.corpus_dir), seen[d.doc_id])):
                    raise ValueError(
                        f"{m.corpus_dir / 'manifest.csv'}: doc_id {d.doc_id!r} is also in "
                        f"{seen[d.doc_id] / 'manifest.csv'}; one collection needs unique doc_ids"
                    )
                if seen.get(d.doc_id) != own:
                    seen[d.doc_id] = _key(m.corpus_dir)
        return cls(folders[0], manifests[0], engine, settings, manifests, own)

    def run_args(self, force: bool) -> dict[str, Any]:
        args: dict[str, Any] = {
            "corpus": str(self.corpus),
            "engine": self.engine,
            "settings": self.settings.as_dict(),
            "force": force,
        }
        if len(self.manifests) > 1:
            args["corpora"] = [str(m.corpus_dir) for m in self.manifests]
        return args

    def unchanged(self, store: Store) -> bool:
        return False  # each file's checksum decides, document by document

    def warnings(self) -> list[tuple[str | None, str, str]]:
        return [
            (w.doc_id or None, f"manifest:{w.column}", str(w)) for m in self.manifests for w in m.warnings
        ]

    def batches(self) -> Iterator[list[Document]]:
        yield [d for m in self.manifests for d in m.documents if self._owner[d.doc_id] is m]

    def identify(
        self, store: Store, conn: Any, run_id: int, items: list[Document], warn: Warn
    ) -> list[Candidate]:
        """The listed documents but the withdrawn ones (kept out, with a warning, until
        ``sourcepage document restore``)."""
        states = store.document_states([d.doc_id for d in items])
        out = []
        for doc in items:
            if states.get(doc.doc_id, {}).get("status") == "withdrawn":
                warn(
                    doc.doc_id,
                    "withdrawn",
                    f"{doc.doc_id} is withdrawn: not ingested (sourcepage document restore)",
                )
                continue
            out.append(Candidate(doc, path=self._owner[doc.doc_id].pdf_path(doc)))
        return out

    def finish(self, store: Store, conn: Any, run_id: int) -> Removed:
        removed = []
        for doc_id, row in store.document_rows().items():
            if doc_id not in self._owner and row["status"] == "ok":
                store.mark_removed(conn, doc_id)
                removed.append(doc_id)
        return removed


def _key(folder: Path) -> Path:
    return Path(folder).resolve()


def _same(a: Path, b: Path) -> bool:
    return _key(a) == _key(b)


#: the store's own corpus folder (``<store>/library``): the documents added from the web
#: page or ``sourcepage document add`` (``sourcepage.editions``)
OWN_CORPUS = "library"


@dataclass
class AddedSource(ManifestSource):
    """A corpus folder added to a store's collection without touching the rest: nothing is
    marked removed, and the run log calls it ``add`` (so the store's corpus stays the one
    of its last ``ingest``). The store's own upload folder (``editions``) is read so."""

    command = "add"

    def finish(self, store: Store, conn: Any, run_id: int) -> Removed:
        return []


@dataclass
class BeirSource:
    """A BEIR folder's ``corpus.jsonl``, one document (one page) a line, streamed.

    ``progress(bytes_read, corpus_bytes, label)`` is called after every batch is written.
    The folder is not read again while ``corpus.jsonl`` (size, modification time) and the
    settings are unchanged.
    """

    beir_dir: Path
    settings: TextSettings
    title_in_text: bool = False
    batch_size: int = BATCH_SIZE
    progress: Progress | None = None
    documents: int = field(default=0, init=False)  # distinct ids identified so far

    command = "ingest-beir"
    engine = ENGINE
    per_document_transactions = False

    def __post_init__(self) -> None:
        self.beir_dir = Path(self.beir_dir)
        self.corpus = self.beir_dir / "corpus.jsonl"
        if not self.corpus.is_file():
            raise BeirError(
                f"{self.corpus} not found (a BEIR folder holds corpus.jsonl, queries.jsonl, qrels/)"
            )
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        self.dataset = dataset_name(self.beir_dir)
        stat = self.corpus.stat()
        self.size = stat.st_size
        self.fingerprint = {
            "corpus": str(self.corpus.resolve()),
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
            "settings": self.settings.as_dict(),
            "title_in_text": self.title_in_text,
        }

    def run_args(self, force: bool) -> dict[str, Any]:
        return {
            "beir": str(self.beir_dir),
            "settings": self.settings.as_dict(),
            "force": force,
            "title_in_text": self.title_in_text,
        }

    def unchanged(self, store: Store) -> bool:
        return store.get_meta("beir_source") == self.fingerprint

    def warnings(self) -> list[tuple[str | None, str, str]]:
        return []

    def batches(self) -> Iterator[list[BeirDoc]]:
        batch: list[BeirDoc] = []
        for d in iter_corpus(self.beir_dir):
            batch.append(d)
            if len(batch) >= self.batch_size:
                yield batch
                if self.progress:
                    self.progress(d.bytes_read, self.size, f"{self.documents} documents")
                batch = []
        if batch:
            yield batch
        if self.progress:
            self.progress(self.size, self.size, f"{self.documents} documents")

    def identify(
        self, store: Store, conn: Any, run_id: int, items: list[BeirDoc], warn: Warn
    ) -> list[Candidate]:
        """Give each line its doc_id (stable, in ``beir_ids``); a repeated ``_id`` is a
        ``beir:duplicate`` warning (the first line is kept), a line with neither text nor
        title a ``beir:empty`` one."""
        out = []
        for d in items:
            doc_id, first = store.claim_beir_id(conn, d.beir_id, beir_doc_id(d.beir_id), self.dataset, run_id)
            if not first:
                warn(
                    doc_id,
                    "beir:duplicate",
                    f"corpus.jsonl:{d.line}: _id {d.beir_id!r} appears again; the first one is kept",
                )
                continue
            self.documents += 1
            text = beir_page_text(d, self.title_in_text)
            if not text.strip():
                warn(
                    doc_id,
                    "beir:empty",
                    f"corpus.jsonl:{d.line}: _id {d.beir_id!r} has neither text nor title",
                )
            layout = PageLayout(
                images=0, lines=sum(1 for ln in text.split("\n") if ln.strip()), side_by_side_lines=0
            )
            doc = beir_document(d, doc_id, self.dataset, text)
            out.append(Candidate(doc, pages=Extracted(texts=[text], layouts=[layout], seconds=0.0)))
        return out

    def finish(self, store: Store, conn: Any, run_id: int) -> Removed:
        removed = store.remove_unseen_beir(conn, run_id)
        store.set_meta("beir_source", self.fingerprint, conn)
        store.set_meta("beir", {"dataset": self.dataset, "folder": str(self.beir_dir.resolve())}, conn)
        return removed
