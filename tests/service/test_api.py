"""The JSON API and the web page, through FastAPI's TestClient on a private store."""

from __future__ import annotations

import io
import json
import logging
import sqlite3
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from PIL import Image
from service_client import LocalClient

from sourcepage import api
from sourcepage.evaluation.questions import read_questions
from sourcepage.labels import reviews as review
from sourcepage.pipeline import SearchService
from sourcepage.service import app as service
from sourcepage.service import pages
from sourcepage.service.app import create_app, segments

SPEC_FIELDS = {"question", "method", "text_version", "decision", "reasons", "results"}
SPEC_RESULT_FIELDS = {
    "rank",
    "page",
    "doc_id",
    "page_number",
    "score",
    "chunk_id",
    "passage",
    "title",
    "authority",
    "jurisdiction",
    "year",
    "doc_type",
    "role",
    "source_url",
}
LOCKBOX = "How do workers use a group lockbox at shift change?"


@pytest.fixture
def client(fresh_store: Path) -> TestClient:
    with LocalClient(create_app(fresh_store)) as c:
        yield c


def pid(page: str) -> str:
    return page.replace("#", "%23")


def _strip_timing(res: dict) -> dict:
    return {k: v for k, v in res.items() if k not in ("query_ms", "timings_ms")}


# --------------------------------------------------------------------------- search


def test_search_returns_exactly_api_search(client: TestClient, fresh_store: Path) -> None:
    r = client.post("/search", json={"question": LOCKBOX, "k": 5})
    assert r.status_code == 200
    body = r.json()
    assert SPEC_FIELDS <= body.keys()
    assert body["results"] and all(SPEC_RESULT_FIELDS <= h.keys() for h in body["results"])
    assert body["results"][0]["page"] == "loto_energy_control#p2"
    assert body["decision"] in ("answer", "refuse", "review")
    assert all(isinstance(x, str) and x for x in body["reasons"])
    direct = api.search(LOCKBOX, fresh_store, k=5, version="raw")
    assert _strip_timing(body) == _strip_timing(json.loads(json.dumps(direct)))


def test_the_web_path_is_one_api_search(
    client: TestClient, fresh_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """POST /search and the search page make one ``api.search`` call with the validated
    body's fields (the pipeline, then the desk, composed in one place), then the pipeline's
    entry once: nothing on the web path searches or refers again."""
    calls: list[tuple] = []
    entries: list[str] = []
    facade, entry = api.search, SearchService.respond

    def spy(*a, **k):
        calls.append((a[0], k["method"], k["k"], k["filters"], k["build"]))
        return facade(*a, **k)

    def pipeline(self: SearchService, question: str, *a, **k):
        entries.append(question)
        return entry(self, question, *a, **k)

    monkeypatch.setattr(api, "search", spy)
    monkeypatch.setattr(SearchService, "respond", pipeline)
    body = {"question": LOCKBOX, "method": "bm25", "k": 5, "filters": {"topic": ["loto"]}}
    r = client.post("/search", json=body)
    assert r.status_code == 200 and r.json()["k"] == 5
    assert calls == [(LOCKBOX, "bm25", 5, {"topic": ["loto"]}, False)] and entries == [LOCKBOX]
    assert client.get("/", params={"q": LOCKBOX, "method": "bm25"}).status_code == 200
    assert len(calls) == 2 and entries == [LOCKBOX, LOCKBOX]


def test_search_defaults_and_other_methods(client: TestClient) -> None:
    body = client.post("/search", json={"question": "atmospheric testing oxygen"}).json()
    assert body["method"] == "sect:route:rrf:bm25+dense" and body["k"] == 10 and body["text_version"] == "raw"
    assert body["results"][0]["page"] == "confined_space_entry#p3"
    fused = client.post(
        "/search",
        json={
            "question": "atmospheric testing oxygen",
            "method": "rrf:bm25+lsa",
            "k": 3,
            "text_version": "cleaned",
        },
    ).json()
    assert fused["method"] == "rrf:bm25+lsa" and fused["text_version"] == "cleaned"
    assert len(fused["results"]) == 3


def test_search_filters(client: TestClient) -> None:
    body = client.post("/search", json={"question": "protection", "filters": {"jurisdiction": "UK"}}).json()
    assert body["results"] and {h["jurisdiction"] for h in body["results"]} == {"UK"}
    assert body["filters"] == {"jurisdiction": "UK"}
    body = client.post(
        "/search", json={"question": "lock", "filters": {"topic": ["loto", "ppe"], "year_from": 2023}}
    ).json()
    assert body["results"] and {h["topic"] for h in body["results"]} <= {"loto", "ppe"}
    assert all(int(h["year"]) >= 2023 for h in body["results"])
    # a page filter: these synthetic pages have no headings, so no page is under "Article 10"
    body = client.post("/search", json={"question": "lock", "filters": {"section": "Article 10"}}).json()
    assert body["filters"] == {"section": "Article 10"}
    assert body["results"] == [] and body["decision"] == "refuse"
    html = client.get("/", params={"q": "lock", "section": "Article 10"}).text
    assert 'name="section" value="Article 10"' in html and "Section = Article 10" in html
    # a question citing a provision no heading of these pages is: said, and nothing moves
    body = client.post("/search", json={"question": "What does section 3 say about locks?"}).json()
    assert body["cited"] == [{"citation": "section 3", "pages": []}] and body["results"]
    html = client.get("/", params={"q": "What does section 3 say about locks?"}).text
    assert 'data-cited="section 3"' in html and "no page shown" in html


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ({"question": ""}, "question"),
        ({"question": "   "}, "empty"),
        ({"question": "x" * 501}, "500"),
        ({"question": "lock", "k": 0}, "k"),
        ({"question": "lock", "k": 51}, "k"),
        ({"question": "lock", "method": "magic"}, "unknown method"),
        ({"question": "lock", "method": "rrf:bm25"}, "rrf"),
        ({"question": "lock", "filters": {"colour": "red"}}, "unknown filter 'colour'"),
        ({"question": "lock", "filters": {"year_from": "soon"}}, "year"),
        ({"question": "lock", "text_version": "pretty"}, "text_version"),
        ({"method": "bm25"}, "question"),
    ],
)
def test_search_422_with_readable_message(client: TestClient, payload: dict, words: str) -> None:
    r = client.post("/search", json=payload)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert isinstance(err, str) and words in err
    assert "Traceback" not in r.text


def test_search_malformed_json_is_422(client: TestClient) -> None:
    r = client.post("/search", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and isinstance(r.json()["error"], str)


def test_concurrent_searches_agree(client: TestClient) -> None:
    questions = [LOCKBOX, "hearing protection ear defenders", "point of operation guards"]
    expected = {q: _strip_timing(client.post("/search", json={"question": q}).json()) for q in questions}
    got: list[tuple[str, dict]] = []
    errors: list[BaseException] = []

    def one(i: int) -> None:
        q = questions[i % len(questions)]
        try:
            r = client.post("/search", json={"question": q})
            got.append((q, _strip_timing(r.json())))
        except BaseException as e:  # noqa: BLE001 - collected and reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(got) == 20
    assert all(res == expected[q] for q, res in got)


# --------------------------------------------------------------------------- documents and pages


def test_documents(client: TestClient) -> None:
    docs = client.get("/documents").json()
    assert [d["doc_id"] for d in docs] == sorted(d["doc_id"] for d in docs)
    assert {"loto_energy_control", "hse_ppe_at_work"} <= {d["doc_id"] for d in docs}
    assert all("project_type" in d for d in docs)  # extra manifest columns are kept


def test_page_endpoint(client: TestClient) -> None:
    body = client.get(f"/pages/{pid('loto_energy_control#p2')}").json()
    assert body["page"] == "loto_energy_control#p2" and body["page_number"] == 2
    assert body["pages_in_document"] == 3
    assert "group lockbox" in body["text"]["raw"] and "group lockbox" in body["text"]["cleaned"]
    assert "Safety Guide" in body["text"]["raw"] and "Safety Guide" not in body["text"]["cleaned"]
    assert body["document"]["authority"] == "OSHA" and body["document"]["jurisdiction"] == "US"
    assert set(body["audit"]) == {
        "chars",
        "images",
        "low_text_100",
        "low_text_300",
        "multi_column_risk",
        "spacing_artifact",
        "contents_page",
    }
    assert body["audit"]["contents_page"] is False
    blank = client.get(f"/pages/{pid('confined_space_entry#p2')}").json()
    assert blank["audit"]["low_text_100"] is True and blank["audit"]["chars"] == 0
    guarding = client.get(f"/pages/{pid('machine_guarding#p1')}").json()
    assert guarding["audit"]["multi_column_risk"] is True


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/pages/no_such_doc%23p1", 404),
        ("/pages/loto_energy_control%23p4", 404),
        ("/pages/loto_energy_control%23p0", 422),
        ("/pages/loto_energy_control", 422),
        ("/pages/LOTO%23p1", 422),
    ],
)
def test_page_errors(client: TestClient, path: str, status: int) -> None:
    r = client.get(path)
    assert r.status_code == status
    assert isinstance(r.json()["error"], str)


def test_page_image_is_png_of_page_size(client: TestClient) -> None:
    r = client.get(f"/pages/{pid('loto_energy_control#p2')}/image", params={"scale": 1.0})
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    assert r.content.startswith(b"\x89PNG\r\n\x1a\n")
    assert Image.open(io.BytesIO(r.content)).size == (612, 792)  # US letter at 1 px per point
    r = client.get(f"/pages/{pid('loto_energy_control#p2')}/image", params={"scale": 2})
    assert Image.open(io.BytesIO(r.content)).size == (1224, 1584)


def test_page_image_highlights_passage_and_words(client: TestClient) -> None:
    hit = client.post("/search", json={"question": LOCKBOX, "k": 1}).json()["results"][0]
    url = f"/pages/{pid(hit['page'])}/image"
    plain = client.get(url)
    marked = client.get(url, params={"chunk": hit["chunk_id"], "q": LOCKBOX})
    assert plain.headers["x-highlight-boxes"] == "0,0"
    boxes, words = (int(x) for x in marked.headers["x-highlight-boxes"].split(","))
    assert boxes >= 3 and words >= 4
    assert plain.content != marked.content
    # a cleaned chunk (header removed, hyphenation repaired) is still found on the page
    cleaned = client.post(
        "/search",
        json={"question": "energy isolating device", "k": 1, "text_version": "cleaned", "method": "bm25"},
    ).json()["results"][0]
    r = client.get(
        f"/pages/{pid(cleaned['page'])}/image", params={"chunk": cleaned["chunk_id"], "version": "cleaned"}
    )
    assert int(r.headers["x-highlight-boxes"].split(",")[0]) >= 3
    # free passage text works too
    r = client.get(url, params={"highlight": "Each worker then attaches a personal lock"})
    assert int(r.headers["x-highlight-boxes"].split(",")[0]) >= 1


def test_page_image_errors(client: TestClient) -> None:
    base = f"/pages/{pid('loto_energy_control#p2')}/image"
    assert client.get(base, params={"scale": 10}).status_code == 422
    assert client.get(base, params={"chunk": "machine_guarding#p1#c1"}).status_code == 422
    assert client.get(base, params={"chunk": "loto_energy_control#p2#c99"}).status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        "/pages/..%2F..%2Fetc%23p1",
        "/pages/..%2F..%2Fetc%23p1/image",
        "/pages/..%23p1/image",
        "/pages/%2Fetc%2Fpasswd%23p1/image",
        "/pages/..%5C..%5Cwindows%23p1/image",
        "/pages/etc%23p1/image",
        "/pages/loto_energy_control%23p1%2F..%2F..%2Fpasswd/image",
        "/view/..%2F..%2Fetc%23p1",
    ],
)
def test_path_traversal_reads_no_file(client: TestClient, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    opened: list = []
    monkeypatch.setattr(pages, "render_page", lambda *a, **k: opened.append(a) or (b"", {}))
    r = client.get(path)
    assert r.status_code in (404, 422), (path, r.status_code)
    assert not opened


def test_file_names_come_only_from_the_store(fresh_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    con = sqlite3.connect(fresh_store / "store.sqlite")
    meta = json.loads(
        con.execute("SELECT metadata FROM documents WHERE doc_id='loto_energy_control'").fetchone()[0]
    )
    meta["file"] = "../../../../etc/passwd"
    with con:
        con.execute("UPDATE documents SET metadata=? WHERE doc_id='loto_energy_control'", (json.dumps(meta),))
    con.close()
    opened: list = []
    monkeypatch.setattr(pages, "render_page", lambda *a, **k: opened.append(a) or (b"", {}))
    with LocalClient(create_app(fresh_store)) as c:
        r = c.get(f"/pages/{pid('loto_energy_control#p1')}/image")
    assert r.status_code == 404 and "file name" in r.json()["error"]
    assert not opened


def test_changed_pdf_is_refused_and_missing_corpus_explained(
    fresh_store: Path, fresh_corpus: Path, tmp_path: Path
) -> None:
    pdf = fresh_corpus / "pdf" / "hse_ppe_at_work.pdf"
    pdf.write_bytes(pdf.read_bytes() + b"\n% changed\n")
    with LocalClient(create_app(fresh_store)) as c:
        assert c.get(f"/pages/{pid('hse_ppe_at_work#p1')}/image").status_code == 409
        assert c.get(f"/pages/{pid('loto_energy_control#p1')}/image").status_code == 200
    with LocalClient(create_app(fresh_store, corpus=tmp_path / "elsewhere")) as c:
        r = c.get(f"/pages/{pid('loto_energy_control#p1')}/image")
        assert r.status_code == 404 and "not in" in r.json()["error"]


def test_corpus_defaults_to_last_ingest(fresh_store: Path, fresh_corpus: Path) -> None:
    assert create_app(fresh_store).state.corpus == fresh_corpus.resolve()
    assert service.corpus_from_store(fresh_store) == fresh_corpus.resolve()


# --------------------------------------------------------------------------- reviews


def _known_pages(client: TestClient) -> set[str]:
    pages = set()
    for d in client.get("/documents").json():
        n = 1
        while client.get(f"/pages/{pid(d['doc_id'])}%23p{n}").status_code == 200:
            pages.add(f"{d['doc_id']}#p{n}")
            n += 1
    return pages


def test_reviews_round_trip_and_export(client: TestClient, tmp_path: Path) -> None:
    assert client.get("/reviews").json() == {"reviews": []}
    a = client.post(
        "/reviews",
        json={
            "question": LOCKBOX,
            "method": "bm25",
            "system_decision": "review",
            "decision": "answer",
            "pages": ["loto_energy_control#p2"],
            "reviewer": "ada",
            "note": "p2 covers it",
        },
    )
    assert a.status_code == 201, a.text
    assert a.json()["id"] == 1 and a.json()["pages"] == ["loto_energy_control#p2"]
    b = client.post(
        "/reviews",
        json={
            "question": "What is the fine for a missing guard in Ohio?",
            "decision": "refuse",
            "reviewer": "bo",
            "system_decision": "review",
        },
    )
    assert b.status_code == 201
    # a later decision on the same question supersedes the earlier one in the export
    c = client.post(
        "/reviews",
        json={
            "question": LOCKBOX.upper(),
            "decision": "answer",
            "reviewer": "cy",
            "pages": ["loto_energy_control#p2", "loto_energy_control#p3"],
        },
    )
    assert c.status_code == 201
    log = client.get("/reviews").json()["reviews"]
    assert [r["reviewer"] for r in log] == ["ada", "bo", "cy"]
    assert [r["id"] for r in client.get("/reviews", params={"question": LOCKBOX}).json()["reviews"]] == [1, 3]

    r = client.get("/reviews/export")
    assert r.status_code == 200
    path = tmp_path / "reviewed.jsonl"
    path.write_text(r.text, encoding="utf-8")
    qs = read_questions(path, known_pages=_known_pages(client))
    assert [q.answerability for q in qs] == ["answerable", "unsupported"]
    assert qs[0].evidence == {"loto_energy_control#p2": 1, "loto_energy_control#p3": 1}
    assert qs[0].topic == "loto" and qs[1].topic == "unlabelled"
    assert qs[0].extra["review"]["reviewer"] == "cy"


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ({"decision": "answer", "pages": [], "reviewer": "a"}, "at least one evidence page"),
        ({"decision": "refuse", "pages": ["loto_energy_control#p1"], "reviewer": "a"}, "refusal"),
        ({"decision": "answer", "pages": ["../etc#p1"], "reviewer": "a"}, "not a page id"),
        ({"decision": "answer", "pages": ["nodoc#p1"], "reviewer": "a"}, "no document"),
        ({"decision": "answer", "pages": ["loto_energy_control#p9"], "reviewer": "a"}, "not in this store"),
        ({"decision": "review", "pages": [], "reviewer": "a"}, "decision"),
        ({"decision": "refuse", "reviewer": ""}, "reviewer"),
    ],
)
def test_review_validation(client: TestClient, payload: dict, words: str) -> None:
    r = client.post("/reviews", json={"question": "Who removes the lock?", **payload})
    assert r.status_code == 422 and words in r.json()["error"]
    assert client.get("/reviews").json()["reviews"] == []


def test_review_log_is_append_only(fresh_store: Path) -> None:
    review.record(fresh_store, "q?", "bm25", "raw", "review", "refuse", [], "ada")
    con = sqlite3.connect(fresh_store / "labels.sqlite")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        with con:
            con.execute("UPDATE labels SET body=json_set(body, '$.decision', 'answer')")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        with con:
            con.execute("DELETE FROM labels")
    con.close()
    assert [r.decision for r in review.list_reviews(fresh_store)] == ["refuse"]


# --------------------------------------------------------------------------- errors and docs


def test_internal_errors_hide_details(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(*a, **k):
        raise KeyError("secret-detail-from-inside")

    monkeypatch.setattr(SearchService, "respond", boom)
    with caplog.at_level(logging.ERROR, logger="sourcepage.service"):
        r = client.post("/search", json={"question": "lock"})
    assert r.status_code == 500
    assert r.json() == {"error": "internal error"}
    assert "secret" not in r.text and "Traceback" not in r.text
    assert any("secret-detail-from-inside" in (rec.exc_text or "") for rec in caplog.records)
    r = client.get("/", params={"q": "lock"})
    assert r.status_code == 500 and "secret" not in r.text


def test_docs_are_served_offline(client: TestClient) -> None:
    html = client.get("/docs").text
    assert "/static-offline-docs/swagger-ui-bundle.js" in html
    assert "cdn" not in html.lower()
    assert 'src="http' not in html and 'href="http' not in html
    assert client.get("/static-offline-docs/swagger-ui-bundle.js").status_code == 200
    assert client.get("/static-offline-docs/swagger-ui.css").status_code == 200
    assert "redoc.standalone.js" in client.get("/redoc").text
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/search", "/documents", "/pages/{page_id}", "/pages/{page_id}/image", "/reviews"} <= set(paths)


def test_health(client: TestClient) -> None:
    """The served store is indexed: start-up loaded a default search's models (``ready``)."""
    h = client.get("/health").json()
    assert h == {"status": "ok", "ready": True, "documents": 4, "page_images": True}


# --------------------------------------------------------------------------- web page


def test_home_page_renders_results(client: TestClient) -> None:
    empty = client.get("/")
    assert empty.status_code == 200 and "Find the exact page" in empty.text
    html = client.get("/", params={"q": "hearing protection and who may remove a lock"}).text
    assert 'class="banner banner-review"' in html
    assert "Cross-jurisdiction" in html  # UK and US pages in the top five
    assert '<mark class="hit">hearing</mark>' in html.lower() or '<mark class="hit">Hearing</mark>' in html
    assert "/view/hse_ppe_at_work%23p2?" in html
    for option in ("OSHA", "HSE", "NIOSH", "fact_sheet", "confined_spaces"):
        assert f'<option value="{option}"' in html
    bad = client.get("/", params={"q": "lock", "method": "magic"})
    assert bad.status_code == 422 and "unknown method" in bad.text


def test_view_page_and_form_review(client: TestClient) -> None:
    q = {"q": LOCKBOX, "method": "bm25", "version": "raw", "chunk": "loto_energy_control#p2#c1"}
    r = client.get(f"/view/{pid('loto_energy_control#p2')}", params=q)
    assert r.status_code == 200
    assert "/pages/loto_energy_control%23p2/image?" in r.text
    assert '<mark class="ev hit">' in r.text  # the passage region carries the query words
    assert "Reviewer decision" in r.text
    # the other evidence pages' titles are cut at a word, with an ellipsis, not mid-word
    assert "Controlling Hazardous Energy: Lockout/Tagout…" in r.text and "Lockout/Ta<" not in r.text
    form = {
        "question": LOCKBOX,
        "method": "bm25",
        "text_version": "raw",
        "system_decision": "review",
        "decision": "answer",
        "pages": ["loto_energy_control#p2"],
        "reviewer": "ada",
        "note": "ok",
    }
    r = client.post(
        f"/view/{pid('loto_energy_control#p2')}/review", params=q, data=form, follow_redirects=False
    )
    assert r.status_code == 303 and "recorded=1" in r.headers["location"]
    assert "Recorded as review #1" in client.get(r.headers["location"]).text
    log = client.get("/reviews").json()["reviews"]
    assert log[0]["decision"] == "answer" and log[0]["pages"] == ["loto_energy_control#p2"]
    ada = {"Authorization": f"Bearer {client.token('ada')}"}  # signed in; the form names no one
    bad = client.post(
        f"/view/{pid('loto_energy_control#p2')}/review", params=q, data={**form, "reviewer": ""}, headers=ada
    )
    assert bad.status_code == 422 and "reviewer" in bad.text
    assert "Review log" in client.get("/review-log").text and "ada" in client.get("/review-log").text
    assert client.get("/view/nothing%23p1", headers={"accept": "text/html"}).status_code == 404


def test_segments() -> None:
    segs = segments("abc def", [(0, 3)], (2, 7))
    assert [(s["text"], s["hit"], s["ev"]) for s in segs] == [
        ("ab", True, False),
        ("c", True, True),
        (" def", False, True),
    ]


def test_serve_command_binds_localhost(monkeypatch: pytest.MonkeyPatch, fresh_store: Path) -> None:
    import uvicorn
    from typer.testing import CliRunner

    from sourcepage.cli import app as cli

    calls: list = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append(kw))
    res = CliRunner().invoke(cli, ["serve", "--store", str(fresh_store), "--port", "8123"])
    assert res.exit_code == 0, res.output
    assert calls == [{"host": "127.0.0.1", "port": 8123, "log_level": "info"}]
    res = CliRunner().invoke(cli, ["serve", "--store", str(fresh_store / "nope")])
    assert res.exit_code == 2
