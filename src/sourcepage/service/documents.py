"""The store's documents and the service's health: ``GET /documents``, ``GET /health``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from sourcepage.service.deps import DB, Corpus

router = APIRouter()


@router.get("/documents", tags=["store"], summary="The store's documents (manifest rows)")
def documents(db: DB) -> list[dict[str, str]]:
    return [d.as_dict() for d in db.documents()]


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
