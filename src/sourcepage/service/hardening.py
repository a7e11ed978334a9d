"""What every response and every request body of the service is held to, before any
route runs: a body size limit, and the browser security headers.

- :class:`BodyLimit` (ASGI): a request body over ``MAX_BODY`` bytes is refused with 413
  before it is parsed: at once when its ``Content-Length`` says so, else as soon as the
  bytes read pass the limit (a chunked body). Before, a 200 MB JSON body was parsed
  (server memory +560 MB) and only then refused.
- :class:`SecurityHeaders` (ASGI): ``Content-Security-Policy`` (scripts, styles and
  images from the service only; the API docs pages need their inline scripts),
  ``X-Frame-Options: DENY``, ``X-Content-Type-Options: nosniff``,
  ``Referrer-Policy: same-origin`` on every response (no address, which may hold a
  question, leaves for another site; ``no-referrer`` made Chromium send ``Origin: null``
  with the service's own forms, which the cross-origin write check refuses).
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from sourcepage.service.auth import SESSION_COOKIE

__all__ = ["MAX_BODY", "MAX_UPLOAD", "UPLOAD_PATHS", "BodyLimit", "SecurityHeaders"]

#: the largest request body accepted (a search, a review, a judgment or a form is a few KB)
MAX_BODY = 1 << 20
#: the largest body of an upload (``UPLOAD_PATHS``: a PDF and its fields, from an editor)
MAX_UPLOAD = 64 << 20
UPLOAD_PATHS = frozenset({"/documents", "/documents/draft", "/library/draft"})
_SESSION = SESSION_COOKIE.encode() + b"="

CSP = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
#: /docs and /redoc start Swagger UI and ReDoc from inline scripts (assets still local)
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
DOCS_PATHS = ("/docs", "/redoc")
HEADERS = [
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]


def _too_large(limit: int) -> JSONResponse:
    size = f"{limit >> 20} MB" if limit >= 1 << 20 and limit % (1 << 20) == 0 else f"{limit} bytes"
    return JSONResponse({"error": f"request body over {limit} bytes ({size})"}, status_code=413)


def _signed(scope: Any) -> bool:
    """Whether a request shows a token or a session cookie (checked by the Guard after): an
    anonymous upload is held to the small limit before it is refused."""
    for k, v in scope.get("headers", []):
        if k.lower() == b"authorization" or (k.lower() == b"cookie" and _SESSION in v):
            return True
    return False


class BodyLimit:
    """ASGI middleware: 413 for a body over ``limit`` bytes, before the app reads it.

    A body without a Content-Length is read here (up to the limit) and replayed to the
    app, so the app never holds more than ``limit`` bytes of one request. A POST to
    ``UPLOAD_PATHS`` (an editor's PDF) with a token or a session is held to
    ``upload_limit`` instead."""

    def __init__(self, app: Any, limit: int = MAX_BODY, upload_limit: int = MAX_UPLOAD):
        self.app = app
        self.limit = limit
        self.upload_limit = upload_limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        upload = scope["method"] == "POST" and scope.get("path", "") in UPLOAD_PATHS and _signed(scope)
        limit = self.upload_limit if upload else self.limit
        lengths = [v for k, v in scope.get("headers", []) if k.lower() == b"content-length"]
        if lengths:
            try:
                size = int(lengths[0])
            except ValueError:
                size = -1
            if len(lengths) > 1 or size < 0:
                await JSONResponse({"error": "bad Content-Length"}, status_code=400)(scope, receive, send)
                return
            if size > limit:
                await _too_large(limit)(scope, receive, send)
                return
        messages, total = [], 0
        while True:  # read the body here (at most ``limit`` bytes), then replay it
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            total += len(message.get("body", b""))
            if total > limit:
                await _too_large(limit)(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


class SecurityHeaders:
    """ASGI middleware: the browser security headers on every response."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = DOCS_CSP if scope.get("path", "").startswith(DOCS_PATHS) else CSP

        async def _send(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                have = {k.lower() for k, _ in headers}
                extra = [(b"content-security-policy", csp.encode()), *HEADERS]
                headers += [(k, v) for k, v in extra if k not in have]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, _send)
