"""The library's editor: a reviewer with the ``editor`` role adds a PDF, replaces a document
with a new edition, withdraws or restores one, from the library page or as JSON. A thin
shell over :mod:`sourcepage.editions` (the changes) and :mod:`sourcepage.jobs` (each in
the background, one at a time per store).

- ``POST /documents/draft`` (JSON) and ``POST /library/draft`` (the form page): an
  uploaded PDF is kept in the store's ``library/incoming`` and its manifest row drafted;
  the form comes back filled in, the guessed fields marked.
- ``POST /documents``: the PDF (``file``, or the ``staged`` one of a draft) with its fields,
  and ``replaces`` for a new edition; 202 with the job (a form: back to the library page
  following it).
- ``POST /documents/{doc_id}/withdraw`` and ``/restore``: 202 with the job.
- ``GET /documents/jobs/{id}``: the job's phase, percent, message and error.

Who: 401 without a reviewer, 403 for a reviewer who is not an editor (and the Guard's
Host, Origin and CSRF checks). What: only PDFs (``%PDF-``), of at most
``hardening.MAX_UPLOAD`` bytes, kept under a safe file name; a bad file answers 422
naming it and why; a second change while one runs answers 409.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.datastructures import UploadFile

from sourcepage import api, editions, jobs
from sourcepage.corpus.draft import DraftRow
from sourcepage.service.auth import form_editor
from sourcepage.service.deps import TEMPLATES
from sourcepage.store.lock import StoreBusy, editing
from sourcepage.store.schema import StoreError

router = APIRouter()


def _store(request: Request) -> Path:
    return request.app.state.store


def _wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


async def _staged(request: Request, form: Any) -> Path:
    """The uploaded PDF kept in the store (the form's ``file``, or its ``staged`` name)."""
    upload = form.get("file")
    store = _store(request)
    try:
        if isinstance(upload, UploadFile) and upload.filename:
            data = await upload.read()
            return await run_in_threadpool(editions.stage_upload, store, upload.filename, data)
        if form.get("staged"):
            return editions.staged_path(store, str(form.get("staged")))
    except editions.EditError as e:
        raise HTTPException(422, str(e)) from None
    raise HTTPException(422, "no file: choose a PDF to add")


async def _draft(pdf: Path) -> DraftRow:
    try:
        return await run_in_threadpool(editions.draft_upload, pdf)
    except editions.EditError as e:
        pdf.unlink(missing_ok=True)
        raise HTTPException(422, str(e)) from None


def _draft_json(pdf: Path, draft: DraftRow) -> dict[str, Any]:
    doc = draft.doc.as_dict()
    return {
        "staged": pdf.name,
        "file": editions.original_name(pdf),
        "fields": {k: doc.get(k, "") for k in editions.EDITABLE},
        "computed": {k: doc.get(k, "") for k in ("sha256", "pages", "license")},
        "guessed": {g.field: g.evidence for g in draft.guesses},
    }


@router.post("/documents/draft", tags=["library"], summary="Draft the manifest row of an uploaded PDF")
async def draft_document(request: Request) -> dict[str, Any]:
    """Keep the uploaded ``file`` (a PDF) and return its drafted fields, which of them were
    guessed and from what, and its ``staged`` name for ``POST /documents``."""
    form = await request.form()
    form_editor(request, form)
    pdf = await _staged(request, form)
    return _draft_json(pdf, await _draft(pdf))


@router.post("/library/draft", response_class=HTMLResponse, include_in_schema=False)
async def draft_page(request: Request) -> HTMLResponse:
    """The add form filled in from the uploaded PDF's drafted row."""
    form = await request.form()
    form_editor(request, form)
    pdf = await _staged(request, form)
    ctx = _draft_json(pdf, await _draft(pdf)) | {"replaces": str(form.get("replaces", ""))[:200]}
    if ctx["replaces"]:  # a new edition starts from the fields a person gave the last one
        kept = editions.edition_fields(_store(request), ctx["replaces"])
        ctx["fields"] |= kept | {"doc_id": ctx["replaces"]}
        ctx["guessed"] = {k: v for k, v in ctx["guessed"].items() if k not in kept}
    return TEMPLATES.TemplateResponse(request, "library_add.html", ctx)


def _started(request: Request, job: jobs.Job) -> Response:
    if _wants_html(request):
        return RedirectResponse(f"/library?job={job.id}", status_code=303)
    body = job.as_dict() | {"url": f"/documents/jobs/{job.id}"}
    return JSONResponse(body, status_code=202, headers={"Location": body["url"]})


def _warm(store: Path) -> None:
    """Load the new indexes (a search with the defaults) so the next search is quick."""
    api.search("warm-up", store, build=False, answer=False, refer=False)


def _not_busy(request: Request) -> None:
    """409 at once while another change runs (before the upload is kept and read)."""
    if editing(_store(request)):
        raise HTTPException(409, "another change of the library is under way: wait for it to finish")


def _start(request: Request, job: jobs.Job, work: Any) -> Response:
    store = _store(request)
    try:
        started = jobs.start(store, job, work, warm=lambda: _warm(store))
    except StoreBusy as e:
        raise HTTPException(409, str(e)) from None
    except (editions.EditError, StoreError) as e:
        raise HTTPException(422, str(e)) from None
    return _started(request, started)


@router.post(
    "/documents", tags=["library"], summary="Add a PDF, or a new edition of a document", status_code=202
)
async def add_document(request: Request) -> Response:
    """``file`` (a PDF) or ``staged`` (from ``POST /documents/draft``), the fields
    (``editions.EDITABLE``; a field left empty keeps the drafted value) and ``replaces``
    (a doc_id) for a new edition. Ingested and indexed in the background: 202 with the
    job (``GET /documents/jobs/{id}``)."""
    form = await request.form()
    by = form_editor(request, form)
    _not_busy(request)
    pdf = await _staged(request, form)
    draft = await _draft(pdf)
    fields = {k: str(form.get(k, ""))[:500] for k in editions.EDITABLE}
    replaces = str(form.get("replaces", "")).strip()[:200]
    job = jobs.Job("", "replace" if replaces else "add", replaces or fields["doc_id"] or draft.doc.doc_id)
    job.file, job.by = editions.original_name(pdf), by

    def work(progress: editions.Progress) -> None:
        doc = editions.add_document(_store(request), pdf, fields, by, replaces, progress, draft)
        job.doc_id = doc.doc_id

    return _start(request, job, work)


async def _withdrawal(request: Request, doc_id: str, withdrawn: bool) -> Response:
    form = await request.form()
    by = form_editor(request, form)
    db = request.app.state.db
    searchable = db.document(doc_id) is not None
    if searchable != withdrawn or (not withdrawn and db.document(doc_id, withdrawn=True) is None):
        state = "searchable" if withdrawn else "withdrawn"
        raise HTTPException(404, f"the store holds no {state} document {doc_id!r}")
    reason = str(form.get("reason", ""))[:500]
    job = jobs.Job("", "withdraw" if withdrawn else "restore", doc_id, by=by)

    def work(progress: editions.Progress) -> None:
        editions.set_withdrawn(_store(request), doc_id, withdrawn, by, reason, progress)

    return _start(request, job, work)


@router.post("/documents/{doc_id}/withdraw", tags=["library"], summary="Withdraw a document", status_code=202)
async def withdraw_document(request: Request, doc_id: str) -> Response:
    """No longer searched; its pages, history and reviews are kept (``reason``: why)."""
    return await _withdrawal(request, doc_id, True)


@router.post(
    "/documents/{doc_id}/restore", tags=["library"], summary="Restore a withdrawn document", status_code=202
)
async def restore_document(request: Request, doc_id: str) -> Response:
    return await _withdrawal(request, doc_id, False)


@router.get("/documents/jobs/{job_id}", tags=["library"], summary="Where a change of the library is")
def job_state(request: Request, job_id: str) -> dict[str, Any]:
    """``phase`` (queued, reading, ingesting, indexing, loading, done, failed),
    ``percent``, ``message``, and ``error`` naming the file when it failed."""
    job = jobs.read_job(_store(request), job_id)
    if job is None:
        raise HTTPException(404, f"no job {job_id!r}")
    return job.as_dict()
