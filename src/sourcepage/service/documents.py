"""The store's documents and the service's health: ``GET /documents`` (every document with
its provenance, page count, audit flags and guessed fields: ``corpus.library``), the
``/library`` page listing them (with the editor's forms and the change under way, for an
editor: ``service.editor``), ``GET /health``. Read only: no route here writes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field, create_model

from sourcepage.corpus.library import AUDIT_LABELS, LIBRARY_FILTERS, choices, library, matching
from sourcepage.editions import own_doc_ids
from sourcepage.jobs import latest_job, read_job
from sourcepage.records import document_fields
from sourcepage.service.auth import is_editor
from sourcepage.service.deps import DB, TEMPLATES, Corpus

router = APIRouter()


class DocumentAudit(BaseModel):
    """Pages of a document with each audit flag (automated risk indicators, not labels)."""

    ocr_pages: int = Field(description="pages read by OCR (scanned)")
    column_risk_pages: int = Field(description="pages whose text may run two columns together")
    low_text_pages: int = Field(description="pages with under 100 characters of text")
    sparse_text_pages: int = Field(description="pages with under 300 characters of text")
    image_pages: int = Field(description="pages holding images")
    contents_pages: int = Field(description="tables of contents")


#: a manifest row as ``records.Document`` declares it (types and descriptions), its
#: extra columns by name
ManifestRow: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "ManifestRow",
    __config__=ConfigDict(extra="allow"),
    **{name: (kind, Field(description=text)) for name, kind, text in document_fields() if name != "extra"},
)


class LibraryDocument(ManifestRow):  # type: ignore[misc,valid-type]
    """One document: its manifest row (``records.Document``'s fields and any extra columns,
    as before), then what the store knows of it."""

    page_count: int = Field(description="pages in the store")
    version: int = Field(description="1, then one more for each new edition ingested")
    ingested_at: str = Field(description="when this version was ingested (UTC, ISO 8601)")
    guessed: list[str] = Field(description="fields guessed from the text by a drafted manifest")
    fields: dict[str, list[str]] = Field(description="the extra columns as lists")
    audit: DocumentAudit
    first_page: str = Field(description="the page id of its first page (the page view)")


@router.get(
    "/documents",
    tags=["store"],
    summary="The store's documents: provenance, pages, audit flags, guessed fields",
    response_model=list[LibraryDocument],
)
def documents(db: DB) -> list[dict[str, Any]]:
    return library(db)


@router.get(
    "/documents/{doc_id}/editions",
    tags=["store"],
    summary="A document's edition and the earlier ones the store keeps",
)
def editions(doc_id: str, db: DB) -> dict[str, Any]:
    """``version`` and ``sha256`` of the current edition, ``earlier``: each replaced one
    (version, SHA-256, when replaced), whose metadata and page texts the store keeps."""
    row = db.document_rows().get(doc_id)
    if row is None or row["status"] not in ("ok", "withdrawn"):
        raise HTTPException(404, f"no document {doc_id!r}")
    earlier = db.history(doc_id)
    return {"doc_id": doc_id, "version": row["version"], "sha256": row["sha256"], "earlier": earlier}


Filter = Annotated[str, Query(max_length=200)]


@router.get("/library", response_class=HTMLResponse, include_in_schema=False)
def library_page(
    request: Request,
    db: DB,
    jurisdiction: Filter = "",
    topic: Filter = "",
    authority: Filter = "",
    doc_type: Filter = "",
) -> HTMLResponse:
    """Every document with its provenance, filterable by jurisdiction, topic, authority and
    type; then the withdrawn ones (kept, not searched)."""
    entries = library(db)
    wanted = {"jurisdiction": jurisdiction, "topic": topic, "authority": authority, "doc_type": doc_type}
    shown = matching(entries, wanted)
    asked = request.query_params.get("job", "")
    job = read_job(request.app.state.store, asked[:40]) if asked else latest_job(request.app.state.store)
    return TEMPLATES.TemplateResponse(
        request,
        "library.html",
        {
            "docs": shown,
            "total": len(entries),
            "pages": sum(e["page_count"] for e in shown),
            "wanted": wanted,
            "menus": {name: choices(entries, name) for name in LIBRARY_FILTERS},
            "audit_labels": AUDIT_LABELS,
            "withdrawn": db.withdrawn_documents(),
            "editor": is_editor(request),
            "own": own_doc_ids(request.app.state.store),
            "job": job if job is not None and (asked or not job.finished) else None,
        },
    )


@router.get("/health", tags=["store"], summary="Liveness, readiness and what is served")
def health(request: Request, db: DB, corpus: Corpus) -> dict[str, Any]:
    """``ready``: the indexes and models of a default search were loaded at start-up
    (``app.warm``), so a search pays for itself only; ``loading`` says why not."""
    state = request.app.state
    ready = bool(getattr(state, "ready", False))
    out: dict[str, Any] = {
        "status": "ok",
        "ready": ready,
        "documents": len(db.documents()),
        "page_images": corpus is not None,
    }
    if not ready:
        out["loading"] = getattr(state, "warm_note", "")
    return out
