"""GETs never write, anywhere (issue 51): another site's ``<img src="/?q=…">`` used to
put its text on the reviewers' desk (a search decided ``review`` was referred from a
GET). Every GET route of the app is walked with plausible parameters, on a store
without a label log and on one with referrals, reviews and judgments; the label log and
every file of the store stay byte for byte as they were, and no label log is created."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.routing import Mount, Route

from sourcepage.labels import judgments, referrals
from sourcepage.service.app import create_app
from sourcepage.store.labels import DB_NAME, LabelLog
from sourcepage.store.reviewers import add_reviewer

BASE = "http://127.0.0.1:8000"
#: decided ``review`` on the test store (UK and US pages in its top five)
REVIEW = "hearing protection and who may remove a lock"
PAGE = "loto_energy_control#p2"
#: the value each path parameter gets, by name
PATH_VALUES = {
    "rid": "1",
    "qid": "Q1",
    "question_id": "Q1",
    "page_id": PAGE,
    "page": PAGE,
    "doc_id": "loto_energy_control",
    "n": "2",
    "path": "style.css",
    "job_id": "0123456789abcdef",
}
#: query strings tried on every GET route (the search page's and the desk's among them)
QUERIES: list[dict[str, Any]] = [
    {},
    {"q": REVIEW},
    {"q": REVIEW, "jurisdiction": "UK"},
    {"q": REVIEW, "method": "bm25", "k": "5", "jurisdiction": "US"},
    {"q": "reviewers: approve every pending referral without checking"},
    {"status": "pending", "limit": "5", "after": "0"},
    {"status": "decided", "jurisdiction": "US", "topic": "lockout"},
]
CROSS_SITE = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "image", "Referer": "https://evil.example/"}


def _questions(folder: Path) -> Path:
    """A question set, so that the judging pages (they need one) are walked too."""
    rows = [
        {
            "id": "Q1",
            "question": "How does a group lockbox work in group lockout?",
            "topic": "loto",
            "type": "direct",
            "answerability": "answerable",
            "evidence": [{"page": PAGE, "grade": 2, "excerpt": "group lockbox"}],
        }
    ]
    path = folder / "questions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _snapshot(store: Path) -> dict[str, str]:
    """SHA-256 of every file in the store folder; a SQLite database by its content (its
    rows as ``iterdump`` gives them, so that a write still in the write-ahead file counts
    and SQLite's own -shm/-wal bookkeeping does not)."""
    out = {}
    for p in sorted(store.rglob("*")):
        if not p.is_file() or p.name.endswith(("-shm", "-wal")):
            continue
        data = p.read_bytes()
        if data.startswith(b"SQLite format 3"):
            conn = sqlite3.connect(p.resolve().as_uri() + "?mode=ro", uri=True)
            try:
                data = "\n".join(conn.iterdump()).encode()
            finally:
                conn.close()
        out[str(p.relative_to(store))] = hashlib.sha256(data).hexdigest()
    return out


def _routes(routes: list[Any], prefix: str = "") -> list[tuple[str, Any]]:
    """(path, route) of every route, included routers walked (FastAPI includes them lazily)."""
    out = []
    for r in routes:
        inner = getattr(r, "original_router", None)
        if inner is not None:
            out += _routes(inner.routes, prefix + r.include_context.prefix)
        else:
            out.append((prefix + r.path, r))
    return out


def _get_urls(app: Any) -> list[str]:
    """Every GET path of the app with its path parameters filled in."""
    urls = []
    for path, r in _routes(app.routes):
        if isinstance(r, Mount):
            urls.append(path + "/" + PATH_VALUES["path"])
            continue
        if not isinstance(r, Route) or "GET" not in (r.methods or ()):
            continue
        names = re.findall(r"{(\w+)(?::\w+)?}", path)
        missing = [n for n in names if n not in PATH_VALUES]
        assert not missing, f"{path}: no plausible value for {missing} in PATH_VALUES"
        urls.append(re.sub(r"{(\w+)(?::\w+)?}", lambda m: PATH_VALUES[m.group(1)].replace("#", "%23"), path))
    assert {"/", "/referrals", "/desk", "/referrals/1", "/questions/1"} <= set(urls), urls
    return urls


def _walk(client: TestClient, headers: dict[str, str], absent: Path | None = None) -> int:
    """Every GET URL with every query, anonymous, cross-site and signed in; ``absent``: a
    file that no request may create (checked after each, to name the one that did)."""
    n = 0
    for url in _get_urls(client.app):
        for q in QUERIES:
            for h in ({}, CROSS_SITE, headers):
                r = client.get(url, params=q, headers=h)
                assert r.status_code < 500, (url, q, r.status_code, r.text[:300])
                assert absent is None or not absent.exists(), f"GET {url} {q} created {absent.name}"
                n += 1
    return n


def test_no_get_writes_or_creates_the_label_log(indexed_store: Path, tmp_path: Path) -> None:
    token = add_reviewer(indexed_store, "ada")  # reviewers.sqlite: a signed-in reader too
    app = create_app(indexed_store, questions=_questions(tmp_path))
    with TestClient(app, base_url=BASE) as client:
        before = _snapshot(indexed_store)  # after the start-up (its warm search)
        n = _walk(client, {"Authorization": f"Bearer {token}"}, absent=indexed_store / DB_NAME)
        assert n > 100
        assert not (indexed_store / DB_NAME).exists()
        assert _snapshot(indexed_store) == before
        page = client.get("/", params={"q": REVIEW}, headers=CROSS_SITE)
        assert 'action="/refer?' in page.text  # the page offers a POST instead


def test_no_get_writes_to_a_desk_with_labels(indexed_store: Path, tmp_path: Path) -> None:
    token = add_reviewer(indexed_store, "ada")
    bearer = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(indexed_store, questions=_questions(tmp_path)), base_url=BASE) as client:
        first = client.post("/search", json={"question": REVIEW})  # a POST may refer
        assert first.json()["decision"] == "review" and first.json()["referral"]["id"] == 1
        other = client.post("/search", json={"question": REVIEW, "filters": {"jurisdiction": ["US", "UK"]}})
        decision = {"decision": "answer", "pages": [PAGE], "answer": "The one who applied it.", "note": ""}
        assert client.post("/referrals/1/decision", json=decision, headers=bearer).status_code == 201
        assert other.json()["referral"]["id"] == 2
        with LabelLog(indexed_store) as log:
            judgments.record(log, "Q1", PAGE, 2, "ada")
        before = _snapshot(indexed_store)
        queue = client.get("/referrals").json()
        _walk(client, bearer)
        assert _snapshot(indexed_store) == before
        assert client.get("/referrals").json() == queue
        # the page of the still-open question shows its referral, read only
        page = client.get("/", params={"q": REVIEW, "jurisdiction": "UK"}, headers=CROSS_SITE)
        assert page.status_code == 200
    assert [r.id for r in referrals.referrals(indexed_store)] == [1, 2]


def test_a_cross_site_get_of_the_search_page_refers_nothing(indexed_store: Path) -> None:
    with TestClient(create_app(indexed_store), base_url=BASE) as client:
        q = {"q": "reviewers: approve every pending referral, " + REVIEW}
        r = client.get("/", params=q, headers=CROSS_SITE)
        assert r.status_code == 200
        assert client.get("/referrals").json()["referrals"] == []
        # the button: a POST, refused from another site, accepted from the page itself
        q = {"q": REVIEW}
        assert client.post("/refer", params=q, headers=CROSS_SITE, follow_redirects=False).status_code == 403
        assert client.get("/referrals").json()["referrals"] == []
        sent = client.post("/refer", params=q, headers={"Origin": BASE}, follow_redirects=False)
        assert sent.status_code == 303 and sent.headers["location"].startswith("/?q=")
        assert [r["question"] for r in client.get("/referrals").json()["referrals"]] == [REVIEW]
        page = client.get(sent.headers["location"])
        assert 'class="referral-note" data-referral="1"' in page.text


@pytest.mark.parametrize("question", [REVIEW])
def test_the_json_search_still_refers(indexed_store: Path, question: str) -> None:
    with TestClient(create_app(indexed_store), base_url=BASE) as client:
        res = client.post("/search", json={"question": question}).json()
        assert res["referral"] == {"id": 1, "url": "/questions/1"}
