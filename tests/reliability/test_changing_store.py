"""A store that stays right while it changes (issue 29): a re-ingest while searches run,
sessions shared by the worker processes of one server, a file replaced during ingest,
two ingests at once, a server killed with its workers, page images apart from search,
and no writes on a GET."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sqlite3
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import reliability_kit as kit
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from sourcepage import api
from sourcepage.cli import app as cli
from sourcepage.corpus.sources import ManifestSource
from sourcepage.ingest import IngestReport, ingest, run
from sourcepage.service.app import create_app
from sourcepage.store.reviewers import add_reviewer
from sourcepage.text.versions import TextSettings

BASE = "http://127.0.0.1:8000"
QUESTION = "How do workers use a group lockbox?"


def _reingest(corpus: Path, store: Path) -> None:
    """Change the store's content (a re-ingest with a changed manifest title)."""
    manifest = corpus / "manifest.csv"
    manifest.write_text(manifest.read_text().replace("Lockout", "Lock-out", 1))
    ingest(corpus, store, workers=1)


# --------------------------------------------------------------------------- 1. the service swap


def test_a_service_in_use_survives_the_swap_after_a_reingest(fresh_corpus: Path, fresh_store: Path) -> None:
    """A search that holds the old service still answers after a re-ingest made
    ``api.service`` build a new one (before: "Cannot operate on a closed database")."""
    from sourcepage.retrieval.index import build_indexes

    build_indexes(fresh_store, "raw", ["bm25"])
    old = api.service(fresh_store, build=False)
    assert old.respond(QUESTION, "bm25", answer=False)["results"]
    _reingest(fresh_corpus, fresh_store)
    build_indexes(fresh_store, "raw", ["bm25"])
    new = api.service(fresh_store, build=False)
    assert new is not old
    # the thread that still holds the old service finishes its search
    assert old.respond(QUESTION, "bm25", answer=False)["results"]
    assert old.searcher.store.conn.execute("SELECT count(*) FROM documents").fetchone()[0] > 0


# --------------------------------------------------------------------------- 2. sessions


def test_a_session_opened_on_one_worker_writes_through_another(indexed_store: Path) -> None:
    """Two apps on one store are two ``serve --workers`` processes: a sign-in on one is
    a sign-in on the other (before: 401 on the worker that did not see the sign-in)."""
    token = add_reviewer(indexed_store, "ada")
    with (
        TestClient(create_app(indexed_store), base_url=BASE) as a,
        TestClient(create_app(indexed_store), base_url=BASE) as b,
    ):
        r = a.post("/login", data={"token": token, "next": "/"}, follow_redirects=False)
        assert r.status_code == 303
        sid = a.cookies.get("sourcepage_session")
        assert sid
        b.cookies.set("sourcepage_session", sid)
        page = b.get("/").text
        assert "ada" in page and 'name="csrf" value="' in page
        csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        body = {
            "question": QUESTION,
            "decision": "answer",
            "pages": ["loto_energy_control#p2"],
            "reviewer": "ada",
        }
        w = b.post("/reviews", json=body, headers={"x-csrf-token": csrf})
        assert w.status_code in (200, 201), w.text
        # signing out on b ends the session on a
        b.post("/logout", data={"csrf": csrf}, follow_redirects=False)
        assert 'name="csrf" value="' not in a.get("/").text


# --------------------------------------------------------------------------- 3. checksum and text


def test_a_file_replaced_before_extraction_is_not_stored_under_the_old_checksum(
    fresh_corpus: Path, tmp_path: Path
) -> None:
    """The manifest was validated against one file, then the file was replaced: the
    stored checksum and the stored text come from the same bytes."""
    source = ManifestSource.read(fresh_corpus, engine="pypdfium2", settings=TextSettings())
    doc = source.manifest.documents[0]
    pdf = source.manifest.pdf_path(doc)
    other = source.manifest.pdf_path(source.manifest.documents[1])
    shutil.copyfile(other, pdf)  # replaced after validation, before extraction
    store = tmp_path / "store"
    run(source, store, IngestReport(store=str(store), engine="pypdfium2"), workers=1)
    con = sqlite3.connect(store / "store.sqlite")
    sha, status = con.execute("SELECT sha256, status FROM documents WHERE doc_id=?", (doc.doc_id,)).fetchone()
    texts = con.execute("SELECT raw FROM pages WHERE doc_id=? ORDER BY page_no", (doc.doc_id,)).fetchall()
    con.close()
    from sourcepage.corpus.manifest import sha256_file

    if status == "ok":  # stored: then under the checksum of the bytes it was read from
        assert sha == sha256_file(pdf)
    else:  # or refused, with a reason naming the change
        assert texts == [] or sha != doc.sha256


# --------------------------------------------------------------------------- 5. the store lock


def test_a_second_ingest_into_a_busy_store_is_refused(fresh_corpus: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    started, release = threading.Event(), threading.Event()

    def slow(done: int, total: int, doc_id: str) -> None:
        started.set()
        release.wait(60)

    first = threading.Thread(
        target=ingest, args=(fresh_corpus, store), kwargs={"workers": 1, "progress": slow}
    )
    first.start()
    try:
        assert started.wait(60)
        res = CliRunner().invoke(cli, ["ingest", "--corpus", str(fresh_corpus), "--store", str(store)])
        assert res.exit_code != 0
        assert "another" in res.output and "ingest" in res.output, res.output
        assert "Traceback" not in res.output
    finally:
        release.set()
        first.join(120)
    assert kit.integrity(store / "store.sqlite") == "ok"


# --------------------------------------------------------------------------- 6. workers die with serve


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_workers_die_with_a_killed_server(indexed_store: Path, tmp_path: Path) -> None:
    port = _free_port()
    proc = kit.cli(
        "serve",
        "--store",
        str(indexed_store),
        "--port",
        str(port),
        "--workers",
        "2",
        log=tmp_path / "serve.log",
    )
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail((tmp_path / "serve.log").read_text())
        children = kit.descendants(proc.pid)
        assert children
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        # a worker still starting (importing, under load) exits when it reaches the app factory
        deadline = time.time() + 120
        alive = children
        while alive and time.time() < deadline:
            time.sleep(0.3)
            alive = [p for p in children if Path(f"/proc/{p}").exists() and _running(p)]
        assert not alive, f"workers {alive} outlived the server"
    finally:
        for p in [proc.pid, *kit.descendants(proc.pid)]:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


# --------------------------------------------------------------------------- 7. page images


def test_page_images_beyond_the_queue_get_503_and_health_answers(
    indexed_store: Path, fresh_corpus: Path
) -> None:
    """Every image slot and queue place taken: the next image request is refused at
    once (503 with Retry-After), while /health and a search still answer."""
    with TestClient(create_app(indexed_store, corpus=fresh_corpus), base_url=BASE) as c:
        gate = c.app.state.images  # type: ignore[attr-defined]
        held = 0
        while gate.try_enter():
            held += 1
        assert held >= 1
        try:
            t0 = time.perf_counter()
            r = c.get("/pages/loto_energy_control%23p2/image", params={"scale": 3})
            assert r.status_code == 503 and "Retry-After" in r.headers
            assert time.perf_counter() - t0 < 2
            assert c.get("/health").status_code == 200
            assert c.post("/search", json={"question": QUESTION, "method": "bm25"}).status_code == 200
        finally:
            for _ in range(held):
                gate.leave()
        assert c.get("/pages/loto_energy_control%23p2/image").status_code == 200


# --------------------------------------------------------------------------- 8. no writes on GET


def _rows(store: Path) -> tuple[int, int]:
    con = sqlite3.connect(store / "store.sqlite")
    try:
        return (
            con.execute("SELECT count(*) FROM embeddings").fetchone()[0],
            con.execute("SELECT count(*) FROM meta").fetchone()[0],
        )
    finally:
        con.close()


def test_a_rerank_search_from_the_service_writes_nothing(indexed_store: Path) -> None:
    before = _rows(indexed_store)
    with TestClient(create_app(indexed_store), base_url=BASE) as c:
        r = c.get("/", params={"q": QUESTION, "method": "rerank:bm25"})
        assert r.status_code == 200, r.text
        r = c.post("/search", json={"question": QUESTION, "method": "rerank:bm25"})
        assert r.status_code == 200, r.text
    assert _rows(indexed_store) == before
