"""Who may use the service, and from where: Host and Origin checks, reviewer identity
for every write, sign-in sessions with CSRF tokens.

Rules, in the order :class:`Guard` (an ASGI middleware) and the routes apply them:

1. **Host**: the ``Host`` header must name this service (``127.0.0.1``, ``localhost``,
   ``::1``, and the names given with ``serve --allowed-host``); otherwise 400. A web page
   elsewhere cannot reach the service through a DNS name of its own (DNS rebinding).
2. **Origin**: a POST whose ``Origin`` (or, without one, ``Referer``) is another origin,
   or whose ``Sec-Fetch-Site`` says cross-site or same-site, is refused (403): a page on
   another site or another port cannot post to the service.
3. **Identity**: every write (reviews, judgments, adjudications, a search with
   ``"log": true``) needs a reviewer: ``Authorization: Bearer <token>`` (a token from
   ``sourcepage reviewer add NAME``), or the session cookie of a sign-in at ``/login``
   together with its CSRF token (the ``csrf`` form field, or the ``X-CSRF-Token``
   header). The reviewer named in a write must be the one signed in. Without one: 401; a
   browser's form posted without one is sent to sign in and back to its page with
   ``restore=1`` (app.js puts back what was typed: the session may have ended meanwhile).
4. **Reads** are open on a loopback bind; with ``serve --public`` every page and
   endpoint except ``/login``, ``/health`` and static files needs a reviewer too.

Sessions live beside the accounts (``store.sessions``: every worker process of
``serve --workers N`` sees them), last 12 hours, and end on sign-out or when the
reviewer's token is replaced or removed. The cookie is ``HttpOnly`` and
``SameSite=Strict``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode, urlsplit

from fastapi import Depends, HTTPException, Request
from fastapi.responses import JSONResponse, RedirectResponse

from sourcepage.store import reviewers, sessions
from sourcepage.store.sessions import StoredSession

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
SESSION_COOKIE = "sourcepage_session"
SESSION_SECONDS = 12 * 3600
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
#: paths open without a reviewer in public mode
OPEN_PATHS = ("/login", "/health", "/static/")
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SIGN_IN = (
    "sign in first: a reviewer token from `sourcepage reviewer add NAME` "
    "(header Authorization: Bearer TOKEN, or the form at /login)"
)


#: a sign-in session (shared by the worker processes: ``store.sessions``)
Session = StoredSession


@dataclass(frozen=True)
class Identity:
    """The reviewer of a request and how it was shown: ``bearer`` or ``cookie``."""

    reviewer: str
    via: str
    session: Session | None = None


@dataclass
class Access:
    """Per app: the store whose accounts count, public or not, the accepted host names
    and the open sessions."""

    store: Path
    public: bool = False
    hosts: frozenset[str] = LOOPBACK_HOSTS

    @classmethod
    def of(cls, store: Path, public: bool, allowed_hosts: Iterable[str] | None) -> Access:
        hosts = LOOPBACK_HOSTS | {h.strip().lower().strip("[]") for h in allowed_hosts or () if h.strip()}
        return cls(store, public, frozenset(hosts))

    def identity(self, headers: dict[str, str], cookies: dict[str, str]) -> Identity | None:
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            token = auth[7:].strip()
            name = reviewers.reviewer_for_hash(self.store, reviewers.token_hash(token)) if token else None
            return Identity(name, "bearer") if name else None
        sid = cookies.get(SESSION_COOKIE, "")
        if not sid or len(sid) > 200:
            return None
        s = sessions.find_session(self.store, sid)
        if s is None or reviewers.reviewer_for_hash(self.store, s.token_sha256) != s.reviewer:
            return None
        return Identity(s.reviewer, "cookie", s)

    def sign_in(self, token: str) -> tuple[str, Session] | None:
        digest = reviewers.token_hash(token.strip())
        name = reviewers.reviewer_for_hash(self.store, digest)
        if name is None:
            return None
        sid = secrets.token_urlsafe(32)
        s = Session(name, digest, secrets.token_urlsafe(32), time.time() + SESSION_SECONDS)
        sessions.open_session(self.store, sid, s)
        return sid, s

    def sign_out(self, sid: str) -> None:
        sessions.end_session(self.store, sid)


def host_name(host: str) -> str:
    """The host name of a ``Host`` header value (no port, no brackets, lower case)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _cookies(raw: str) -> dict[str, str]:
    out = {}
    for part in raw.split(";"):
        k, eq, v = part.strip().partition("=")
        if eq:
            out.setdefault(k, v)
    return out


class Guard:
    """ASGI middleware: Host check, cross-origin write check, and in public mode a
    reviewer for every request outside ``OPEN_PATHS``. The request's identity is put in
    ``scope["state"]["identity"]`` for the routes and templates."""

    def __init__(self, app: Any, access: Access):
        self.app = app
        self.access = access

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = scope.get("headers", [])
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}
        hosts = sum(1 for k, _ in raw if k.lower() == b"host")
        problem = (400, "more than one Host header") if hosts > 1 else self.check(scope["method"], headers)
        if problem:
            status, message = problem
            await JSONResponse({"error": message}, status_code=status)(scope, receive, send)
            return
        ident = self.access.identity(headers, _cookies(headers.get("cookie", "")))
        scope.setdefault("state", {})["identity"] = ident
        path = scope.get("path", "")
        if self.access.public and ident is None and not path.startswith(OPEN_PATHS):
            if scope["method"] == "GET" and "text/html" in headers.get("accept", ""):
                query = scope.get("query_string", b"").decode("latin-1")
                target = "/login?" + urlencode({"next": path + ("?" + query if query else "")})
                await RedirectResponse(target, status_code=303)(scope, receive, send)
            elif back := form_back(scope["method"], headers):
                await RedirectResponse("/login?" + urlencode({"next": back}), 303)(scope, receive, send)
            else:
                refused = JSONResponse({"error": SIGN_IN}, 401, headers={"WWW-Authenticate": "Bearer"})
                await refused(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def check(self, method: str, headers: dict[str, str]) -> tuple[int, str] | None:
        """(status, reason) when the request is refused for its Host or its origin."""
        host = headers.get("host", "")
        if host_name(host) not in self.access.hosts:
            return 400, f"host {host!r} is not served here (serve it with `sourcepage serve --allowed-host`)"
        if method not in UNSAFE:
            return None
        site = headers.get("sec-fetch-site", "")
        if site in ("cross-site", "same-site"):
            return 403, f"cross-origin write refused (Sec-Fetch-Site: {site})"
        origin = headers.get("origin") or headers.get("referer")
        if origin is not None:
            netloc = urlsplit(origin).netloc.lower() if origin != "null" else ""
            if not netloc or netloc != host.lower():
                return 403, f"cross-origin write refused (origin {origin!r} is not {host!r})"
        return None


def form_back(method: str, headers: dict[str, str]) -> str:
    """Where a browser's form posted after its session ended goes back to after sign-in:
    the page it was posted from (its same-origin ``Referer``) with ``restore=1``, where
    app.js puts back what was typed (saved in the tab on submit); '' for anything else
    (a JSON client gets its 401)."""
    kind = headers.get("content-type", "")
    if method != "POST" or not kind.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        return ""
    ref = urlsplit(headers.get("referer", ""))
    if "text/html" not in headers.get("accept", "") or ref.netloc.lower() != headers.get("host", "").lower():
        return ""
    query = "&".join(q for q in ref.query.split("&") if q and not q.startswith("restore="))
    return safe_next((ref.path or "/") + "?" + (query + "&" if query else "") + "restore=1")


def safe_next(target: str) -> str:
    """A redirect target that stays on this service (a path, never ``//host``)."""
    return target if target.startswith("/") and not target.startswith(("//", "/\\")) else "/"


# --------------------------------------------------------------------------- in routes


def identity(request: Request) -> Identity | None:
    return request.scope.get("state", {}).get("identity")


def _checked(request: Request, ident: Identity | None, csrf: str | None, claimed: str | None) -> str:
    if ident is None:
        raise HTTPException(401, SIGN_IN, headers={"WWW-Authenticate": "Bearer"})
    if ident.via == "cookie":
        assert ident.session is not None
        if not csrf or not secrets.compare_digest(csrf, ident.session.csrf):
            raise HTTPException(403, "missing or wrong CSRF token: reload the page and submit again")
    if claimed and claimed != ident.reviewer:
        raise HTTPException(403, f"signed in as {ident.reviewer!r}, not {claimed!r}")
    return ident.reviewer


def writer(request: Request) -> str:
    """The reviewer of a JSON write (401 without one, 403 on a cookie without its CSRF
    header)."""
    return _checked(request, identity(request), request.headers.get(CSRF_HEADER), None)


def form_writer(request: Request, form: Any, claimed: str | None = None) -> str:
    """The reviewer of a form post: a bearer token, or the session and its ``csrf``
    field; ``claimed`` (the name the form gives) must be that reviewer."""
    return _checked(request, identity(request), str(form.get(CSRF_FIELD, "")), claimed)


def require_writer(request: Request, claimed: str) -> str:
    """:func:`writer` whose reviewer must be ``claimed`` (the name a body gives)."""
    return _checked(request, identity(request), request.headers.get(CSRF_HEADER), claimed)


def form_editor(request: Request, form: Any) -> str:
    """:func:`form_writer` whose reviewer must hold the ``editor`` role (403 otherwise):
    adding, replacing, withdrawing and restoring documents."""
    name = form_writer(request, form)
    if reviewers.EDITOR not in reviewers.reviewer_roles(request.app.state.access.store, name):
        raise HTTPException(
            403,
            f"{name!r} may review but not change the library: an editor may "
            f"(`sourcepage reviewer add {name} --role editor`)",
        )
    return name


def is_editor(request: Request) -> bool:
    """Whether the request's reviewer holds the ``editor`` role (the library page shows
    the editor's forms to them only)."""
    ident = identity(request)
    return ident is not None and reviewers.EDITOR in reviewers.reviewer_roles(
        request.app.state.access.store, ident.reviewer
    )


Writer = Annotated[str, Depends(writer)]


def template_context(request: Request) -> dict[str, Any]:
    """``signed_in`` (the reviewer of a session) and ``csrf`` (its token) for the forms."""
    ident = identity(request)
    if ident is None or ident.session is None:
        return {"signed_in": "", "csrf": ""}
    return {"signed_in": ident.reviewer, "csrf": ident.session.csrf}
