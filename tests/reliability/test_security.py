"""The security cases: who may write (reviewer identity, sessions, CSRF), from where
(Host, Origin), what a public bind needs, and what the pages never do (read a file
outside the corpus, run a script from the data, link to ``javascript:``).

The attack of issue 16: two cross-site form posts from any web page removed a page from
a question's exported evidence. Here the same posts are refused and the export stays.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pdf_factory as pf
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from sourcepage.cli import app as cli
from sourcepage.ingest import ingest
from sourcepage.retrieval.index import build_indexes
from sourcepage.service.app import create_app
from sourcepage.store.reviewers import add_reviewer, remove_reviewer

HOST = "127.0.0.1:8000"
BASE = f"http://{HOST}"
QUESTIONS = [
    {
        "id": "Q1",
        "question": "How do workers use a group lockbox?",
        "topic": "loto",
        "type": "direct",
        "answerability": "answerable",
        "evidence": [{"page": "loto_energy_control#p2", "grade": 2}],
    }
]
PAGE = "loto_energy_control#p2"
OTHER = "loto_energy_control#p3"


@pytest.fixture
def site(indexed_store: Path, tmp_path: Path):
    """A client of a store with bm25 built and a question set, no reviewer accounts."""
    qfile = tmp_path / "questions.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    with TestClient(create_app(indexed_store, questions=qfile), base_url=BASE) as c:
        yield c


@pytest.fixture
def served(indexed_store: Path, tmp_path: Path):
    """(client, store, {reviewer: token}) for a store with bm25 built, a question set,
    two reviewers who agree on Q1/p3 and disagree on Q1/p2, and one adjudication keeping
    p2 in the evidence."""
    qfile = tmp_path / "questions.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    tokens = {name: add_reviewer(indexed_store, name) for name in ("ada", "bo")}
    with TestClient(create_app(indexed_store, questions=qfile), base_url=BASE) as c:
        for name, page, grade in (("ada", PAGE, 2), ("bo", PAGE, 0), ("ada", OTHER, 1), ("bo", OTHER, 1)):
            body = {"question_id": "Q1", "page": page, "grade": grade, "reviewer": name}
            assert c.post("/judgments", json=body, headers=_bearer(tokens[name])).status_code == 201
        adj = {"question_id": "Q1", "page": PAGE, "grade": 2, "adjudicator": "ada"}
        assert c.post("/judgments/adjudicate", json=adj, headers=_bearer(tokens["ada"])).status_code == 201
        yield c, indexed_store, tokens


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _export(c: TestClient) -> str:
    r = c.get("/judgments/export")
    assert r.status_code == 200
    return r.text


def _sign_in(c: TestClient, token: str) -> str:
    """Sign in through the form; returns the CSRF token the pages then carry."""
    r = c.post("/login", data={"token": token, "next": "/judge"}, follow_redirects=False)
    assert r.status_code == 303
    page = c.get("/judge/agreement", params={"a": "ada", "b": "bo"}).text
    return page.split('name="csrf" value="', 1)[1].split('"', 1)[0]


# --------------------------------------------------------------------------- CSRF and Origin

ATTACK = {"question_id": "Q1", "page": PAGE, "grade": "0", "adjudicator": "ada", "a": "ada", "b": "bo"}


@pytest.mark.parametrize(
    ("headers", "with_session", "csrf", "status"),
    [
        ({}, False, None, 401),  # a form post with no reviewer at all
        ({"origin": "http://evil.example"}, True, "page", 403),  # another site, with the victim's cookie
        ({"sec-fetch-site": "cross-site"}, True, "page", 403),
        ({"origin": "null"}, True, "page", 403),  # a sandboxed or file: page
        ({"referer": "http://evil.example/attack.html"}, True, "page", 403),
        ({"origin": "http://127.0.0.1:9999"}, True, "page", 403),  # same host, another port
        ({"sec-fetch-site": "same-site"}, True, "page", 403),
        ({}, True, None, 403),  # the cookie alone, no CSRF token
        ({}, True, "forged", 403),
    ],
)
def test_cross_site_form_posts_change_nothing(
    served, headers: dict, with_session: bool, csrf: str | None, status: int
) -> None:
    c, _, tokens = served
    before = _export(c)
    form = dict(ATTACK)
    if with_session:
        real = _sign_in(c, tokens["ada"])
        if csrf is not None:
            form["csrf"] = real if csrf == "page" else csrf
    for _ in range(2):  # the attack posted twice
        r = c.post("/judge/adjudicate", data=form, headers=headers, follow_redirects=False)
        assert r.status_code == status, r.text[:300]
    assert _export(c) == before
    assert '"loto_energy_control#p2"' in before


def test_a_signed_in_reviewer_adjudicates_through_the_form(served) -> None:
    c, _, tokens = served
    csrf = _sign_in(c, tokens["ada"])
    cookie = c.cookies.get("sourcepage_session")
    assert cookie
    form = {**ATTACK, "csrf": csrf}
    r = c.post("/judge/adjudicate", data=form, headers={"origin": BASE}, follow_redirects=False)
    assert r.status_code == 303
    assert '"loto_energy_control#p2"' not in _export(c)  # grade 0 now: the page left the evidence
    # as somebody else: refused even with a valid session and token
    r = c.post("/judge/adjudicate", data={**form, "adjudicator": "bo"}, follow_redirects=False)
    assert r.status_code == 403 and "signed in as 'ada'" in r.json()["error"]


def test_session_cookie_is_httponly_strict_and_ends_with_the_account(served) -> None:
    c, store, tokens = served
    r = c.post("/login", data={"token": tokens["bo"]}, follow_redirects=False)
    setcookie = r.headers["set-cookie"].lower()
    assert "httponly" in setcookie and "samesite=strict" in setcookie and "path=/" in setcookie
    assert "Sign out bo" in c.get("/").text
    remove_reviewer(store, "bo")
    assert "Sign out bo" not in c.get("/").text
    assert c.post("/login", data={"token": tokens["bo"]}).status_code == 401


@pytest.mark.parametrize(
    "target", ["//evil.example/x", "http://evil.example/", "/\\evil.example", "javascript:x"]
)
def test_login_never_redirects_off_the_service(served, target: str) -> None:
    c, _, tokens = served
    r = c.post("/login", data={"token": tokens["ada"], "next": target}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"


# --------------------------------------------------------------------------- identity on the JSON API

REVIEW = {"question": "Who removes the lock?", "decision": "answer", "pages": [PAGE], "reviewer": "ada"}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/reviews", REVIEW),
        ("/judgments", {"question_id": "Q1", "page": PAGE, "grade": 0, "reviewer": "ada"}),
        ("/judgments/adjudicate", {"question_id": "Q1", "page": PAGE, "grade": 0, "adjudicator": "ada"}),
        ("/search", {"question": "group lockbox", "log": True}),
    ],
)
def test_writes_need_a_reviewer(served, path: str, body: dict) -> None:
    c, store, tokens = served
    before = _export(c)
    for headers in ({}, _bearer("sp_not-a-token"), {"Authorization": "Basic YWRhOmFkYQ=="}):
        r = c.post(path, json=body, headers=headers)
        assert r.status_code == 401 and "sourcepage reviewer add" in r.json()["error"]
    assert _export(c) == before and c.get("/reviews").json()["reviews"] == []
    assert not (store / "answers.jsonl").exists()
    if "reviewer" in body or "adjudicator" in body:  # the token of one reviewer writes as no other
        r = c.post(path, json=body, headers=_bearer(tokens["bo"]))
        assert r.status_code == 403 and "signed in as 'bo', not 'ada'" in r.json()["error"]
    assert c.post(path, json=body, headers=_bearer(tokens["ada"])).status_code in (200, 201)


def test_a_replaced_or_removed_token_stops_working(served) -> None:
    c, store, tokens = served
    new = add_reviewer(store, "ada")
    assert c.post("/reviews", json=REVIEW, headers=_bearer(tokens["ada"])).status_code == 401
    assert c.post("/reviews", json=REVIEW, headers=_bearer(new)).status_code == 201
    remove_reviewer(store, "ada")
    assert c.post("/reviews", json=REVIEW, headers=_bearer(new)).status_code == 401


def test_tokens_are_stored_hashed(served) -> None:
    _, store, tokens = served
    raw = (store / "reviewers.sqlite").read_bytes()
    assert all(t.encode() not in raw for t in tokens.values())


# --------------------------------------------------------------------------- Host


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8000", "127.0.0.1.evil.example", "localhost.evil", ""]
)
def test_unknown_host_refused(site, host: str) -> None:
    c = site
    r = c.get("/documents", headers={"host": host})
    assert r.status_code == 400 and "is not served here" in r.json()["error"]


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "[::1]:8000", "LOCALHOST"])
def test_loopback_hosts_served_and_reads_open(site, host: str) -> None:
    c = site
    assert c.get("/documents", headers={"host": host}).status_code == 200


# --------------------------------------------------------------------------- public bind


def test_public_app_needs_accounts_and_a_reviewer_for_everything(plain_store: Path) -> None:
    with pytest.raises(ValueError, match="sourcepage reviewer add"):
        create_app(plain_store, public=True, allowed_hosts=["sp.example"])
    token = add_reviewer(plain_store, "ada")
    app = create_app(plain_store, public=True, allowed_hosts=["sp.example"])
    with TestClient(app, base_url="http://sp.example") as c:
        assert c.get("/documents").status_code == 401
        assert c.get("/health").status_code == 200 and c.get("/login").status_code == 200
        assert c.get("/static/style.css").status_code == 200
        r = c.get("/view/loto_energy_control%23p1", headers={"accept": "text/html"}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/login?next=%2Fview%2F")
        assert c.get("/documents", headers=_bearer(token)).status_code == 200
        assert c.get("/documents", headers={"host": "evil.example", **_bearer(token)}).status_code == 400


def test_serve_binds_loopback_and_public_needs_accounts(plain_store: Path, monkeypatch) -> None:
    import uvicorn

    calls: list[dict] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append(kw))
    run = CliRunner().invoke
    res = run(cli, ["serve", "--store", str(plain_store)])
    assert res.exit_code == 0 and calls[-1]["host"] == "127.0.0.1" and "this machine only" in res.stdout
    for args, words in (
        (["--host", "0.0.0.0"], "add --public"),
        (["--host", "192.168.1.5"], "add --public"),
        (["--public"], "needs --allowed-host"),
        (["--public", "--allowed-host", "sp.example"], "needs reviewer accounts"),
    ):
        res = run(cli, ["serve", "--store", str(plain_store), *args])
        assert res.exit_code == 2 and words in res.stderr, (args, res.stderr)
    add_reviewer(plain_store, "ada")
    res = run(cli, ["serve", "--store", str(plain_store), "--public", "--allowed-host", "sp.example"])
    assert res.exit_code == 0 and calls[-1]["host"] == "0.0.0.0" and "reviewer token" in res.stdout


# --------------------------------------------------------------------------- traversal

TRAVERSAL = [
    "/pages/..%2F..%2Fetc%2Fpasswd",
    "/pages/..%2F..%2Fetc%23p1/image",
    "/pages/%2Fetc%2Fpasswd%23p1/image",
    "/pages/..%5C..%5Cwindows%23p1/image",
    "/pages/%252e%252e%252fetc%23p1/image",
    "/pages/loto_energy_control%23p1%2F..%2F..%2Fpasswd/image",
    "/pages/loto_energy_control%23p1%00.pdf/image",
    "/pages/loto_energy_control%23p1/image?chunk=..%2F..%2Fetc%2Fpasswd",
    "/pages/loto_energy_control%23p1/image?version=..%2F..%2Fetc",
    "/view/..%2F..%2Fetc%23p1",
    "/view/%2e%2e%2f%2e%2e%2fetc%23p1",
    "/static/..%2F..%2F..%2F..%2Fetc%2Fpasswd",
    "/static/%2e%2e/%2e%2e/%2e%2e/store.sqlite",
    "/static-offline-docs/..%2F..%2F..%2Fetc%2Fpasswd",
    "/reviews/export/..%2F..%2Fstore.sqlite",
    "/judgments/export?reviewer=..%2F..%2Fetc%2Fpasswd",
]


@pytest.mark.parametrize("path", TRAVERSAL)
def test_path_traversal_reads_nothing_outside(site, path: str) -> None:
    c = site
    r = c.get(path)
    assert r.status_code in (200, 404, 405, 422), (path, r.status_code)
    assert "root:" not in r.text and "SQLite format" not in r.text
    if r.status_code == 200:  # only an export that ignores the odd reviewer name
        assert path.startswith("/judgments/export")


# --------------------------------------------------------------------------- XSS and links


@pytest.fixture(scope="module")
def hostile_store(safety_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store whose manifest carries script in a title and javascript:/data: source URLs."""
    tmp_path = tmp_path_factory.mktemp("hostile")
    fresh_corpus = Path(shutil.copytree(safety_corpus, tmp_path / "corpus"))
    path = fresh_corpus / "manifest.csv"
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    rows[0]["title"] = '<img src=x onerror="alert(1)"> Lockout'
    rows[0]["source_url"] = "javascript:alert(document.cookie)"
    rows[1]["source_url"] = "data:text/html,<script>alert(1)</script>"
    rows[2]["source_url"] = "JavaScript:alert(2)"
    pf.write_manifest(fresh_corpus, rows)
    store = tmp_path / "hostile"
    ingest(fresh_corpus, store)
    build_indexes(store, "raw", ["bm25"])
    return store


@pytest.mark.parametrize("doc", ["loto_energy_control", "machine_guarding", "confined_space_entry"])
def test_javascript_and_data_urls_are_never_links(hostile_store: Path, doc: str) -> None:
    with TestClient(create_app(hostile_store), base_url=BASE) as c:
        html = c.get(f"/view/{doc}%23p1").text
    assert 'href="javascript:' not in html.lower() and 'href="data:' not in html.lower()
    source = html.split("<dt>Source</dt>", 1)[1].split("</dd>", 1)[0]
    assert "<a " not in source and "alert(" in source  # shown as text, never as a link
    assert "<script>" not in source


def test_script_in_a_title_is_escaped(hostile_store: Path) -> None:
    with TestClient(create_app(hostile_store), base_url=BASE) as c:
        for url in ("/view/loto_energy_control%23p2", "/?q=group+lockbox&method=bm25"):
            html = c.get(url).text
            assert '<img src=x onerror="alert(1)">' not in html
            assert "&lt;img src=x onerror=" in html


@pytest.mark.parametrize(
    "url",
    [
        "/?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "/view/loto_energy_control%23p2?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "/view/%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "/judge?reviewer=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    ],
)
def test_script_in_a_request_is_escaped(site, url: str) -> None:
    c = site
    html = c.get(url, headers={"accept": "text/html"}).text
    assert "<script>alert(1)</script>" not in html


def test_script_in_a_review_note_is_escaped(served) -> None:
    c, _, tokens = served
    body = {**REVIEW, "note": "<script>alert('note')</script>"}
    assert c.post("/reviews", json=body, headers=_bearer(tokens["ada"])).status_code == 201
    html = c.get("/review-log").text
    assert "<script>alert('note')</script>" not in html and "&lt;script&gt;" in html
