"""The sign-in pages: ``GET/POST /login`` (a reviewer's token opens a session; the cookie
is ``HttpOnly``, ``SameSite=Strict``) and ``POST /logout``. Apart from
:mod:`sourcepage.service.auth` (identity, sessions, the Guard) because the pages are
rendered with the service's templates (:mod:`sourcepage.service.deps`), which read the
signed-in reviewer from auth: one direction, no circle."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from sourcepage.service.auth import SESSION_COOKIE, SESSION_SECONDS, Access, form_writer, safe_next
from sourcepage.service.deps import TEMPLATES

router = APIRouter()


def _access(request: Request) -> Access:
    return request.app.state.access


@router.get("/login", response_class=HTMLResponse, include_in_schema=False)
def login_page(request: Request) -> HTMLResponse:
    nxt = safe_next(request.query_params.get("next", "/"))
    return TEMPLATES.TemplateResponse(request, "login.html", {"next": nxt, "error": ""})


@router.post("/login", include_in_schema=False)
async def login(request: Request) -> Response:
    form = await request.form()
    nxt = safe_next(str(form.get("next", "/")))
    opened = _access(request).sign_in(str(form.get("token", ""))[:200])
    if opened is None:
        ctx = {"next": nxt, "error": "unknown or replaced token"}
        return TEMPLATES.TemplateResponse(request, "login.html", ctx, status_code=401)
    sid, _ = opened
    resp = RedirectResponse(nxt, status_code=303)
    resp.set_cookie(
        SESSION_COOKIE,
        sid,
        max_age=SESSION_SECONDS,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return resp


@router.post("/logout", include_in_schema=False)
async def logout(request: Request) -> Response:
    form = await request.form()
    form_writer(request, form)
    _access(request).sign_out(request.cookies.get(SESSION_COOKIE, ""))
    resp = RedirectResponse("/", status_code=303)
    resp.delete_cookie(SESSION_COOKIE, path="/")
    return resp
