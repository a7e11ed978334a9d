"""The reviewer log (:mod:`sourcepage.labels.reviews`) over HTTP: ``POST /reviews``,
``GET /reviews``, ``GET /reviews/export`` and the HTML ``/review-log``. The page view's
form (:mod:`sourcepage.service.pages`) records through :func:`record_review` too. A
review is recorded only for the reviewer signed in (:mod:`sourcepage.service.auth`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse
from pydantic import BaseModel, Field

from sourcepage.labels import reviews as review
from sourcepage.records import parse_page_id
from sourcepage.service.auth import require_writer
from sourcepage.service.deps import DB, TEMPLATES, StorePath, Version
from sourcepage.store.db import Store

router = APIRouter()


class ReviewBody(BaseModel):
    question: str = Field(min_length=1, max_length=review.MAX_QUESTION)
    method: str = Field("bm25", min_length=1, max_length=100)
    text_version: Version = "raw"
    system_decision: Literal["answer", "refuse", "review"] = Field(
        "review", description="What the system said."
    )
    decision: Literal["answer", "refuse"] = Field(description="What the reviewer decided.")
    pages: list[str] = Field(default_factory=list, max_length=100, description="Accepted evidence pages.")
    reviewer: str = Field(min_length=1, max_length=100)
    note: str = Field("", max_length=review.MAX_NOTE)
    topic: str = Field("", max_length=100, description="Topic slug for the exported question (optional).")


def check_pages(db: Store, pages: list[str]) -> None:
    """422 unless every page is a page of the store."""
    for p in pages:
        try:
            doc_id, n = parse_page_id(p)
        except ValueError as e:
            raise HTTPException(422, str(e)) from None
        if db.document(doc_id) is None:
            raise HTTPException(422, f"page {p!r}: no document {doc_id!r} in this store")
        if db.page(doc_id, n) is None:
            raise HTTPException(422, f"page {p!r} is not in this store")


def record_review(db: Store, store: Path, body: ReviewBody) -> review.Review:
    """Append a review after checking its evidence pages are pages of the store (422)."""
    check_pages(db, body.pages)
    try:
        return review.record(store, **body.model_dump())
    except ValueError as e:
        raise HTTPException(422, str(e)) from None


@router.post(
    "/reviews",
    tags=["reviews"],
    status_code=201,
    summary="Record a reviewer's decision (needs that reviewer's token: Authorization: Bearer)",
)
def post_review(request: Request, body: ReviewBody, db: DB, store: StorePath) -> dict[str, Any]:
    require_writer(request, body.reviewer)
    return record_review(db, store, body).as_dict()


@router.get("/reviews", tags=["reviews"], summary="The reviewer log, oldest first")
def get_reviews(
    store: StorePath,
    question: Annotated[str | None, Query(max_length=500, description="Only this question.")] = None,
) -> dict[str, Any]:
    return {"reviews": [r.as_dict() for r in review.list_reviews(store, question)]}


@router.get(
    "/reviews/export",
    tags=["reviews"],
    summary="The latest review of each question as questions.jsonl (spec §3)",
    response_class=PlainTextResponse,
)
def export_reviews(db: DB, store: StorePath) -> PlainTextResponse:
    topics = {d.doc_id: d.topic for d in db.documents()}
    text = review.export_jsonl(review.list_reviews(store), topics)
    return PlainTextResponse(
        text,
        media_type="application/x-ndjson",
        headers={"Content-Disposition": 'attachment; filename="reviewed-questions.jsonl"'},
    )


@router.get("/review-log", response_class=HTMLResponse, include_in_schema=False)
def review_log(request: Request, store: StorePath) -> HTMLResponse:
    rs = review.list_reviews(store)
    return TEMPLATES.TemplateResponse(
        request, "reviews.html", {"reviews": list(reversed(rs)), "latest": len(review.latest(rs))}
    )
