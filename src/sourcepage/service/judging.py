"""Relevance judging over HTTP and on the web page (:mod:`sourcepage.labels.judgments`).

Judgments are kept in the store's label log, ``<store>/labels.sqlite`` (append-only). Recording and
adjudicating need the reviewer signed in (:mod:`sourcepage.service.auth`). Pooling and export
need a question set (``create_app(..., questions=FILE)`` / ``serve --questions``);
recording, agreement and adjudication work on any question ids the set holds.
Each request opens the label log and closes it; the SQL is in :mod:`sourcepage.store.labels`.

JSON: ``GET /judgments/pool``, ``POST /judgments``, ``GET /judgments``,
``GET /judgments/agreement``, ``POST /judgments/adjudicate``, ``GET /judgments/export``.
HTML: ``/judge`` (the next pending page of a reviewer, graded 0/1/2 with one click)
and ``/judge/agreement`` (Cohen's kappa, disagreements, adjudication).
"""

from __future__ import annotations

import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from sourcepage import api
from sourcepage.labels import judgments as jm
from sourcepage.records import Question
from sourcepage.retrieval.index import IndexMissing
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.tokenize import content_terms, highlight_spans
from sourcepage.service.auth import form_writer, require_writer
from sourcepage.service.deps import DB, TEMPLATES, Questions, StorePath, resolve_page
from sourcepage.store.db import Store
from sourcepage.store.labels import LabelLog

Methods = Annotated[str, Query(max_length=200, description="Comma-separated methods to pool.")]
Depth = Annotated[int, Query(ge=1, le=50, description="Pages per method and question.")]
GRADE_WORDS = {0: "not relevant", 1: "supports part", 2: "sufficient alone"}


def _readable(e: ValueError) -> str:
    errors = e.errors() if hasattr(e, "errors") else [{"msg": str(e)}]
    return "; ".join(
        f"{'.'.join(str(x) for x in err.get('loc', ()))}: {err.get('msg')}".lstrip(": ") for err in errors
    )


class JudgmentBody(BaseModel):
    question_id: str = Field(min_length=1, max_length=200)
    page: str = Field(min_length=1, max_length=300)
    grade: int = Field(ge=0, le=2, description="0 not relevant, 1 supports part, 2 sufficient alone.")
    reviewer: str = Field(min_length=1, max_length=100)
    note: str = Field("", max_length=5000)


class AdjudicationBody(BaseModel):
    question_id: str = Field(min_length=1, max_length=200)
    page: str = Field(min_length=1, max_length=300)
    grade: int = Field(ge=0, le=2)
    adjudicator: str = Field(min_length=1, max_length=100)
    note: str = Field("", max_length=5000)


@dataclass
class JudgingState:
    """Per app: the pools computed so far (by methods and depth) and the question index."""

    by_id: dict[str, Question] = field(default_factory=dict)
    pools: dict[tuple[tuple[str, ...], int, Any], dict[str, list[str]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(cls, questions: list[Question] | None) -> JudgingState:
        return cls(by_id={q.id: q for q in questions or []})


async def judging_state(request: Request) -> JudgingState:
    return request.app.state.judging


State = Annotated[JudgingState, Depends(judging_state)]
router = APIRouter()


def opened(store: Path) -> LabelLog:
    """The store's label log, closed when the ``with`` block ends (for a write)."""
    return jm.connect(jm.default_path(store))


def reading(store: Path) -> LabelLog:
    """The store's label log for a GET: read-only, and an empty one when the store has
    none yet (a read never creates ``labels.sqlite``)."""
    return LabelLog.read(store)


def need_questions(questions: list[Question] | None) -> list[Question]:
    if questions is None:
        raise HTTPException(404, "no question set is loaded: start `sourcepage serve` with --questions FILE")
    return questions


def check_pair(db: Store, questions: list[Question] | None, state: JudgingState, qid: str, page: str) -> None:
    if questions is not None and qid not in state.by_id:
        raise HTTPException(422, f"no question {qid!r} in the loaded question set")
    resolve_page(db, page)  # 422 malformed, 404 not in the store


def get_pool(
    store: Path, questions: list[Question] | None, state: JudgingState, methods: str, depth: int
) -> dict[str, list[str]]:
    """The pool of ``methods`` at ``depth`` over the question set, computed once per app."""
    qs = need_questions(questions)
    names = tuple(m.strip() for m in methods.split(",") if m.strip())
    if not names:
        raise HTTPException(422, "no methods to pool")
    try:
        for m in names:
            parse_method(m)
    except ValueError as e:
        raise HTTPException(422, str(e)) from None
    svc = api.service(store, "raw", build=False)
    key = (names, depth, svc.stamp)  # a re-ingest makes a new pool
    with state.lock:
        if key not in state.pools:
            try:
                state.pools[key] = jm.pool(svc.searcher, qs, list(names), depth)
            except IndexMissing as e:
                raise HTTPException(409, str(e)) from None
        return state.pools[key]


def record_judgment(
    db: Store, store: Path, questions: list[Question] | None, state: JudgingState, body: JudgmentBody
) -> dict[str, Any]:
    check_pair(db, questions, state, body.question_id, body.page)
    try:
        with opened(store) as jdb:
            rid = jm.record(jdb, body.question_id, body.page, body.grade, body.reviewer, body.note)
    except ValueError as e:
        raise HTTPException(422, str(e)) from None
    return {"id": rid, **body.model_dump()}


def record_adjudication(
    db: Store, store: Path, questions: list[Question] | None, state: JudgingState, body: AdjudicationBody
) -> dict[str, Any]:
    check_pair(db, questions, state, body.question_id, body.page)
    try:
        with opened(store) as jdb:
            rid = jm.adjudicate(jdb, body.question_id, body.page, body.grade, body.adjudicator, body.note)
    except ValueError as e:
        raise HTTPException(422, str(e)) from None
    return {"id": rid, **body.model_dump()}


def agreement_of(store: Path, a: str, b: str) -> dict[str, Any]:
    with reading(store) as jdb:
        k = jm.cohens_kappa(jdb, a, b)
        dis = jm.disagreements(jdb, a, b)
    return {
        **k,
        "reviewers": [a, b],
        "disagreements": [
            {"question_id": d["question_id"], "page": d["page"], "grades": list(d["grades"])} for d in dis
        ],
    }


# --------------------------------------------------------------------------- JSON


@router.get(
    "/judgments/pool",
    tags=["judging"],
    summary="Pooled pages per question, and a reviewer's pending pairs",
)
def pool(
    store: StorePath,
    questions: Questions,
    state: State,
    methods: Methods = "bm25,lsa",
    depth: Depth = 10,
    reviewer: str | None = None,
) -> dict[str, Any]:
    p = get_pool(store, questions, state, methods, depth)
    out: dict[str, Any] = {"methods": methods, "depth": depth, "pool": p}
    if reviewer:
        with reading(store) as jdb:
            out["pending"] = [list(x) for x in jm.pending(jdb, p, reviewer)]
    return out


@router.post(
    "/judgments", tags=["judging"], status_code=201, summary="Record a relevance judgment (reviewer's token)"
)
def post_judgment(
    request: Request, body: JudgmentBody, db: DB, store: StorePath, questions: Questions, state: State
) -> dict[str, Any]:
    require_writer(request, body.reviewer)
    return record_judgment(db, store, questions, state, body)


@router.get("/judgments", tags=["judging"], summary="Judgment history (oldest first)")
def get_judgments(
    store: StorePath, question_id: str | None = None, page: str | None = None, reviewer: str | None = None
) -> dict[str, Any]:
    with reading(store) as jdb:
        return {"judgments": jm.history(jdb, question_id, page, reviewer)}


@router.get(
    "/judgments/agreement", tags=["judging"], summary="Cohen's kappa and disagreements of two reviewers"
)
def agreement(a: str, b: str, store: StorePath) -> dict[str, Any]:
    return agreement_of(store, a, b)


@router.post(
    "/judgments/adjudicate",
    tags=["judging"],
    status_code=201,
    summary="Record a final grade (adjudicator's token)",
)
def post_adjudication(
    request: Request, body: AdjudicationBody, db: DB, store: StorePath, questions: Questions, state: State
) -> dict[str, Any]:
    require_writer(request, body.adjudicator)
    return record_adjudication(db, store, questions, state, body)


@router.get(
    "/judgments/export",
    tags=["judging"],
    summary="The question set with evidence from the judgments (questions.jsonl)",
    response_class=PlainTextResponse,
)
def export(store: StorePath, questions: Questions, reviewer: str | None = None) -> Response:
    qs = need_questions(questions)
    with tempfile.TemporaryDirectory() as tmp, reading(store) as jdb:
        out = Path(tmp) / "questions.jsonl"
        rep = jm.export(jdb, qs, out, reviewer)
        text = out.read_text(encoding="utf-8")
    headers = {
        "Content-Disposition": 'attachment; filename="judged-questions.jsonl"',
        "X-Export-Changed": str(len(rep.changed)),
        "X-Export-Warnings": str(len(rep.warnings)),
    }
    return PlainTextResponse(text, media_type="application/x-ndjson", headers=headers)


# --------------------------------------------------------------------------- HTML


@router.get("/judge", response_class=HTMLResponse, include_in_schema=False)
def judge_page(
    request: Request, db: DB, store: StorePath, questions: Questions, state: State
) -> HTMLResponse:
    qp = request.query_params
    reviewer = qp.get("reviewer", "").strip()[:100]
    methods = qp.get("methods", "bm25,lsa")[:200]
    depth = int(qp["depth"]) if qp.get("depth", "").isdigit() and 1 <= int(qp["depth"]) <= 50 else 10
    ctx: dict[str, Any] = {
        "reviewer": reviewer,
        "methods": methods,
        "depth": depth,
        "has_questions": questions is not None,
        "grade_words": GRADE_WORDS,
        "item": None,
        "total": 0,
        "left": 0,
        "error": "",
        "judged": qp.get("judged", ""),
    }
    if questions is not None and reviewer:
        try:
            p = get_pool(store, questions, state, methods, depth)
        except HTTPException as e:
            ctx["error"] = str(e.detail)
            p = {}
        with reading(store) as jdb:
            todo = jm.pending(jdb, p, reviewer)
        ctx["total"] = sum(len(v) for v in p.values())
        ctx["left"] = len(todo)
        if todo:
            qid, page = todo[0]
            q = state.by_id[qid]
            d, n, row = resolve_page(db, page)
            terms = content_terms(q.question)
            ctx["item"] = {
                "q": q,
                "page": page,
                "doc": d,
                "n": n,
                "image": f"/pages/{page.replace('#', '%23')}/image?{urlencode({'q': q.question})}",
                "text": row["raw"],
                "hits": highlight_spans(row["raw"], terms),
            }
    return TEMPLATES.TemplateResponse(request, "judge.html", ctx)


@router.post("/judge", include_in_schema=False)
async def judge_post(
    request: Request, db: DB, store: StorePath, questions: Questions, state: State
) -> Response:
    form = await request.form()
    form_writer(request, form, str(form.get("reviewer", "")))
    data = {k: str(form.get(k, "")) for k in ("question_id", "page", "reviewer", "note")}
    grade = str(form.get("grade", ""))
    if grade not in ("0", "1", "2"):
        raise HTTPException(422, "choose a grade: 0, 1 or 2")
    try:
        body = JudgmentBody(**data, grade=int(grade))
    except ValueError as e:
        raise HTTPException(422, _readable(e)) from None
    res = await run_in_threadpool(record_judgment, db, store, questions, state, body)
    back = {
        "reviewer": body.reviewer,
        "methods": str(form.get("methods", "bm25,lsa")),
        "depth": str(form.get("depth", "10")),
        "judged": str(res["id"]),
    }
    return RedirectResponse(f"/judge?{urlencode(back)}", status_code=303)


@router.get("/judge/agreement", response_class=HTMLResponse, include_in_schema=False)
def agreement_page(request: Request, store: StorePath, state: State) -> HTMLResponse:
    qp = request.query_params
    a, b = qp.get("a", "")[:100], qp.get("b", "")[:100]
    with reading(store) as jdb:
        reviewers = sorted({k[2] for k in jm.current(jdb) if not k[2].startswith(jm.ADJUDICATOR)})
    res = agreement_of(store, a, b) if a and b else None
    return TEMPLATES.TemplateResponse(
        request,
        "agreement.html",
        {
            "a": a,
            "b": b,
            "reviewers": reviewers,
            "res": res,
            "by_id": state.by_id,
            "grade_words": GRADE_WORDS,
        },
    )


@router.post("/judge/adjudicate", include_in_schema=False)
async def adjudicate_post(
    request: Request, db: DB, store: StorePath, questions: Questions, state: State
) -> Response:
    form = await request.form()
    form_writer(request, form, str(form.get("adjudicator", "")))
    grade = str(form.get("grade", ""))
    if grade not in ("0", "1", "2"):
        raise HTTPException(422, "choose a grade: 0, 1 or 2")
    try:
        body = AdjudicationBody(
            question_id=str(form.get("question_id", "")),
            page=str(form.get("page", "")),
            grade=int(grade),
            adjudicator=str(form.get("adjudicator", "")),
            note=str(form.get("note", "")),
        )
    except ValueError as e:
        raise HTTPException(422, _readable(e)) from None
    await run_in_threadpool(record_adjudication, db, store, questions, state, body)
    back = {"a": str(form.get("a", "")), "b": str(form.get("b", ""))}
    return RedirectResponse(f"/judge/agreement?{urlencode(back)}", status_code=303)
