"""A TestClient for the service as a reviewer on this machine uses it.

It talks to ``http://127.0.0.1`` (the Host the service accepts by default) and signs
each POST in as the reviewer it names (``reviewer`` or ``adjudicator`` in a JSON body
or a form), creating that reviewer's account in the served store on first use, so the
functional tests read as before. The access rules themselves (no identity, wrong
identity, CSRF, Host, Origin) are tested in tests/reliability/test_security.py with a
plain TestClient.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from sourcepage.store.reviewers import add_reviewer

LOCAL = "http://127.0.0.1"


def named(payload: Any) -> str:
    if isinstance(payload, dict):
        for key in ("reviewer", "adjudicator"):
            if isinstance(payload.get(key), str) and payload[key]:
                return payload[key]
    return ""


class LocalClient(TestClient):
    def __init__(self, app: Any, **kw: Any):
        super().__init__(app, base_url=LOCAL, **kw)
        self.tokens: dict[str, str] = {}

    def token(self, name: str) -> str:
        if name not in self.tokens:
            self.tokens[name] = add_reviewer(self.app.state.store, name)  # type: ignore[attr-defined]
        return self.tokens[name]

    def post(self, url: Any, **kw: Any) -> Any:  # type: ignore[override]
        name = named(kw.get("json")) or named(kw.get("data"))
        headers = dict(kw.get("headers") or {})
        if name and not any(k.lower() == "authorization" for k in headers):
            headers["Authorization"] = f"Bearer {self.token(name)}"
            kw["headers"] = headers
        return super().post(url, **kw)
