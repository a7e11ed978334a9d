"""How the service is put together: the answer log only on request, the method list
from ``available_methods``, one shared Store per app, searches without a global lock."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_client import LocalClient

from sourcepage.retrieval.methods import available_methods
from sourcepage.service.app import create_app
from sourcepage.store import db as store_db
from sourcepage.support.answer import LOG_NAME

LOCKBOX = "How do workers use a group lockbox at shift change?"


@pytest.fixture
def client(fresh_store: Path) -> TestClient:
    with LocalClient(create_app(fresh_store)) as c:
        yield c


def test_search_logs_the_answer_only_when_asked(client: TestClient, fresh_store: Path) -> None:
    log = fresh_store / LOG_NAME
    assert client.post("/search", json={"question": LOCKBOX}).status_code == 200
    assert client.post("/search", json={"question": LOCKBOX, "log": False}).status_code == 200
    assert client.get("/", params={"q": LOCKBOX}).status_code == 200
    assert not log.exists()
    assert client.post("/search", json={"question": LOCKBOX, "log": True}).status_code == 401  # a write
    assert not log.exists()
    ada = {"Authorization": f"Bearer {client.token('ada')}"}
    body = client.post("/search", json={"question": LOCKBOX, "log": True}, headers=ada).json()
    rows = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 1
    assert rows[0]["question"] == LOCKBOX and rows[0]["decision"] == body["decision"]
    assert rows[0]["text"] == body["answer"]["text"]
    r = client.post("/search", json={"question": LOCKBOX, "log": "sometimes"})
    assert r.status_code == 422 and "log" in r.json()["error"]


def test_web_page_offers_the_available_methods(client: TestClient) -> None:
    html = client.get("/").text
    for m in available_methods():
        assert f'<option value="{m}"' in html
    assert html.count("<option value=") >= len(available_methods())


def test_one_store_per_app(fresh_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = create_app(fresh_store)
    with LocalClient(app) as c:
        c.post("/search", json={"question": LOCKBOX})  # the api's cached Searcher opens its own
        opened: list[Path] = []
        real_init = store_db.Store.__init__

        def counting(self, *a, **k):
            opened.append(Path(a[0] if a else k["path"]))
            real_init(self, *a, **k)

        monkeypatch.setattr(store_db.Store, "__init__", counting)
        page = "loto_energy_control%23p2"
        for path in (
            "/documents",
            "/health",
            f"/pages/{page}",
            f"/pages/{page}/image",
            f"/view/{page}?q=lockbox&chunk=loto_energy_control%23p2%23c1",
            "/?q=lockbox",
            "/reviews/export",
            "/judge/agreement?a=x&b=y",
        ):
            assert c.get(path).status_code == 200, path
        r = c.post(
            "/reviews",
            json={
                "question": "q?",
                "decision": "answer",
                "reviewer": "a",
                "pages": ["loto_energy_control#p2"],
            },
        )
        assert r.status_code == 201
        assert c.post("/search", json={"question": "hearing protection"}).status_code == 200
        assert opened == []
        shared = app.state.db
    assert app.state.db is None  # closed at shutdown
    with pytest.raises(Exception, match="closed"):
        shared.documents()


def test_concurrent_searches_of_several_methods_and_versions(client: TestClient) -> None:
    # first use of each (version, method) builds or loads its index: the Searcher's own
    # lock serialises that; the searches themselves run at the same time
    cases = [
        ("atmospheric testing oxygen", "bm25", "raw"),
        ("hearing protection ear defenders", "lsa", "cleaned"),
        (LOCKBOX, "rrf:bm25+lsa", "enriched"),
        ("point of operation guards", "bm25", "cleaned"),
    ]
    got: list[tuple[int, dict]] = []
    errors: list[BaseException] = []

    def one(i: int) -> None:
        q, m, v = cases[i % len(cases)]
        try:
            r = client.post("/search", json={"question": q, "method": m, "text_version": v, "k": 5})
            assert r.status_code == 200, r.text
            timed = ("query_ms", "timings_ms")
            got.append((i % len(cases), {k: x for k, x in r.json().items() if k not in timed}))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(got) == 16
    for i, (q, m, v) in enumerate(cases):
        again = client.post("/search", json={"question": q, "method": m, "text_version": v, "k": 5}).json()
        again.pop("query_ms")
        again.pop("timings_ms")
        assert all(res == again for j, res in got if j == i)


def test_a_quotes_stating_sentence_is_marked_its_chosen_ones_strong_and_the_rest_escaped() -> None:
    from sourcepage.service.deps import emphasise

    text = "Before <b>. The employer may remove it. After & more. [\u2026] Last one."
    a = text.index("The employer")
    b = a + len("The employer may remove it.")
    c = text.index("After")
    d = c + len("After & more.")
    e = text.index("[\u2026]")
    out = str(emphasise(text, [[a, b], [c, d]], [[a, b]], [[e, e + 3]]))
    assert out.startswith('Before &lt;b&gt;. <mark class="stating">The employer may remove it.</mark> ')
    assert '<strong class="chosen">After &amp; more.</strong> <span class="elided" title="text of' in out
    assert out.endswith(">[\u2026]</span> Last one.")
    plain = "Before &lt;b&gt;. The employer may remove it. After &amp; more. [\u2026] Last one."
    assert str(emphasise(text, [])) == str(emphasise(text, None)) == plain
    # a bare <mark> has no background on these pages: the stating one is given the quote's
    css = (Path(__file__).resolve().parents[2] / "src/sourcepage/service/static/style.css").read_text()
    assert re.search(r"\.quotes blockquote mark\.stating \{ background: var\(--quote\)", css)


def test_search_answers_the_declared_response(client: TestClient) -> None:
    """POST /search answers exactly ``response.SearchResponse`` (its keys, each hit's and
    each quote's, validated by pydantic), and /openapi.json declares that schema."""
    from pydantic import TypeAdapter

    from sourcepage.response import Quote, Result, SearchResponse

    body = client.post("/search", json={"question": LOCKBOX}).json()
    TypeAdapter(SearchResponse).validate_python(body)
    declared = SearchResponse.__required_keys__ | SearchResponse.__optional_keys__
    assert SearchResponse.__required_keys__ <= set(body) <= declared
    assert body["results"] and all(set(r) == set(Result.__annotations__) for r in body["results"])
    assert all(set(q) == set(Quote.__annotations__) for q in body.get("answer", {}).get("quotes", []))
    schema = client.get("/openapi.json").json()
    ok = schema["paths"]["/search"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok["$ref"].endswith("/SearchResponse")
    assert "guessed" in schema["components"]["schemas"]["Result"]["properties"]
