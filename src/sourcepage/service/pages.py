"""Pages: ``GET /pages/{page_id}`` (text, metadata, audit), ``GET
/pages/{page_id}/image`` (PNG with the passage highlighted) and the HTML page view
``/view/{page_id}`` with its reviewer form (``POST /view/{page_id}/review``).

Safety rules: a page id must parse (``<doc_id>#p<n>``) and name a document and page of
the store; the PDF path is built only from the corpus folder and the file name the store
recorded at ingest, and must stay inside ``<corpus>/pdf``; a PDF whose checksum differs
from the one ingested answers 409.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

import anyio.to_thread
from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from sourcepage import records
from sourcepage.corpus.fields import ASSET_URL_KEY, asset_links, document_fields
from sourcepage.corpus.sources import OWN_CORPUS
from sourcepage.labels import reviews as review
from sourcepage.limits import LimitExceeded
from sourcepage.records import Document, parse_page_id
from sourcepage.retrieval.tokenize import content_terms, highlight_spans
from sourcepage.service.auth import form_writer, identity
from sourcepage.service.deps import (
    DB,
    TEMPLATES,
    Corpus,
    StorePath,
    Version,
    locate_quote,
    readable,
    resolve_page,
    segments,
)
from sourcepage.service.render import ImageGate, render_page
from sourcepage.service.reviews import ReviewBody, record_review
from sourcepage.service.search import search_query, ui_params, ui_search
from sourcepage.store.db import Store

router = APIRouter()

#: the longest quote a page view highlights (a quote is at most 700 characters)
MAX_QUOTE = 1000

#: (path, mtime, size) -> SHA-256 of a PDF, per app
ShaCache = dict[tuple[str, int, int], str]


async def sha_cache(request: Request) -> ShaCache:
    return request.app.state.sha_cache


Shas = Annotated[ShaCache, Depends(sha_cache)]

AUDIT_FLAGS = (
    ("low_text_100", "under 100 characters"),
    ("low_text_300", "under 300 characters"),
    ("multi_column_risk", "multi-column reading-order risk"),
    ("spacing_artifact", "spacing artifact"),
    ("contents_page", "table of contents"),
)


def chunk_of(db: Store, page_id: str, chunk_id: str, version: str) -> tuple[str, list[tuple[int, int, int]]]:
    """Text and spans of a chunk credited to or covering ``page_id`` ('' when none)."""
    if not chunk_id:
        return "", []
    doc_id, _ = parse_page_id(page_id)
    if not chunk_id.startswith(doc_id + "#p"):
        raise HTTPException(422, f"chunk {chunk_id!r} is not a chunk of document {doc_id!r}")
    c = db.chunk(version, chunk_id)
    if c is None:
        raise HTTPException(404, f"no chunk {chunk_id!r} in text version {version!r}")
    return c.text, [tuple(s) for s in c.spans]


def pdf_path(corpus: Path | None, d: Document, shas: ShaCache, own: Path | None = None) -> Path:
    """The ingested PDF of a document inside ``<corpus>/pdf``, or inside ``<own>/pdf`` (the
    store's own library: the documents added from the web page); 404 or 409 otherwise."""
    folders = [f for f in (corpus, own) if f is not None and (f / "pdf").is_dir()]
    if corpus is None and not folders:
        raise HTTPException(
            404, "no corpus folder is known for this store: start `sourcepage serve` with --corpus DIR"
        )
    name = d.file
    if not name or Path(name).name != name or name in (".", ".."):
        raise HTTPException(404, f"document {d.doc_id!r} has no usable file name")
    if Path(name).suffix.lower() != ".pdf":
        raise HTTPException(404, f"document {d.doc_id!r} is not a PDF ({name}): no page image")
    changed = False
    for folder in folders:
        base = (folder / "pdf").resolve()
        path = (base / name).resolve()
        if path.parent != base or not path.is_file():
            continue
        stat = path.stat()
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        if key not in shas:
            shas[key] = hashlib.sha256(path.read_bytes()).hexdigest()
        if not d.sha256 or shas[key] == d.sha256.lower():
            return path
        changed = True
    if changed:
        raise HTTPException(409, f"the PDF of {d.doc_id!r} changed since it was ingested: re-ingest")
    where = " or ".join(str((f / "pdf").resolve()) for f in folders) or str(corpus)
    raise HTTPException(404, f"the PDF of {d.doc_id!r} is not in {where}")


# --------------------------------------------------------------------------- JSON


@router.get("/pages/{page_id}", tags=["store"], summary="A page: raw and cleaned text, metadata, audit")
def page(page_id: str, db: DB) -> dict[str, Any]:
    d, n, row = resolve_page(db, page_id, withdrawn=True)
    return {
        "page": page_id,
        "doc_id": d.doc_id,
        "page_number": n,
        "page_label": row["page_label"],
        "ocr_confidence": row["ocr_confidence"],
        "pages_in_document": row["n_pages"],
        "document": d.as_dict(),
        "text": {"raw": row["raw"], "cleaned": row["cleaned"]},
        "audit": {
            "chars": row["chars"],
            "images": row["images"],
            **{key: bool(row[key]) for key, _ in AUDIT_FLAGS},
        },
        "image": f"/pages/{page_id.replace('#', '%23')}/image",
        "withdrawn": db.withdrawal_note(d.doc_id),  # '' unless the document was withdrawn
    }


@router.get(
    "/pages/{page_id}/image",
    tags=["store"],
    summary="The page rendered to PNG with the passage and query words highlighted",
    response_class=Response,
    responses={200: {"content": {"image/png": {}}}},
)
async def page_image(
    request: Request,
    page_id: str,
    db: DB,
    corpus: Corpus,
    shas: Shas,
    highlight: Annotated[str, Query(max_length=4000, description="Passage text to highlight.")] = "",
    chunk: Annotated[str, Query(max_length=200, description="Chunk id whose text to highlight.")] = "",
    version: Version = "raw",
    q: Annotated[str, Query(max_length=500, description="Question: its words are marked.")] = "",
    scale: Annotated[float, Query(ge=0.5, le=3.0, description="Pixels per PDF point.")] = 1.5,
) -> Response:
    gate: ImageGate = request.app.state.images
    if not gate.try_enter():
        busy = "too many page images at once: try again shortly"
        raise HTTPException(503, busy, headers={"Retry-After": "2"})
    try:
        job = functools.partial(_page_image, page_id, db, corpus, shas, highlight, chunk, version, q, scale)
        return await anyio.to_thread.run_sync(job, limiter=gate.limiter())
    finally:
        gate.leave()


def _page_image(
    page_id: str,
    db: Store,
    corpus: Path | None,
    shas: ShaCache,
    highlight: str,
    chunk: str,
    version: str,
    q: str,
    scale: float,
) -> Response:
    """The PNG of ``page_image``, rendered in an image thread."""
    d, n, _row = resolve_page(db, page_id, withdrawn=True)
    chunk_text = chunk_of(db, page_id, chunk, version)[0]
    # with a chunk, ``highlight`` is the quoted sentence, marked more strongly inside it
    passage, quote = (chunk_text, highlight) if chunk_text and highlight else (highlight or chunk_text, "")
    path = pdf_path(corpus, d, shas, Path(db.path) / OWN_CORPUS)
    try:
        png, info = render_page(
            path, n, scale=scale, passage=passage, quote=quote, terms=content_terms(q) if q else ()
        )
    except IndexError as e:
        raise HTTPException(404, str(e)) from None
    except LimitExceeded as e:
        raise HTTPException(503, f"page {page_id} could not be rendered: {e}") from None
    headers = {
        "Cache-Control": "private, max-age=300",
        "X-Highlight-Boxes": f"{info['passage_boxes']},{info['term_boxes']}",
        "X-Render-Scale": str(info.get("scale", scale)),
        "X-Quote-Boxes": str(info["quote_boxes"]),
    }
    if info.get("highlight_top") is not None:
        headers["X-Highlight-Top"] = str(info["highlight_top"])
    return Response(png, media_type="image/png", headers=headers)


# --------------------------------------------------------------------------- HTML


def _ocr_flag(row: dict) -> list[str]:
    """The page view's audit flag of a page whose text was read by OCR."""
    conf = row.get("ocr_confidence")
    return [] if conf is None else [f"read by OCR ({conf:.0f}% confidence)"]


def _fields(db: Store, d: Document) -> dict[str, Any]:
    """The document's extra manifest fields as lists, and its asset links (``corpus.fields``)."""
    fields = document_fields(d)
    url = db.get_meta(ASSET_URL_KEY, "") if "asset_id" in fields else ""
    return {"fields": fields, "asset_links": asset_links(fields, url)}


def view_context(
    request: Request,
    db: Store,
    store: Path,
    corpus: Path | None,
    page_id: str,
    form_error: str = "",
    form: dict | None = None,
) -> dict:
    """What view.html shows: the page, its texts with the evidence region and query
    words marked, the search it came from, and the reviews of the question."""
    p = ui_params(request)
    qp = request.query_params
    d, n, row = resolve_page(db, page_id, withdrawn=True)
    chunk_id = qp.get("chunk", "")
    passage, spans = chunk_of(db, page_id, chunk_id, p["version"]) if chunk_id else ("", [])
    terms = content_terms(p["q"]) if p["q"].strip() else set()
    quote = qp.get("quote", "")[:MAX_QUOTE]
    texts = {}
    for v in ("raw", "cleaned"):
        text = row[v]
        region = None
        if spans and (v == p["version"] or (v == "cleaned" and p["version"] == "enriched")):
            region = next(((a, b) for pg, a, b in spans if pg == n), None)
        texts[v] = segments(
            text, highlight_spans(text, terms), region, locate_quote(text, quote) if quote else None
        )
    res, _ = ui_search(store, p)
    hit = next((r for r in (res or {}).get("results", []) if r["page"] == page_id), None)
    img = {"version": p["version"], "q": p["q"]}
    if chunk_id:
        img["chunk"] = chunk_id
    if quote:
        img["highlight"] = quote
    pid_q = page_id.replace("#", "%23")
    return {
        "p": p,
        "page_id": page_id,
        "pid_q": pid_q,
        "doc": d,
        **_fields(db, d),
        "n": n,
        "row": row,
        "flags": [
            "columns interleaved in the extracted text"
            if key == "multi_column_risk" and row[key] == 2
            else label
            for key, label in AUDIT_FLAGS
            if row[key]
        ]
        + _ocr_flag(row),
        "texts": texts,
        "version_shown": "cleaned" if p["version"] in ("cleaned", "enriched") else "raw",
        "image_url": f"/pages/{pid_q}/image?{urlencode(img)}",
        "res": res,
        "hit": hit,
        "chunk_id": chunk_id,
        "quote": quote,
        "qs": search_query(p),
        "prev": records.page_id(d.doc_id, n - 1).replace("#", "%23") if n > 1 else None,
        "next": records.page_id(d.doc_id, n + 1).replace("#", "%23") if n < row["n_pages"] else None,
        "reviews": review.list_reviews(store, p["q"]) if p["q"].strip() else [],
        "recorded": qp.get("recorded", ""),
        "form_error": form_error,
        "form": form or {},
        "image_ok": d.file.lower().endswith(".pdf")
        and (corpus is not None or (Path(store) / OWN_CORPUS / "pdf" / d.file).is_file()),
        "withdrawn": db.withdrawal_note(d.doc_id),
    }


@router.get("/view/{page_id}", response_class=HTMLResponse, include_in_schema=False)
def view(request: Request, page_id: str, db: DB, store: StorePath, corpus: Corpus) -> HTMLResponse:
    return TEMPLATES.TemplateResponse(request, "view.html", view_context(request, db, store, corpus, page_id))


@router.post("/view/{page_id}/review", include_in_schema=False)
async def view_review(request: Request, page_id: str, db: DB, store: StorePath, corpus: Corpus) -> Response:
    form = await request.form()
    if identity(request) is None:  # signed out meanwhile: nothing recorded, sign in and come back
        back = {**dict(request.query_params), "restore": "1"}  # app.js puts back what was typed
        target = f"/view/{page_id.replace('#', '%23')}?{urlencode(back)}"
        return RedirectResponse("/login?" + urlencode({"next": target}), status_code=303)
    form_writer(request, form, str(form.get("reviewer", "")))  # 403 before anything else
    decision = str(form.get("decision", ""))
    pages = [str(x) for x in form.getlist("pages")] if decision == "answer" else []
    data = {
        "question": str(form.get("question", "")),
        "method": str(form.get("method", "bm25")) or "bm25",
        "text_version": str(form.get("text_version", "raw")),
        "system_decision": str(form.get("system_decision", "review")),
        "decision": decision,
        "pages": pages,
        "reviewer": str(form.get("reviewer", "")),
        "note": str(form.get("note", "")),
        "topic": str(form.get("topic", "")),
    }

    async def form_error(message: str) -> HTMLResponse:
        ctx = await run_in_threadpool(view_context, request, db, store, corpus, page_id, message, data)
        return TEMPLATES.TemplateResponse(request, "view.html", ctx, status_code=422)

    try:
        body = ReviewBody(**data)
    except ValueError as e:
        errors = e.errors() if hasattr(e, "errors") else [{"msg": str(e)}]
        return await form_error(readable(errors))
    try:
        rec = await run_in_threadpool(record_review, db, store, body)
    except HTTPException as e:
        return await form_error(str(e.detail))
    back = dict(request.query_params)
    back["recorded"] = str(rec.id)
    return RedirectResponse(f"/view/{page_id.replace('#', '%23')}?{urlencode(back)}#review", status_code=303)
