"""The store's documents and the service's health: ``GET /documents``, ``GET /health``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from sourcepage.service.deps import DB, Corpus

router = APIRouter()


@router.get("/documents", tags=["store"], summary="The store's documents (manifest rows)")
def documents(db: DB) -> list[dict[str, str]]:
    return [d.as_dict() for d in db.documents()]


@router.get("/health", tags=["store"], summary="Liveness and what is served")
def health(db: DB, corpus: Corpus) -> dict[str, Any]:
    return {"status": "ok", "documents": len(db.documents()), "page_images": corpus is not None}
