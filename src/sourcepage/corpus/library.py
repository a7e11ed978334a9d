"""The library: every document of a store with its provenance, its page count, its audit
flags and the fields its manifest guessed (``GET /documents``, the ``/library`` page).

The listing reads the store's document rows and page audit only (``Store.document_rows``,
``Store.page_rows``). ``set_withdrawn`` withdraws a document from search or restores it
(``sourcepage document withdraw|restore``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from sourcepage.corpus.audit import summarize_audit
from sourcepage.corpus.fields import document_fields
from sourcepage.records import Document, page_id
from sourcepage.store.db import Store

#: the library's audit counts (pages with the flag) from ``corpus.audit``'s flags
AUDIT_COUNTS: Mapping[str, str] = {
    "ocr_pages": "ocr",
    "column_risk_pages": "multi_column_risk",
    "low_text_pages": "low_text_100",
    "sparse_text_pages": "low_text_300",
    "image_pages": "images",
    "contents_pages": "contents_page",
}
#: what a person reads for each audit count (the page's flag chips)
AUDIT_LABELS: Mapping[str, str] = {
    "ocr_pages": "scanned (OCR)",
    "column_risk_pages": "column risk",
    "low_text_pages": "low text (<100 chars)",
    "sparse_text_pages": "little text (<300 chars)",
    "image_pages": "images",
    "contents_pages": "contents",
}
#: the filters of the library (a document field each)
LIBRARY_FILTERS = ("jurisdiction", "topic", "authority", "doc_type")


def library(store: Store) -> list[dict[str, Any]]:
    """Every searchable document, by doc_id: its manifest row as ``GET /documents`` always
    gave it (the fourteen columns and any extra ones), then ``page_count``, ``version``,
    ``ingested_at`` (when this version was ingested, UTC), ``guessed``, ``fields`` (the extra
    columns as lists), ``audit`` (pages with each flag) and ``first_page``."""
    rows = store.document_rows()
    summaries = {s.doc_id: s for s in summarize_audit(store.page_rows())[0]}
    out = []
    for doc in store.documents():
        row = rows.get(doc.doc_id, {})
        s = summaries.get(doc.doc_id)
        audit = {k: (s.counts[flag] if s else 0) for k, flag in AUDIT_COUNTS.items()}
        pages = int(row.get("n_pages") or (s.pages if s else 0))
        out.append(
            {
                **doc.as_dict(),
                "page_count": pages,
                "version": int(row.get("version") or 1),
                "ingested_at": str(row.get("ingested_at") or ""),
                "guessed": list(doc.guessed),
                "fields": document_fields(doc),
                "audit": audit,
                "first_page": page_id(doc.doc_id, 1) if pages else "",
            }
        )
    return out


def choices(entries: Iterable[Mapping[str, Any]], name: str) -> list[str]:
    """The distinct non-empty values of one field over the library, sorted."""
    return sorted({str(e.get(name, "")) for e in entries} - {""})


def matching(entries: Sequence[Mapping[str, Any]], wanted: Mapping[str, str]) -> list[Mapping[str, Any]]:
    """The entries whose fields equal every non-empty wanted value (``LIBRARY_FILTERS``)."""
    want = {k: v for k, v in wanted.items() if v and k in LIBRARY_FILTERS}
    return [e for e in entries if all(str(e.get(k, "")) == v for k, v in want.items())]


def as_document(entry: Mapping[str, Any]) -> Document:
    """The manifest record of a library entry."""
    return Document.from_dict({k: v for k, v in entry.items() if isinstance(v, str)})


def set_withdrawn(store_dir: str | Path, doc_id: str, withdrawn: bool, by: str, reason: str = "") -> str:
    """Withdraw a document from search (or restore it), under the store's writer lock and
    recorded in its run log (``withdraw`` / ``restore``: who, why). Its pages, chunks,
    history and reviews stay; the indexes must be built again to leave it out (or put it
    back). Returns the note kept with the document; StoreError when there is no such
    searchable (or withdrawn) document."""
    from sourcepage.store.lock import writer_lock
    from sourcepage.store.schema import StoreError, now

    command = "withdraw" if withdrawn else "restore"
    note = f"withdrawn {now()} by {by}" + (f": {reason}" if reason else "")
    with writer_lock(store_dir, command), closing(Store(store_dir)) as st:
        run_id = st.start_run(command, {"doc_id": doc_id, "by": by, "reason": reason})
        with st.transaction() as conn:
            changed = st.set_withdrawn(conn, doc_id, withdrawn, note)
        st.finish_run(run_id, "ok" if changed else "failed: no such document", {"doc_id": doc_id})
    if not changed:
        state = "searchable" if withdrawn else "withdrawn"
        raise StoreError(f"{store_dir} holds no {state} document {doc_id!r}")
    return note
