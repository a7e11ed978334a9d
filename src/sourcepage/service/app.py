"""The JSON API and the reviewer web page: a thin shell over :mod:`sourcepage.api`.

``create_app(store, corpus=None, questions=None)`` serves one store. It sets the
per-app settings on ``app.state`` (read by the dependencies of
:mod:`sourcepage.service.deps`) and includes the routers:

- :mod:`~sourcepage.service.search`: ``POST /search`` (spec §5, exactly
  :func:`sourcepage.api.search`'s dict; ``"log": true`` appends the answer to
  ``answers.jsonl``) and the HTML search page ``/``;
- :mod:`~sourcepage.service.documents`: ``GET /documents``, ``GET /health``, ``/library``;
- :mod:`~sourcepage.service.editor`: ``POST /documents`` (a PDF added or a new edition),
  ``POST /documents/{doc_id}/withdraw|restore``, ``GET /documents/jobs/{id}`` (an editor's);
- :mod:`~sourcepage.service.pages`: ``GET /pages/{page_id}``, ``GET
  /pages/{page_id}/image`` (PNG with the passage highlighted) and ``/view/{page_id}``
  (the page image beside its text, metadata and the reviewer form);
- :mod:`~sourcepage.service.reviews`: ``POST /reviews``, ``GET /reviews``, ``GET
  /reviews/export``, ``/review-log``;
- :mod:`~sourcepage.service.desk`: ``GET /referrals``, ``GET /referrals/{id}``, ``POST
  /referrals/{id}/decision``, ``/desk``, ``/desk/{id}``, ``/questions/{id}`` (the reviewer's
  desk and the asker's page);
- :mod:`~sourcepage.service.judging`: ``/judgments/*``, ``/judge`` (when the judge
  package is installed);
- :mod:`~sourcepage.service.auth`: the Guard middleware, identity and sessions;
  :mod:`~sourcepage.service.signin`: ``/login``, ``/logout``
  (Host and Origin checks, a reviewer for every write, everything in public mode).

OpenAPI docs at ``/docs`` and ``/redoc`` with their assets served from the
``fastapi-offline`` package (no CDN). Validation problems answer 422 with
``{"error": "..."}``; any other failure answers 500 with ``{"error": "internal
error"}`` and is logged, never shown.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from sourcepage.service import auth, desk, documents, editor, hardening, pages, reviews, search, signin
from sourcepage.service.auth import form_back
from sourcepage.service.deps import HERE, JUDGING, TEMPLATES, open_shared_store, readable, segments
from sourcepage.service.render import ImageGate
from sourcepage.store.db import Store
from sourcepage.store.reviewers import has_reviewers

__all__ = ["app_from_env", "corpus_from_store", "create_app", "segments"]

log = logging.getLogger("sourcepage.service")

#: path prefixes of the JSON API: their errors are JSON even for a browser
JSON_PREFIXES = ("/pages", "/search", "/reviews", "/documents", "/judgments", "/referrals")


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


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()]
    return JSONResponse({"error": readable(exc.errors()), "errors": errors}, status_code=422)


async def _http(request: Request, exc: StarletteHTTPException) -> Response:
    if exc.status_code == 401 and (back := form_back(request.method, dict(request.headers))):
        # a browser's form posted after its session ended (the judge's, the page view's):
        # sign in, then back to the page it came from, where app.js puts back what was typed
        return RedirectResponse("/login?" + urlencode({"next": back}), status_code=303)
    wants_html = "text/html" in request.headers.get("accept", "") and not request.url.path.startswith(
        JSON_PREFIXES
    )
    if wants_html:
        return TEMPLATES.TemplateResponse(
            request,
            "error.html",
            {"status": exc.status_code, "message": exc.detail},
            status_code=exc.status_code,
        )
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)


async def _favicon() -> FileResponse:
    """The site icon (browsers ask for /favicon.ico whatever the page links)."""
    return FileResponse(HERE / "static" / "favicon.ico", media_type="image/x-icon")


def _corpus_of(db: Store) -> Path | None:
    for args in db.run_args("ingest"):
        given = args.get("corpus") if isinstance(args, dict) else None
        if isinstance(given, str) and given.strip() and (Path(given) / "pdf").is_dir():
            return Path(given).resolve()
    return None


def corpus_from_store(store: Path) -> Path | None:
    """The corpus folder of the store's last ingest run, when it still exists."""
    db = Store(store)
    try:
        return _corpus_of(db)
    finally:
        db.close()


#: threads running the (CPU-bound, GIL-holding) route functions of one worker process:
#: more threads than this only queue on the GIL and make latency less even
THREADS = 4


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    import os

    import anyio.to_thread

    limit = int(os.environ.get("SOURCEPAGE_THREADS", "0") or 0) or THREADS
    anyio.to_thread.current_default_thread_limiter().total_tokens = limit
    await anyio.to_thread.run_sync(warm, app)
    try:
        yield
    finally:
        db, app.state.db = app.state.db, None
        if db is not None:
            db.close()


def warm(app: FastAPI) -> None:
    """Load what a search with the defaults needs — the indexes, the answer policy's
    models, the sentence vectors — before the service takes requests (uvicorn serves
    after the start-up ends), so the first search is as fast as the hundredth; one search
    runs through every path once. ``app.state.ready`` says it went through; when it
    could not (no index yet), ``app.state.warm_note`` says why and searches load on use.
    ``SOURCEPAGE_WARM=0`` skips it (tests of the pages alone)."""
    import os

    from sourcepage import api
    from sourcepage.retrieval.index import IndexMissing
    from sourcepage.store.db import StoreError

    app.state.ready, app.state.warm_note = False, ""
    if os.environ.get("SOURCEPAGE_WARM", "1") == "0":
        app.state.warm_note = "start-up loading skipped (SOURCEPAGE_WARM=0)"
        return
    try:
        svc = api.service(app.state.store, api.DEFAULT_VERSION, build=False)
        if svc.searcher.documents:
            svc.respond("warm-up", answer=True)  # loads indexes and models, touches every path
        app.state.ready = True
    except (IndexMissing, StoreError, RuntimeError, ValueError, OSError) as e:
        app.state.warm_note = f"not loaded at start: {e}"


#: environment variables that ``app_from_env`` reads (set by ``sourcepage serve --workers``)
ENV_STORE, ENV_CORPUS, ENV_QUESTIONS = "SOURCEPAGE_STORE", "SOURCEPAGE_CORPUS", "SOURCEPAGE_QUESTIONS"
ENV_PUBLIC, ENV_HOSTS = "SOURCEPAGE_PUBLIC", "SOURCEPAGE_ALLOWED_HOSTS"
ENV_SERVER_PID = "SOURCEPAGE_SERVER_PID"  # the process of `serve`, the workers' parent


def app_from_env() -> FastAPI:
    """``create_app`` from ``SOURCEPAGE_STORE`` (and ``SOURCEPAGE_CORPUS``,
    ``SOURCEPAGE_QUESTIONS``, ``SOURCEPAGE_PUBLIC`` = 1, ``SOURCEPAGE_ALLOWED_HOSTS``
    comma-separated): the factory each worker process of ``sourcepage serve --workers N``
    calls, so that every worker serves the same store with the same access rules."""
    import os

    from sourcepage.executor import die_with_parent

    # a worker whose server died (kill -9 gives it no time to stop its workers) exits
    # too, rather than answering on the port on its own; a worker still starting when the
    # server died finds itself re-parented here and exits at once
    server = os.environ.get(ENV_SERVER_PID, "")
    if server.isdigit() and os.getppid() != int(server):
        os._exit(1)
    die_with_parent()
    hosts = [h for h in os.environ.get(ENV_HOSTS, "").split(",") if h]
    return create_app(
        os.environ[ENV_STORE],
        os.environ.get(ENV_CORPUS) or None,
        os.environ.get(ENV_QUESTIONS) or None,
        public=os.environ.get(ENV_PUBLIC) == "1",
        allowed_hosts=hosts,
    )


def create_app(
    store: str | Path,
    corpus: str | Path | None = None,
    questions: str | Path | None = None,
    *,
    public: bool = False,
    allowed_hosts: Sequence[str] = (),
) -> FastAPI:
    """The service for one store. ``corpus`` (a folder with ``pdf/``) defaults to the
    corpus of the store's last ingest; without one, page images answer 404.
    ``questions`` (a questions.jsonl) is the set that relevance judging pools and
    exports; QuestionError (a ValueError) when it does not validate. StoreError when
    the store cannot be opened. ``allowed_hosts``: host names accepted besides the
    loopback ones; ``public``: every request needs a reviewer (ValueError when the
    store has no reviewer accounts)."""
    from fastapi_offline import FastAPIOffline

    store = Path(store).resolve()
    if public and not has_reviewers(store):
        raise ValueError(
            f"a public service needs reviewer accounts: run `sourcepage reviewer add NAME --store {store}`"
        )
    question_set = None
    if questions is not None:
        from sourcepage.evaluation.questions import read_questions

        question_set = read_questions(questions)
    db = open_shared_store(store)  # StoreError now, not on the first request

    app = FastAPIOffline(
        title="sourcepage",
        version="0.1.0",
        description="Find, judge and measure the exact source page that supports a safety answer.",
        docs_url="/docs",
        redoc_url="/redoc",
        static_url="/static-offline-docs",
        lifespan=_lifespan,
    )
    app.state.store = store
    app.state.db = db
    app.state.corpus = Path(corpus).resolve() if corpus else _corpus_of(db)
    app.state.questions = question_set
    app.state.sha_cache = {}
    app.state.images = ImageGate()
    app.state.access = auth.Access.of(store, public, allowed_hosts)
    app.add_middleware(auth.Guard, access=app.state.access)
    app.add_middleware(_CatchAll)
    app.add_middleware(hardening.BodyLimit)
    app.add_middleware(hardening.SecurityHeaders)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http)  # type: ignore[arg-type]
    app.add_api_route("/favicon.ico", _favicon, include_in_schema=False)
    for module in (search, documents, editor, pages, reviews, desk, signin):
        app.include_router(module.router)
    if JUDGING:
        from sourcepage.service import judging

        app.state.judging = judging.JudgingState.of(question_set)
        app.include_router(judging.router)
    return app
