"""The reviewer's desk over HTTP (:mod:`sourcepage.labels.referrals`): the queue of
referred questions, a case with its evidence, a reviewer's decision, and the asker's page.

JSON: ``GET /referrals?status=pending|decided`` (with ``jurisdiction`` and ``topic``
filters; the queue oldest first and its counts), ``GET /referrals/{id}``, ``POST
/referrals/{id}/decision`` (a reviewer: Bearer token, or the signed-in session with its
CSRF token, :mod:`sourcepage.service.auth`). HTML: ``/desk`` (the queue, signed-in
reviewers), ``/desk/{id}`` (a case: evidence page images, quotes, reasons, the system's
draft answer, the decision form — with the further pages of the same search and any page
typed by its id, so that a reviewer can accept a page the asker was not shown) and
``/questions/{id}`` (what the asker reads: open to everyone who may read the service).

A form posted after the session ended (a restart signs everyone out) is not recorded:
the browser is sent to sign in and back to the case with ``?restore=1``, where app.js
puts back what the reviewer typed (kept in the tab's sessionStorage on submit).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, Field, StrictInt, ValidationError

from sourcepage import api
from sourcepage.labels import quotecheck, referrals
from sourcepage.labels.reviews import MAX_ANSWER, MAX_NOTE, MAX_QUOTE, RATINGS, Review
from sourcepage.records import parse_page_id
from sourcepage.retrieval.index import IndexMissing
from sourcepage.service.auth import CSRF_FIELD, form_writer, identity, writer
from sourcepage.service.deps import DB, TEMPLATES, StorePath, readable
from sourcepage.service.reviews import check_pages
from sourcepage.store.db import Store

router = APIRouter()
Status = Literal["pending", "decided"]


class DecisionBody(BaseModel):
    decision: Literal["answer", "refuse"] = Field(description="The reviewer's decision.")
    pages: list[str] = Field(default_factory=list, max_length=50, description="Accepted evidence pages.")
    quotes: list[Annotated[str, Field(max_length=MAX_QUOTE)]] = Field(
        default_factory=list, max_length=20, description="Accepted or edited quotes."
    )
    answer: str = Field(
        "", max_length=MAX_ANSWER, description="The answer, written from the accepted evidence."
    )
    note: str = Field("", max_length=MAX_NOTE)
    ratings: dict[str, StrictInt] = Field(  # strict: JSON true or "3" is no rating
        default_factory=dict,
        max_length=len(RATINGS),
        description=f"1-5 for any of {', '.join(RATINGS)} (the system's draft answer).",
    )
    reviewer: str | None = Field(
        None, max_length=100, description="If given, must be the signed-in reviewer."
    )


def _referral(store: Path, rid: int) -> referrals.Referral:
    ref = referrals.get(store, rid)
    if ref is None:
        raise HTTPException(404, f"no referral {rid} in this store")
    return ref


def _texts(db: Store, pages: list[str]) -> dict[str, list[str]]:
    """Each page's raw and cleaned text (pages checked to be the store's)."""
    out = {}
    for p in pages:
        row = db.page(*parse_page_id(p)) or {}
        out[p] = [str(row.get("raw") or ""), str(row.get("cleaned") or "")]
    return out


def check_answer(db: Store, ref: referrals.Referral, body: DecisionBody) -> None:
    """422 unless an answer says something (its text or a quote) and each quoted sentence
    stands on an accepted page (:mod:`sourcepage.labels.quotecheck`; the message names the
    page of the search a sentence is on): a published answer never cites a page that does
    not say what it quotes."""
    if body.decision != "answer" or not body.pages:
        return  # a refusal quotes nothing; an answer without pages: labels.reviews says so
    if not body.answer.strip() and not body.quotes:
        raise HTTPException(422, "an answer needs its text or a quote: write it (or copy the system's draft)")
    shown = ref.shown.get("pages", []) + [q["page"] for q in ref.shown.get("quotes", [])]
    others = [p for p in dict.fromkeys(shown) if p not in body.pages]
    problems = quotecheck.unsourced(body.quotes, _texts(db, body.pages), _texts(db, others))
    if problems:
        raise HTTPException(422, "; ".join(problems) + ". Tick the page a quote is on, or correct the quote.")


def decide(db: Store, store: Path, rid: int, reviewer: str, body: DecisionBody) -> Review:
    """Record a decision after checking the pages are this store's and the quotes are on
    them (404 / 422)."""
    ref = _referral(store, rid)
    check_pages(db, body.pages)
    check_answer(db, ref, body)
    try:
        return referrals.decide(
            store, rid, reviewer, body.decision, body.pages, body.quotes, body.answer, body.note, body.ratings
        )
    except KeyError:
        raise HTTPException(404, f"no referral {rid} in this store") from None
    except ValueError as e:
        raise HTTPException(422, str(e)) from None


# --------------------------------------------------------------------------- JSON


@router.get("/referrals", tags=["desk"], summary="The queue of referred questions, oldest first, with counts")
def get_referrals(
    store: StorePath,
    status: Status | None = None,
    jurisdiction: Annotated[str | None, Query(max_length=100)] = None,
    topic: Annotated[str | None, Query(max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=referrals.MAX_PAGE, description="Referrals on a page.")] = 50,
    after: Annotated[int, Query(ge=0, le=2**62, description="The last number of the previous page.")] = 0,
) -> JSONResponse:
    picked, counts, more = referrals.page(store, status, jurisdiction, topic, limit, after)
    # JSON already: sent as it is (FastAPI's encoder walking 50 referrals took most of the time)
    return JSONResponse({"referrals": [r.as_dict() for r in picked], "counts": counts, "next_after": more})


@router.get("/referrals/{rid}", tags=["desk"], summary="One referral: status, and once decided the answer")
def get_referral(rid: int, store: StorePath) -> JSONResponse:
    return JSONResponse(_referral(store, rid).as_dict())


def _form_body(form: Any) -> dict[str, Any]:
    """The decision form's fields as a DecisionBody's."""
    ratings = {}
    for name in RATINGS:
        v = str(form.get(f"rating_{name}", "")).strip()
        # ASCII digits only: '²', '٣', '３' are digits to str.isdigit; int() of 5,000 fails
        if v:
            ratings[name] = int(v) if v.isascii() and v.isdigit() and len(v) <= 2 else v
    decision = str(form.get("decision", ""))
    # pages ticked (shown to the asker, or further pages of the same search), then pages
    # typed by id ("doc#p19"; commas, spaces or lines between them), each once
    typed = str(form.get("other_pages", "")).replace(",", " ").split()
    pages = list(dict.fromkeys([str(p) for p in form.getlist("pages")] + typed))
    return {
        "decision": decision,
        "pages": pages if decision == "answer" else [],
        "other_pages": " ".join(typed),
        "quotes": [q.strip() for q in str(form.get("quotes", "")).splitlines() if q.strip()],
        "answer": str(form.get("answer", "")).strip(),
        "note": str(form.get("note", "")).strip(),
        "ratings": ratings,
    }


@router.post(
    "/referrals/{rid}/decision",
    tags=["desk"],
    status_code=201,
    summary="A reviewer's decision on a referral (JSON with Authorization: Bearer, or the desk's form)",
    openapi_extra={
        "requestBody": {"content": {"application/json": {"schema": DecisionBody.model_json_schema()}}}
    },
)
async def post_decision(request: Request, rid: int, db: DB, store: StorePath) -> Response:
    if request.headers.get("content-type", "").startswith("application/json"):
        reviewer = writer(request)  # 401 anonymous, 403 a session without its CSRF header
        try:
            body = DecisionBody.model_validate(json.loads(await request.body() or b"null"))
        except (ValidationError, ValueError) as e:
            errors = e.errors() if isinstance(e, ValidationError) else [{"msg": f"not JSON: {e}"}]
            return JSONResponse({"error": readable(errors)}, status_code=422)
        if body.reviewer and body.reviewer != reviewer:
            raise HTTPException(403, f"signed in as {reviewer!r}, not {body.reviewer!r}")
        rec = await run_in_threadpool(decide, db, store, rid, reviewer, body)
        return JSONResponse({"review": rec.as_dict(), "referral": _referral(store, rid).as_dict()}, 201)
    form = await request.form()
    if identity(request) is None:  # signed out meanwhile: nothing recorded, sign in and come back
        target = f"/desk/{rid}?restore=1"
        return RedirectResponse("/login?" + urlencode({"next": target}), status_code=303)
    reviewer = form_writer(request, form)  # 403 without the session's CSRF token
    data = _form_body(form)
    try:
        body = DecisionBody(**data)  # "other_pages" (kept for the form) is not a field: ignored
        await run_in_threadpool(decide, db, store, rid, reviewer, body)
    except ValidationError as e:
        return await _case_page(request, db, store, rid, readable(e.errors()), data)
    except HTTPException as e:
        if e.status_code != 422:
            raise
        return await _case_page(request, db, store, rid, str(e.detail), data)
    return RedirectResponse(f"/questions/{rid}", status_code=303)


# --------------------------------------------------------------------------- HTML


def _sign_in_first(request: Request) -> RedirectResponse | None:
    if identity(request) is not None:
        return None
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse("/login?" + urlencode({"next": target}), status_code=303)


#: referrals on a page of /desk
DESK_PAGE = 50


@router.get("/desk", response_class=HTMLResponse, include_in_schema=False)
def desk(request: Request, store: StorePath) -> Response:
    gate = _sign_in_first(request)
    if gate:
        return gate
    qp = request.query_params
    status = qp.get("status", "pending")
    status = status if status in referrals.STATUSES else None
    jurisdiction, topic = qp.get("jurisdiction", "")[:100] or None, qp.get("topic", "")[:100] or None
    a = qp.get("after", "")
    after = int(a) if a.isascii() and a.isdigit() and len(a) <= 18 else 0
    picked, counts, more = referrals.page(store, status, jurisdiction, topic, DESK_PAGE, after)
    filters = {"status": status or "all", "jurisdiction": jurisdiction or "", "topic": topic or ""}
    ctx = {
        "refs": picked,
        "counts": counts,
        "status": status or "",
        "jurisdiction": jurisdiction or "",
        "topic": topic or "",
        **referrals.facets(store),
        "next": urlencode({**filters, "after": more}) if more else "",
    }
    return TEMPLATES.TemplateResponse(request, "desk.html", ctx)


def _image_url(page: str, question: str, quotes: list[dict[str, str]]) -> str:
    quote = next((q["text"] for q in quotes if q["page"] == page), "")
    args = {"q": question, **({"highlight": quote} if quote else {})}
    return f"/pages/{page.replace('#', '%23')}/image?{urlencode(args)}"


def case_context(db: Store, store: Path, rid: int, error: str = "", form: dict | None = None) -> dict:
    ref = _referral(store, rid)
    shown = ref.shown
    docs = {d.doc_id: d for d in db.documents()}
    quoted = {q["page"] for q in shown.get("quotes", [])}
    evidence = []
    for rank, p in enumerate(shown.get("pages", []), 1):
        d = docs.get(p.split("#p")[0])
        evidence.append(
            {
                "page": p,
                "rank": rank,
                "doc": d,
                "image": _image_url(p, ref.question, shown.get("quotes", [])),
                "quoted": p in quoted,
            }
        )
    last = ref.decision
    shown_pages = set(shown.get("pages", []))
    further = [r for r in further_pages(store, ref) if r["page"] not in shown_pages]
    # nothing of the system's is accepted for the reviewer: its pages are suggestions, its
    # draft and quotes are shown beside the empty boxes to copy from (a pre-ticked page
    # was published with a corrected answer it does not support: issue 49)
    filled = form or {
        "decision": last.decision if last else "",
        "pages": list(last.pages) if last else [],
        "quotes": list(last.quotes) if last else [],
        "answer": last.answer if last else "",
        "note": last.note if last else "",
        "ratings": dict(last.ratings) if last else {},
    }
    filled.setdefault("other_pages", "")
    return {
        "ref": ref,
        "evidence": evidence,
        "further": further,
        "error": error,
        "form": filled,
        "ratings": RATINGS,
    }


#: pages of the referred question's search listed for the reviewer (the asker saw the first few)
FURTHER_DEPTH = 15


def further_pages(store: Path, ref: referrals.Referral) -> list[dict[str, Any]]:
    """The referred question's search run again now (its method, text version and filters;
    no answer, no referral, nothing logged) to ``FURTHER_DEPTH`` pages: the page that answers
    is often ranked just after the few the asker saw, and a reviewer who cannot accept it
    can only refuse. Each with its rank and section; none if the search cannot run
    now (an index missing or a model not installed: the case stays decidable)."""
    shown = ref.shown
    try:
        res = api.search(
            ref.question,
            store,
            method=str(shown["method"]),
            k=FURTHER_DEPTH,
            version=str(shown.get("text_version", "raw")),
            filters=dict(shown.get("filters") or {}),
            answer=False,
            build=False,
            refer=False,
        )
    except (IndexMissing, RuntimeError, ValueError):
        return []
    return [{"page": r["page"], "rank": r["rank"], "section": r.get("section", "")} for r in res["results"]]


async def _case_page(
    request: Request, db: Store, store: Path, rid: int, error: str = "", form: dict | None = None
) -> HTMLResponse:
    ctx = await run_in_threadpool(case_context, db, store, rid, error, form)
    return TEMPLATES.TemplateResponse(request, "case.html", ctx, status_code=422 if error else 200)


@router.get("/desk/{rid}", response_class=HTMLResponse, include_in_schema=False)
async def case(request: Request, rid: int, db: DB, store: StorePath) -> Response:
    gate = _sign_in_first(request)
    return gate or await _case_page(request, db, store, rid)


@router.get("/questions/{rid}", response_class=HTMLResponse, include_in_schema=False)
def question_page(request: Request, rid: int, store: StorePath) -> HTMLResponse:
    ref = _referral(store, rid)
    return TEMPLATES.TemplateResponse(request, "question.html", {"ref": ref, "csrf_field": CSRF_FIELD})
