"""Add a document to a store, replace it with a new edition, withdraw or restore it, from
outside any corpus folder: ``sourcepage document add FILE`` and the library page's editor
(issue 50). The service and the CLI are thin shells over these functions.

An added PDF is kept in the store's own corpus folder ``<store>/library`` (``OWN_CORPUS``:
``manifest.csv`` and ``pdf/``), never beside the person's sources or in the repository.
Its manifest row is drafted from the PDF (``corpus.draft``: the guessed fields stay
marked as guessed) and completed by the fields the person gives (a field they give is no
longer a guess). It is ingested alone (``corpus.sources.AddedSource``: the rest of the
store is not touched, nothing is marked removed), then the indexes a search needs are
built again. A later ``sourcepage ingest`` reads ``<store>/library`` with its corpus.

Every change holds the store's edit lock (``store.lock.edit_lock``): one at a time, a
second gets StoreBusy; while it runs, searches keep the indexes they loaded
(``api.service``), so the service answers throughout.

A change that fails leaves the store as it was: the manifest is written back, the copied
PDF removed, and the failure row of a new document deleted (``Store.undo_failure``); the
error names the file. A change killed midway (kill -9, a power cut) leaves its journal
(``library/change.json``); the next change first finishes or undoes it (``recover``), and
``sourcepage document recover`` does so at once.

A new edition moves the old one's metadata and page texts into the store's history
(``Store.history``: version, SHA-256, when replaced); its PDF stays in ``library/pdf``.
Page ids name the current edition: a citation of the old one resolves to the same page of
the new edition, and the old text is in the history. A new edition of a document of the
corpus folder is kept in the library too, and its row there replaces the corpus's in every
later ingest (``ManifestSource.read(own=...)``).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import re
import secrets
import shutil
import time
from collections.abc import Callable, Mapping
from contextlib import closing
from pathlib import Path

from sourcepage.corpus.draft import DraftRow, PdfFacts, read_facts, row_for, slug
from sourcepage.corpus.manifest import DOC_ID
from sourcepage.corpus.sources import OWN_CORPUS, AddedSource
from sourcepage.limits import EXTRACT_LIMITS, Limits
from sourcepage.records import GUESSED, MANIFEST_COLUMNS, Document
from sourcepage.store.db import Store
from sourcepage.store.files import atomic_open, write_text
from sourcepage.store.lock import edit_lock
from sourcepage.store.schema import StoreError, now
from sourcepage.text.versions import TextSettings

__all__ = [
    "EDITABLE",
    "OWN_CORPUS",
    "EditError",
    "Progress",
    "add_document",
    "check_pdf",
    "edition_fields",
    "finish_or_undo",
    "own_doc_ids",
    "recover",
    "draft_upload",
    "reindex",
    "safe_file_name",
    "set_withdrawn",
    "stage_upload",
    "staged_path",
]

#: ``progress(phase, percent, message)``: what a change is doing (a job's state)
Progress = Callable[[str, int, str], None]
#: the manifest's fields computed from the PDF and where it came from, never typed in
COMPUTED = ("file", "sha256", "pages", "found_in")
#: the fields a person gives: every other manifest column, in manifest order
EDITABLE = tuple(c for c in MANIFEST_COLUMNS if c not in COMPUTED)
PDF_MAGIC = b"%PDF-"
INCOMING = "incoming"
#: the journal of the change under way (``recover`` reads what a killed one left)
JOURNAL = "change.json"
#: how long an upload drafted but not added is kept (a day: the form may wait overnight)
STAGED_SECONDS = 24 * 3600
_STAGED = re.compile(r"^[0-9a-f]{16}-[A-Za-z0-9][A-Za-z0-9._-]{0,99}\.pdf\Z")


class EditError(ValueError):
    """An upload or a change that cannot be made; the message names the file and why."""


def _quiet(phase: str, percent: int, message: str) -> None:
    pass


# --------------------------------------------------------------------------- the upload


def safe_file_name(name: str) -> str:
    """A file name safe to keep: the last part of ``name`` (either slash), other
    characters than letters, digits, ``.``, ``_`` and ``-`` as ``-``, no leading dot,
    ending ``.pdf``, at most 100 characters: no path leaves the folder it is put in."""
    base = re.split(r"[\\/]", name.strip())[-1]
    stem = base[:-4] if base.lower().endswith(".pdf") else base
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip(".-_")[:96] or "document"
    return stem + ".pdf"


def check_pdf(name: str, head: bytes, size: int) -> None:
    """EditError unless the bytes are a PDF (they start ``%PDF-``) and not empty."""
    if size == 0:
        raise EditError(f"{name!r} is empty")
    if not head.startswith(PDF_MAGIC):
        raise EditError(f"{name!r} is not a PDF (it does not start with %PDF-): only PDF files can be added")


def _library(store: str | Path) -> Path:
    return Path(store) / OWN_CORPUS


def stage_upload(store: str | Path, name: str, data: bytes) -> Path:
    """Keep an uploaded PDF in ``<store>/library/incoming`` under a fresh name (the staged
    id: ``staged_path`` finds it again); EditError when it is not a PDF."""
    check_pdf(name, data[:8], len(data))
    folder = _library(store) / INCOMING
    folder.mkdir(parents=True, exist_ok=True)
    _forget_stale(folder)
    path = folder / f"{secrets.token_hex(8)}-{safe_file_name(name)}"
    with atomic_open(path, "wb") as f:
        f.write(data)
    return path


def _forget_stale(folder: Path) -> None:
    """Remove the uploads drafted but never added (older than ``STAGED_SECONDS``)."""
    limit = time.time() - STAGED_SECONDS
    for p in folder.iterdir():
        with contextlib.suppress(OSError):
            if p.is_file() and p.stat().st_mtime < limit:
                p.unlink()


def staged_path(store: str | Path, staged: str) -> Path:
    """The staged upload ``staged`` (a name ``stage_upload`` made); EditError otherwise."""
    path = _library(store) / INCOMING / staged
    if not _STAGED.match(staged) or not path.is_file():
        raise EditError(f"no uploaded file {staged!r}: upload it again")
    return path


def original_name(staged: Path) -> str:
    """The uploaded file's (safe) name, without the staged prefix."""
    return staged.name.split("-", 1)[1] if _STAGED.match(staged.name) else staged.name


def draft_upload(pdf: Path, limits: Limits = EXTRACT_LIMITS) -> DraftRow:
    """The manifest row drafted from one PDF (read in a worker under ``limits``: a PDF from
    outside); EditError naming the file when it cannot be read."""
    from sourcepage.executor import LimitedPool

    name = original_name(pdf)
    with LimitedPool(workers=1, limits=limits) as pool:
        (facts,) = pool.settle(read_facts, [str(pdf)])
    if not isinstance(facts, PdfFacts):
        raise EditError(f"{name!r} could not be read as a PDF: {str(facts) or type(facts).__name__}")
    if facts.pages == 0:
        raise EditError(f"{name!r} has no pages")
    row = row_for(slug(Path(name).stem), pdf, facts, "")
    title = Path(name).stem if row.doc.title == pdf.stem else row.doc.title  # not the staged name
    return DraftRow(dataclasses.replace(row.doc, file=name, title=title), row.guesses)


# --------------------------------------------------------------------------- the row


def completed_row(draft: DraftRow, fields: Mapping[str, str], file: str, found_in: str) -> Document:
    """The drafted row with the person's fields over it (a field given is no longer a
    guess), ``file`` and ``found_in``; EditError for a bad doc_id."""
    row = draft.doc.as_dict()
    guessed = [g for g in draft.doc.guessed]
    for key in EDITABLE:
        value = str(fields.get(key, "") or "").strip()
        if value and value != row.get(key, ""):
            row[key] = value
            guessed = [g for g in guessed if g != key]
    if not DOC_ID.match(row["doc_id"]):
        raise EditError(
            f"doc_id {row['doc_id']!r}: lower-case letters, digits, '-' and '_', "
            "starting with a letter or digit"
        )
    row |= {"file": file, "found_in": found_in, GUESSED: ";".join(guessed)}
    return Document.from_dict(row)


def _read_rows(manifest: Path) -> list[dict[str, str]]:
    if not manifest.is_file():
        return []
    with manifest.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def own_doc_ids(store: str | Path) -> set[str]:
    """The doc_ids the store's library lists (added here: they may get new editions)."""
    return {r.get("doc_id", "") for r in _read_rows(_library(store) / "manifest.csv")}


def _manifest_text(rows: list[dict[str, str]]) -> str:
    extra = list(dict.fromkeys(k for r in rows for k in r if k not in MANIFEST_COLUMNS))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=[*MANIFEST_COLUMNS, *extra], lineterminator="\n", restval="")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def _kept_name(folder: Path, name: str, sha: str) -> str:
    """``name``, or ``stem-2.pdf`` … when another file (an older edition) holds it."""
    from sourcepage.corpus.manifest import sha256_file

    stem, n, cand = name[:-4], 1, name
    while (folder / cand).exists() and sha256_file(folder / cand) != sha:
        n += 1
        cand = f"{stem}-{n}.pdf"
    return cand


# --------------------------------------------------------------------------- the changes


def add_document(
    store: str | Path,
    pdf: Path,
    fields: Mapping[str, str],
    by: str,
    replaces: str = "",
    progress: Progress = _quiet,
    draft: DraftRow | None = None,
) -> Document:
    """Add the PDF at ``pdf`` to ``store`` (or, with ``replaces``, make it the new edition of
    that document), ingest it and build the indexes again; the document as written.
    ``draft``: its drafted row when already read (``draft_upload``). EditError for a file
    or fields that cannot be added (the store unchanged), StoreBusy when another change
    is under way."""
    with edit_lock(store, f"adding {original_name(pdf)}"):
        progress("reading", 5, f"reading {original_name(pdf)}")
        recover(Path(store), progress)
        try:
            return _add(Path(store), pdf, fields, by, replaces, progress, draft or draft_upload(pdf))
        except EditError:
            pdf.unlink(missing_ok=True)  # the staged upload: upload it again, corrected
            raise


def _add(
    store: Path,
    pdf: Path,
    fields: Mapping[str, str],
    by: str,
    replaces: str,
    progress: Progress,
    draft: DraftRow,
) -> Document:
    from sourcepage.corpus.manifest import sha256_file

    name = original_name(pdf)
    rows = _read_rows(_library(store) / "manifest.csv")
    with closing(Store(store)) as st:
        known = st.document_rows()
        previous = st.document(replaces) if replaces else None
    given = {k: v for k, v in fields.items() if str(v or "").strip()}
    if replaces:
        given = edition_fields(store, replaces) | given | {"doc_id": replaces}
        if known.get(replaces, {}).get("status") != "ok":
            raise EditError(f"{name!r}: the store holds no searchable document {replaces!r} to replace")
    pdf_dir = _library(store) / "pdf"
    pdf_dir.mkdir(parents=True, exist_ok=True)
    file = _kept_name(pdf_dir, safe_file_name(name), sha256_file(pdf))
    found_in = f"uploaded by {by} {now()[:10]} as {name}"
    doc = completed_row(draft, given, file, found_in)
    if previous is not None:  # the extra columns of the edition it replaces (a project, a site …)
        kept = {k: v for k, v in previous.extra.items() if k != GUESSED and v}
        doc = dataclasses.replace(doc, extra=kept | doc.extra)
    if not replaces and doc.doc_id in known:
        raise EditError(
            f"{name!r}: the store already holds a document {doc.doc_id!r}; replace it, or give another doc_id"
        )
    return _ingest_one(store, pdf, doc, rows, progress)


def edition_fields(store: str | Path, doc_id: str) -> dict[str, str]:
    """The fields a new edition of ``doc_id`` keeps: those of the edition it replaces that a
    person gave (not guessed), from the library's manifest or, for a document of the
    corpus, the store. The guessed ones are drafted again from the new PDF."""
    old = next((r for r in _read_rows(_library(store) / "manifest.csv") if r.get("doc_id") == doc_id), None)
    if old is None:
        with closing(Store(store)) as st:
            doc = st.document(doc_id)
        old = doc.as_dict() if doc is not None else {}
    guessed = {g.strip() for g in old.get(GUESSED, "").split(";")}
    return {k: old[k] for k in EDITABLE if old.get(k) and k not in guessed}


def _ingest_one(
    store: Path, pdf: Path, doc: Document, rows: list[dict[str, str]], progress: Progress
) -> Document:
    """Copy the PDF into the library, list it, ingest it; on failure put everything back."""
    from sourcepage.ingest import IngestReport, run

    library = _library(store)
    manifest = library / "manifest.csv"
    before = manifest.read_text(encoding="utf-8") if manifest.is_file() else None
    target = library / "pdf" / doc.file
    copied = not target.exists()
    if copied:
        shutil.copyfile(pdf, target)
    new_rows = [r for r in rows if r.get("doc_id") != doc.doc_id] + [doc.as_dict()]
    entry = {"kind": "add", "doc": doc.as_dict(), "before": before, "copied": doc.file if copied else ""}
    write_text(library / JOURNAL, json.dumps(entry))  # what a killed change left, for ``recover``
    write_text(manifest, _manifest_text(new_rows))
    progress("ingesting", 10, f"extracting the pages of {doc.file}")
    report = IngestReport(store=str(store), engine="pypdfium2")
    try:
        with closing(Store(store)) as st:
            settings = TextSettings.from_dict(st.get_meta("text_settings") or TextSettings().as_dict())
        source = AddedSource.read(library, engine="pypdfium2", settings=settings)
        run(
            source,
            store,
            report,
            progress=lambda d, n, _id: progress("ingesting", 10 + 30 * d // max(n, 1), ""),
        )
        if doc.doc_id in report.failed:
            raise EditError(f"{doc.file!r} could not be ingested: {report.failed[doc.doc_id]}")
    except Exception as e:
        _put_back(store, doc.doc_id, manifest, before, target if copied else None)
        (library / JOURNAL).unlink(missing_ok=True)
        if isinstance(e, EditError):
            raise
        raise EditError(f"{doc.file!r} could not be ingested: {e}") from e
    pdf.unlink(missing_ok=True)  # the staged upload, now kept under library/pdf
    reindex(store, progress)
    (library / JOURNAL).unlink(missing_ok=True)
    with closing(Store(store)) as st:
        return st.document(doc.doc_id) or doc


def _put_back(store: Path, doc_id: str, manifest: Path, before: str | None, copied: Path | None) -> None:
    """Undo a failed add: the manifest as it was, the copied PDF gone, no failure row."""
    if before is None:
        manifest.unlink(missing_ok=True)
    else:
        write_text(manifest, before)
    if copied is not None:
        copied.unlink(missing_ok=True)
    with closing(Store(store)) as st, st.transaction() as conn:
        st.undo_failure(conn, doc_id)


def set_withdrawn(
    store: str | Path, doc_id: str, withdrawn: bool, by: str, reason: str = "", progress: Progress = _quiet
) -> str:
    """Withdraw a document from search (or restore it) and build the indexes again; the
    note kept with it. Its pages, history and reviews stay. StoreError when there is no
    such document; StoreBusy when another change is under way."""
    from sourcepage.corpus.library import set_withdrawn as change

    with edit_lock(store, f"{'withdrawing' if withdrawn else 'restoring'} {doc_id}"):
        progress("recording", 5, f"{'withdrawing' if withdrawn else 'restoring'} {doc_id}")
        recover(Path(store), progress)
        _library(store).mkdir(parents=True, exist_ok=True)
        write_text(_library(store) / JOURNAL, json.dumps({"kind": "withdraw" if withdrawn else "restore"}))
        note = change(store, doc_id, withdrawn, by, reason)
        reindex(Path(store), progress)
        (_library(store) / JOURNAL).unlink(missing_ok=True)
    return note


def recover(store: Path, progress: Progress = _quiet) -> str:
    """Finish or undo the change a killed process left (its journal, ``library/change.json``),
    so the store is as before it or as after it, never between: an add whose ingest had not
    committed is undone (the manifest as it was, the copied PDF gone, no failure row); one
    that had, and a withdrawal or restore (one transaction), get their indexes built. Run
    under the edit lock, first in every change; what was done ('' for nothing)."""
    path = _library(store) / JOURNAL
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    done = True
    if entry.get("kind") == "add":
        doc = Document.from_dict(entry["doc"])
        with closing(Store(store)) as st:
            row = st.document_rows().get(doc.doc_id)
        done = bool(row) and row["status"] == "ok" and json.loads(row["metadata"]) == doc.as_dict()
        if not done:
            copied = _library(store) / "pdf" / entry["copied"] if entry.get("copied") else None
            _put_back(store, doc.doc_id, _library(store) / "manifest.csv", entry.get("before"), copied)
    if done:
        progress("indexing", 40, "finishing the change a stopped process left")
        reindex(store, progress)
    path.unlink(missing_ok=True)
    what = entry.get("doc", {}).get("doc_id", "") or entry.get("kind", "")
    return f"{entry.get('kind')} of {what} {'finished' if done else 'undone'}"


def finish_or_undo(store: str | Path) -> str:
    """``recover`` under the edit lock (StoreBusy while a change runs): ``sourcepage
    document recover``."""
    with edit_lock(store, "recovering"):
        return recover(Path(store))


def reindex(store: Path, progress: Progress = _quiet) -> None:
    """Build again the indexes a search with the defaults needs (``api.index_plan`` on the
    default version), and its sentence vectors when the store had them (else every answer
    encodes its passages' sentences); the chunks and sentences already encoded are read
    from the store's embedding cache, so only the new ones cost."""
    from sourcepage import api
    from sourcepage.retrieval import sentvec
    from sourcepage.retrieval.index import build_index
    from sourcepage.retrieval.methods import parse_method

    version = api.DEFAULT_VERSION
    with closing(Store(store)) as st:
        if not st.chunk_counts().get(version):
            return  # nothing left to index (every document withdrawn)
        steps: list[tuple[str, Callable[[Callable[[int, int], None]], object]]] = [
            (f"the {m} index", lambda tick, v=v, m=m: build_index(st, v, parse_method(m), progress=tick))
            for v, m in api.index_plan(store, [version])
        ]
        if (sentvec.folder(st, version) / "CURRENT").is_file():
            # one worker a core: the new pages' units are most of an add's time (a 73-page
            # guide into corpus-intl's store: 63 s of 97 on one), and searches go on meanwhile
            steps.append(("the sentence vectors", lambda tick: sentvec.build(st, version, None, tick)))
        for i, (what, step) in enumerate(steps):
            label = f"building {what} ({i + 1} of {len(steps)})"
            start, span = 40 + 55 * i // len(steps), 55 // len(steps)

            def tick(done: int, total: int, label: str = label, start: int = start, span: int = span) -> None:
                progress("indexing", start + (span * done // total if total else 0), label)

            tick(0, 0)
            step(tick)


def known_error(e: BaseException) -> bool:
    """Whether ``e`` is a refusal a person can act on (its message is shown as it is)."""
    return isinstance(e, (EditError, StoreError))
