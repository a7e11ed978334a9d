"""Search: ``POST /search`` (spec §5, exactly :func:`sourcepage.api.search`'s dict: the
pipeline's ``SearchService.respond`` on the store's cached service, then the reviewer's
desk) and the HTML search page ``/``.

Searches run concurrently: the Searcher serialises its own index loading, and the store
connection it reads is safe to share (``Store.read_only``). A request never builds an
index: a missing or stale one (after a re-ingest) answers 409 with the ``sourcepage
index`` command to run. A search appends to ``answers.jsonl`` only when a JSON caller
asks with ``"log": true``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from pydantic import BaseModel, Field, StringConstraints

from sourcepage import api
from sourcepage.corpus.fields import NAMED_FIELDS, field_choices
from sourcepage.labels import referrals
from sourcepage.records import TEXT_VERSIONS, Document
from sourcepage.response import SearchResponse
from sourcepage.retrieval.filters import PAGE_KEYS
from sourcepage.retrieval.index import IndexMissing
from sourcepage.retrieval.methods import METHOD_GRAMMAR, available_methods, default_method
from sourcepage.service.auth import writer
from sourcepage.service.deps import DB, FACETS, TEMPLATES, StorePath, Version, segments

log = logging.getLogger("sourcepage.service")

router = APIRouter()


#: bounds of a search's filters (a 24 MB list was accepted)
MAX_FILTERS, MAX_VALUES = 20, 200
FilterKey = Annotated[str, StringConstraints(max_length=100)]
FilterValue = Annotated[str, StringConstraints(max_length=300)]
FilterValues = Annotated[list[FilterValue], Field(max_length=MAX_VALUES)]


class SearchBody(BaseModel):
    question: str = Field(min_length=1, max_length=500, description="The question (1-500 characters).")
    method: str = Field(default_factory=default_method, max_length=100, description=METHOD_GRAMMAR)
    k: int = Field(10, ge=1, le=50, description="Pages to return (1-50).")
    text_version: Version = "raw"
    filters: dict[FilterKey, FilterValue | int | FilterValues] = Field(
        default_factory=dict,
        max_length=MAX_FILTERS,
        description="Manifest column -> value(s); year_from / year_to bound the year; section keeps the "
        "pages under a heading holding the value as whole words ('Article 10', 'Part 2') "
        f"(at most {MAX_FILTERS} columns of {MAX_VALUES} values each).",
    )
    log: bool = Field(
        False, description="Append the answer to the store's answers.jsonl (a write: needs a reviewer token)."
    )


@contextmanager
def search_errors() -> Iterator[None]:
    """A search's errors as HTTP: what the asker got wrong (``api.InvalidSearch``: an
    empty question, an unknown method, a bad filter) 422 with the reason, a missing index
    409, a model not available here 503."""
    try:
        yield
    except api.InvalidSearch as e:
        raise HTTPException(422, str(e)) from None
    except IndexMissing as e:
        raise HTTPException(409, str(e)) from None
    except RuntimeError as e:  # a method whose model or index is not available here
        log.warning("search failed: %s", e)
        raise HTTPException(503, str(e)) from None


@router.post(
    "/search",
    tags=["search"],
    summary="Rank the source pages for a question (spec §5)",
    response_model=SearchResponse,
)
def search(request: Request, body: SearchBody, store: StorePath) -> JSONResponse:
    if body.log:  # appending to answers.jsonl is a write
        writer(request)
    with search_errors():  # the pipeline's search, then the desk (``api.search``)
        res = api.search(
            body.question,
            store,
            method=body.method,
            k=body.k,
            version=body.text_version,
            filters=body.filters,
            log=body.log,
            build=False,
        )
    # the dict is JSON already: answered as it is, without FastAPI re-encoding and
    # re-validating it (~1.5 ms a request)
    return JSONResponse(res)


# --------------------------------------------------------------------------- the search page


def ui_params(request: Request) -> dict[str, Any]:
    """The search form's fields from the query string, bounded and defaulted."""
    qp = request.query_params
    k = qp.get("k", "10")
    return {
        "q": qp.get("q", "")[:500],
        "method": qp.get("method", default_method()),
        "version": qp.get("version", "raw") if qp.get("version", "raw") in TEXT_VERSIONS else "raw",
        "k": int(k) if k.isdigit() and 1 <= int(k) <= 50 else 10,
        "filters": {f: v[:300] for f in (*FACETS, *NAMED_FIELDS, *PAGE_KEYS) if (v := qp.get(f, "")).strip()},
    }


def search_query(p: dict[str, Any]) -> str:
    return urlencode(
        {"q": p["q"], "method": p["method"], "version": p["version"], "k": p["k"], **p["filters"]}
    )


def ui_search(store: Path, p: dict[str, Any], refer: bool = False) -> tuple[dict | None, str]:
    """(result, '') of the form's search, (None, message) when it fails, (None, '')
    without a question. Never logs the answer; writes a referral only when ``refer`` (a
    POST): a GET reads what the desk knows (``referrals.attach(write=False)``)."""
    if not p["q"].strip():
        return None, ""
    try:
        with search_errors():
            res = api.search(
                p["q"],
                store,
                method=p["method"],
                k=p["k"],
                version=p["version"],
                filters=p["filters"],
                build=False,
                refer=refer,
            )
    except HTTPException as e:
        return None, str(e.detail)
    return (res if refer else referrals.attach(store, dict(res), write=False)), ""


def facet_values(ds: list[Document]) -> dict[str, list[str]]:
    """The filter menus: the core facets, then each named field the store's documents have
    (a ``;``-list gives each of its values)."""
    out = {f: sorted({d.get(f) for d in ds if d.get(f)}) for f in FACETS}
    named = {f: field_choices(ds, f) for f in NAMED_FIELDS}
    return out | {f: v for f, v in named.items() if v}


def card(r: dict[str, Any]) -> dict[str, Any]:
    return {**r, "segments": segments(r["passage"], [tuple(s) for s in r["highlights"]])}


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def home(request: Request, db: DB, store: StorePath) -> HTMLResponse:
    p = ui_params(request)
    ds = db.documents()
    res, error = ui_search(store, p)
    return TEMPLATES.TemplateResponse(
        request,
        "index.html",
        {
            "p": p,
            "methods": available_methods(),
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


@router.post("/refer", include_in_schema=False)
def refer_from_page(request: Request, db: DB, store: StorePath) -> RedirectResponse:
    """The search page's "send to the reviewers" button: the query string's search run
    with its referral written (a POST, so the Guard's origin rule applies), then back to
    the page, which shows the referral. GETs never write (issue 51)."""
    p = ui_params(request)
    res, error = ui_search(store, p, refer=True)
    if error or res is None:
        raise HTTPException(422, error or "no question to refer")
    return RedirectResponse("/?" + search_query(p), status_code=303)
