"""The editor: a reviewer with the ``editor`` role adds, replaces, withdraws and restores
documents from the web page (issue 50, item 2). Roles first (``store.reviewers``), then
the routes by real requests on a copied store."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from sourcepage.cli import app as cli
from sourcepage.ingest import ingest
from sourcepage.service.app import create_app
from sourcepage.store.db import Store
from sourcepage.store.lock import edit_lock
from sourcepage.store.reviewers import EDITOR, add_reviewer, list_reviewers, reviewer_roles


def test_an_editor_role_is_given_kept_and_taken_away(tmp_path: Path) -> None:
    """``add_reviewer(roles=...)`` gives roles, ``None`` keeps them on a new token, ``()``
    takes them; an unknown role is refused; the CLI says and lists them."""
    store = tmp_path / "store"
    Store(store, create=True).close()
    add_reviewer(store, "ada", [EDITOR])
    add_reviewer(store, "bo")
    assert reviewer_roles(store, "ada") == (EDITOR,) and reviewer_roles(store, "bo") == ()
    add_reviewer(store, "ada")  # a new token keeps the roles
    assert reviewer_roles(store, "ada") == (EDITOR,)
    add_reviewer(store, "ada", ())
    assert reviewer_roles(store, "ada") == () and reviewer_roles(store, "nobody") == ()
    try:
        add_reviewer(store, "cy", ["admin"])
        raise AssertionError("an unknown role was accepted")
    except ValueError as e:
        assert "admin" in str(e) and "editor" in str(e)
    assert [r.name for r in list_reviewers(store)] == ["ada", "bo"]  # nothing written for cy

    run = CliRunner().invoke(cli, ["reviewer", "add", "cy", "--role", "editor", "--store", str(store)])
    assert run.exit_code == 0 and "reviewer cy (editor): token sp_" in run.output, run.output
    listed = CliRunner().invoke(cli, ["reviewer", "list", "--store", str(store)])
    assert "editor" in listed.output and listed.output.count("reviewer") >= 2, listed.output
    bad = CliRunner().invoke(cli, ["reviewer", "add", "dee", "--role", "admin", "--store", str(store)])
    assert bad.exit_code != 0 and "unknown role" in bad.output


def test_a_store_made_before_roles_gets_the_column(tmp_path: Path) -> None:
    """An accounts file without ``roles``: read as no roles, and given the column on the
    next account added."""
    import sqlite3

    store = tmp_path / "store"
    store.mkdir()
    conn = sqlite3.connect(store / "reviewers.sqlite")
    conn.execute("CREATE TABLE reviewers (name TEXT PRIMARY KEY, token_sha256 TEXT NOT NULL UNIQUE,"
                 " created_at TEXT NOT NULL)")  # fmt: skip
    conn.execute("INSERT INTO reviewers VALUES ('old', 'x', '2026-01-01')")
    conn.commit()
    conn.close()
    assert reviewer_roles(store, "old") == () and list_reviewers(store)[0].roles == ()
    add_reviewer(store, "ada", [EDITOR])
    assert reviewer_roles(store, "ada") == (EDITOR,) and reviewer_roles(store, "old") == ()


# --------------------------------------------------------------------------- the routes

#: one small real PDF (2 pages, Spanish: its words are in no other document of the store)
OSHA_PDF = Path("/work/shared/corpus/pdf/osha-factsheet-lockout-tagout-es.pdf")
QUESTION = "¿Qué es la norma sobre el control de fuentes de energía peligrosas? candado etiqueta"
needs_pdf = pytest.mark.skipif(not OSHA_PDF.is_file(), reason=f"{OSHA_PDF} is absent")


@pytest.fixture
def pdf(tmp_path: Path) -> Path:
    """The one PDF, copied into a corpus folder of the test's own."""
    folder = tmp_path / "upload"
    folder.mkdir()
    return Path(shutil.copyfile(OSHA_PDF, folder / OSHA_PDF.name))


@pytest.fixture
def site(fresh_store: Path) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """A client of a copied indexed store, with an editor (``ed``) and a reviewer (``rev``)."""
    tokens = {"ed": add_reviewer(fresh_store, "ed", [EDITOR]), "rev": add_reviewer(fresh_store, "rev")}
    with TestClient(create_app(fresh_store), base_url="http://127.0.0.1") as c:
        yield c, {n: f"Bearer {t}" for n, t in tokens.items()}


def _wait(c: TestClient, job: dict[str, Any], seconds: float = 240) -> dict[str, Any]:
    deadline = time.time() + seconds
    while time.time() < deadline:
        state = c.get(job["url"]).json()
        assert "finished" in state, state
        if state["finished"]:
            return state
        time.sleep(0.2)
    raise AssertionError(f"job {job['id']} did not finish: {state}")


def _files(store: Path) -> list[str]:
    """The store's files but its library folder (staged uploads, job states)."""
    kept = (p for p in store.rglob("*") if p.is_file() and "library" not in p.parts)
    return sorted(str(p.relative_to(store)) for p in kept if not p.name.endswith((".lock", "-wal", "-shm")))


def _top_docs(c: TestClient, question: str = QUESTION) -> list[str]:
    r = c.post("/search", json={"question": question, "method": "bm25", "k": 3})
    assert r.status_code == 200, r.text
    return [h["doc_id"] for h in r.json()["results"]]


@needs_pdf
def test_an_editor_adds_a_pdf_it_is_searched_then_withdrawn_it_is_not(
    site: tuple[TestClient, dict[str, str]], pdf: Path, fresh_store: Path
) -> None:
    """Upload → a job (phase, percent) → done → the document is searched, listed with its
    guessed fields marked, kept under the store's own folder; withdraw → no longer
    searched, listed as withdrawn; restore → searched again."""
    c, auth = site
    drafted = c.post("/documents/draft", files={"file": (pdf.name, pdf.read_bytes(), "application/pdf")},
                     headers={"Authorization": auth["ed"]}).json()  # fmt: skip
    assert drafted["fields"]["doc_id"] == "osha-factsheet-lockout-tagout-es"
    assert drafted["computed"]["pages"] == "2" and "authority" in drafted["guessed"]
    body = {"staged": drafted["staged"], "title": "Control de energía peligrosa (hoja informativa)"}
    r = c.post("/documents", data=body, headers={"Authorization": auth["ed"]})
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["kind"] == "add" and job["file"] == pdf.name
    seen = [job["phase"]]
    while not (state := c.get(job["url"]).json())["finished"]:
        seen.append(state["phase"])
        assert _top_docs(c, "lockout group lockbox")  # searches are answered during the add
        time.sleep(0.2)
    assert state["phase"] == "done" and state["percent"] == 100, state
    doc_id = "osha-factsheet-lockout-tagout-es"
    assert _top_docs(c)[0] == doc_id
    listed = {d["doc_id"]: d for d in c.get("/documents").json()}[doc_id]
    assert listed["title"] == "Control de energía peligrosa (hoja informativa)"
    assert "title" not in listed["guessed"] and "authority" in listed["guessed"]  # given ≠ guessed
    assert listed["found_in"].startswith("uploaded by ed ")
    assert (fresh_store / "library" / "pdf" / pdf.name).is_file()
    image = c.get(f"/pages/{doc_id}%23p1/image")  # rendered from the store's own folder
    assert image.status_code == 200 and image.headers["content-type"] == "image/png", image.text
    assert not list((fresh_store / "library" / "incoming").glob("*.pdf"))  # the staged copy moved
    page = c.get("/library", headers={"Authorization": auth["ed"]}).text
    assert f'data-doc="{doc_id}"' in page and "(guessed)" in page and 'action="/library/draft"' in page

    r = c.post(
        f"/documents/{doc_id}/withdraw", data={"reason": "test"}, headers={"Authorization": auth["ed"]}
    )
    assert r.status_code == 202, r.text
    assert _wait(c, r.json())["phase"] == "done"
    assert doc_id not in _top_docs(c)
    assert f'data-withdrawn="{doc_id}"' in c.get("/library").text
    r = c.post(f"/documents/{doc_id}/restore", headers={"Authorization": auth["ed"]})
    assert _wait(c, r.json())["phase"] == "done"
    assert _top_docs(c)[0] == doc_id


@needs_pdf
def test_who_may_change_the_library_and_what_is_refused(
    site: tuple[TestClient, dict[str, str]], pdf: Path, fresh_store: Path
) -> None:
    """Anonymous 401, a reviewer who is not an editor 403, a file that is not a PDF 422
    naming it, a second change while one runs 409; nothing is written for any of them."""
    c, auth = site
    assert _top_docs(c, "lockout group lockbox")  # the indexes loaded
    before = _files(fresh_store)
    files = {"file": (pdf.name, pdf.read_bytes(), "application/pdf")}
    assert c.post("/documents", files=files).status_code == 401
    r = c.post("/documents", files=files, headers={"Authorization": auth["rev"]})
    assert r.status_code == 403 and "--role editor" in r.json()["error"]
    r = c.post("/documents/loto_energy_control/withdraw", headers={"Authorization": auth["rev"]})
    assert r.status_code == 403
    for who in ({}, {"Authorization": auth["rev"]}):  # the editor's forms are an editor's only
        page = c.get("/library", headers=who).text
        assert "data-doc=" in page and "/library/draft" not in page and "/withdraw" not in page
    big = {"file": ("big.pdf", b"%PDF-1.7\n" + b"0" * (2 << 20), "application/pdf")}
    assert c.post("/documents", files=big).status_code == 413  # anonymous: the 1 MB limit
    r = c.post("/documents", files=big, headers={"Authorization": auth["ed"]})  # an editor's: 64 MB
    assert r.status_code == 422 and "big.pdf" in r.json()["error"], r.text
    bad = {"file": ("notes.txt", b"lockout notes, not a PDF", "text/plain")}
    r = c.post("/documents", files=bad, headers={"Authorization": auth["ed"]})
    assert r.status_code == 422 and "notes.txt" in r.json()["error"] and "not a PDF" in r.json()["error"]
    broken = {"file": ("../../broken.pdf", b"%PDF-1.7\n garbage", "application/pdf")}
    r = c.post("/documents", files=broken, headers={"Authorization": auth["ed"]})
    assert r.status_code == 422 and "broken.pdf" in r.json()["error"], r.text
    assert not (fresh_store.parent / "broken.pdf").exists()
    with edit_lock(fresh_store, "another change"):
        r = c.post("/documents", files=files, headers={"Authorization": auth["ed"]})
        assert r.status_code == 409 and "another change" in r.json()["error"]
        assert not list((fresh_store / "library" / "incoming").glob("*.pdf"))  # refused before it was kept
    r = c.post("/documents/no_such_doc/withdraw", headers={"Authorization": auth["ed"]})
    assert r.status_code == 404
    # a signed-in editor's browser: the form needs its CSRF token, and the same origin
    signed = c.post(
        "/login", data={"token": auth["ed"].split()[1], "next": "/library"}, follow_redirects=False
    )
    assert signed.status_code == 303
    r = c.post("/documents/loto_energy_control/withdraw", data={"reason": "x"})
    assert r.status_code == 403 and "CSRF" in r.json()["error"]
    r = c.post("/documents", files=files, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and "cross-origin" in r.json()["error"]
    c.cookies.clear()
    assert _files(fresh_store) == before
    assert _top_docs(c, "lockout group lockbox")


@needs_pdf
def test_a_failed_add_leaves_the_store_as_it_was_and_the_job_names_the_file(
    site: tuple[TestClient, dict[str, str]], pdf: Path, fresh_store: Path
) -> None:
    """A doc_id the store holds already: the job fails naming the file; no manifest, no
    copied PDF, no document row, the same documents searched."""
    c, auth = site
    docs = c.get("/documents").json()
    body = {"doc_id": "loto_energy_control"}
    r = c.post("/documents", data=body, files={"file": (pdf.name, pdf.read_bytes(), "application/pdf")},
               headers={"Authorization": auth["ed"]})  # fmt: skip
    state = _wait(c, r.json())
    assert state["phase"] == "failed" and pdf.name in state["error"] and "already holds" in state["error"]
    assert c.get("/documents").json() == docs
    assert not (fresh_store / "library" / "manifest.csv").exists()
    assert not list((fresh_store / "library" / "pdf").glob("*.pdf"))
    assert "failed" in c.get(f"/library?job={state['id']}").text


@needs_pdf
def test_the_cli_adds_a_pdf_then_a_new_edition_and_an_ingest_keeps_them(
    fresh_store: Path, fresh_corpus: Path, pdf: Path, tmp_path: Path
) -> None:
    """``document add FILE`` then ``--replaces``: edition 2, the first one in the store's
    history, both PDFs kept, the sentence vectors built again (not left stale); a later
    ``ingest`` of the corpus keeps the added document."""
    from sourcepage.retrieval import sentvec

    with closing(Store(fresh_store)) as st:
        sentvec.build(st, "raw", 1)
    run = CliRunner().invoke(
        cli,
        [
            "document",
            "add",
            str(pdf),
            "--store",
            str(fresh_store),
            "--field",
            "title=Hoja LOTO",
            "--by",
            "ed",
        ],
    )
    assert run.exit_code == 0, run.output
    doc_id = "osha-factsheet-lockout-tagout-es"
    assert f"{doc_id} added: Hoja LOTO" in run.output and "guessed, check them" in run.output
    edition = tmp_path / "edition2.pdf"
    edition.write_bytes(pdf.read_bytes() + b"\n% edition 2\n")  # same text, another file
    run = CliRunner().invoke(
        cli, ["document", "add", str(edition), "--store", str(fresh_store), "--replaces", doc_id]
    )
    assert run.exit_code == 0, run.output
    with closing(Store(fresh_store)) as st:
        assert st.document_rows()[doc_id]["version"] == 2
        assert [h["version"] for h in st.history(doc_id)] == [1]
        assert st.document(doc_id).title == "Hoja LOTO"  # type: ignore[union-attr]
        assert sentvec.load(st, "raw") is not None  # matches the chunks with the new edition
    assert sorted(p.name for p in (fresh_store / "library" / "pdf").iterdir()) == sorted(
        [pdf.name, "edition2.pdf"]
    )
    again = ["document", "add", str(edition), "--store", str(fresh_store), "--field", f"doc_id={doc_id}"]
    bad = CliRunner().invoke(cli, again)
    assert bad.exit_code != 0 and "already holds" in bad.output
    report = ingest(fresh_corpus, fresh_store, workers=1)
    assert doc_id not in report.removed and doc_id in report.unchanged


def test_searches_keep_their_indexes_while_the_library_changes(fresh_store: Path) -> None:
    """Between a change's ingest and its new indexes, the service's searches are answered
    from the indexes loaded before (the edit lock is held); after it, a stale index is
    refused as before (the change builds the new ones before it lets go)."""
    from sourcepage import api
    from sourcepage.corpus.library import set_withdrawn
    from sourcepage.retrieval.index import IndexMissing

    before = api.service(fresh_store, build=False)
    assert before.respond("lockout group lockbox", "bm25", answer=False)["results"]
    with edit_lock(fresh_store, "a test change"):
        set_withdrawn(fresh_store, "machine_guarding", True, "ed")  # the content changes, no index yet
        during = api.service(fresh_store, build=False)
        assert during is before and during.respond("lockout group lockbox", "bm25", answer=False)["results"]
    with pytest.raises(IndexMissing):
        api.service(fresh_store, build=False).respond("lockout group lockbox", "bm25", answer=False)


def test_a_job_whose_process_died_reads_as_interrupted(tmp_path: Path) -> None:
    """A job left unfinished by a process that ended (kill -9, a crash) is not shown as
    running for ever: it reads as failed, interrupted, naming its file."""
    import json
    import subprocess

    from sourcepage import jobs

    gone = subprocess.Popen(["true"])
    gone.wait()
    folder = tmp_path / "store" / "library" / "jobs"
    folder.mkdir(parents=True)
    job = jobs.Job("0123456789abcdef", "add", "x", "x.pdf", phase="indexing", percent=60, pid=gone.pid)
    (folder / f"{job.id}.json").write_text(json.dumps(job.as_dict()))
    got = jobs.read_job(tmp_path / "store", job.id)
    assert got is not None and got.phase == "failed" and "x.pdf: interrupted" in got.error
    assert jobs.read_job(tmp_path / "store", "../../etc/passwd") is None


def test_uploads_drafted_but_never_added_are_forgotten_after_a_day(tmp_path: Path) -> None:
    import os

    from sourcepage import editions

    store = tmp_path / "store"
    old = editions.stage_upload(store, "old.pdf", b"%PDF-1.7 old")
    os.utime(old, (time.time() - 2 * 24 * 3600,) * 2)
    new = editions.stage_upload(store, "../x/new one.pdf", b"%PDF-1.7 new")
    assert not old.exists() and new.parent == old.parent and new.name.endswith("-new-one.pdf")
    assert editions.staged_path(store, new.name) == new
    with pytest.raises(editions.EditError):
        editions.staged_path(store, "../../reviewers.sqlite")


@needs_pdf
def test_a_new_edition_of_a_corpus_document_outlasts_the_next_ingest(
    site: tuple[TestClient, dict[str, str]], pdf: Path, fresh_store: Path, fresh_corpus: Path
) -> None:
    """A document of the corpus folder replaced from the web page: edition 2 (the first in
    the history), its fields given by a person kept, its page image from the store's own
    folder; the next ``ingest`` of the corpus keeps the new edition."""
    c, auth = site
    doc_id = "loto_energy_control"
    before = {d["doc_id"]: d for d in c.get("/documents").json()}[doc_id]
    files = {"file": ("loto-2026.pdf", pdf.read_bytes(), "application/pdf")}
    r = c.post("/documents", data={"replaces": doc_id}, files=files, headers={"Authorization": auth["ed"]})
    assert r.status_code == 202 and r.json()["kind"] == "replace", r.text
    assert _wait(c, r.json())["phase"] == "done"
    after = {d["doc_id"]: d for d in c.get("/documents").json()}[doc_id]
    assert after["version"] == 2 and after["file"] == "loto-2026.pdf" and after["sha256"] != before["sha256"]
    assert after["title"] == before["title"] and after["license"] == before["license"]  # a person's fields
    assert after["fields"] == before["fields"] and after["project_type"] == "industrial_maintenance"
    assert c.get(f"/pages/{doc_id}%23p1/image").status_code == 200
    editions = c.get(f"/documents/{doc_id}/editions").json()
    assert editions["version"] == 2 and [e["sha256"] for e in editions["earlier"]] == [before["sha256"]]
    assert f'href="/documents/{doc_id}/editions"' in c.get("/library").text
    report = ingest(fresh_corpus, fresh_store, workers=1)
    assert doc_id in report.unchanged and not report.removed and not report.failed
    with closing(Store(fresh_store)) as st:
        assert st.document_rows()[doc_id]["sha256"] == after["sha256"]
        assert [h["sha256"] for h in st.history(doc_id)] == [before["sha256"]]


#: a change run in a process of its own that stops (sleeps) when it reaches ``phase``
CHILD = """
import pathlib, sys, time
from sourcepage import editions
store, pdf, stop = sys.argv[1:4]
def progress(phase, percent, message):
    if phase == stop:
        print("at", phase, flush=True)
        time.sleep(600)
staged = editions.stage_upload(store, "loto-es.pdf", pathlib.Path(pdf).read_bytes())
editions.add_document(store, staged, {}, "ed", progress=progress)
"""


@needs_pdf
@pytest.mark.parametrize("killed_at, kept", [("ingesting", False), ("indexing", True)])
def test_an_add_killed_midway_leaves_the_store_as_before_or_as_after(
    fresh_store: Path, pdf: Path, killed_at: str, kept: bool
) -> None:
    """kill -9 before the ingest commits: recovered as before (no document, no manifest, no
    PDF); after it, before the indexes: recovered as after (indexes built, searchable)."""
    import signal
    import subprocess
    import sys

    from sourcepage import api, editions

    doc_id = "loto-es"
    with closing(Store(fresh_store)) as st:
        before = {k: r["sha256"] for k, r in st.document_rows().items()}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(fresh_store), str(pdf), killed_at],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == f"at {killed_at}"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert (fresh_store / "library" / editions.JOURNAL).is_file()
    run = CliRunner().invoke(cli, ["document", "recover", "--store", str(fresh_store)])
    assert run.exit_code == 0 and ("finished" if kept else "undone") in run.output, run.output
    with closing(Store(fresh_store)) as st:
        after = {k: r["sha256"] for k, r in st.document_rows().items()}
    assert not (fresh_store / "library" / editions.JOURNAL).exists()
    if kept:
        assert set(after) == set(before) | {doc_id}
        hits = api.search(QUESTION, fresh_store, "bm25", build=False, answer=False, refer=False)["results"]
        assert hits[0]["doc_id"] == doc_id
    else:
        assert after == before
        assert not (fresh_store / "library" / "manifest.csv").exists()
        assert not list((fresh_store / "library" / "pdf").glob("*.pdf"))
    assert (
        "nothing to recover"
        in CliRunner().invoke(cli, ["document", "recover", "--store", str(fresh_store)]).output
    )


@needs_pdf
def test_no_search_fails_while_a_document_is_added(fresh_store: Path, pdf: Path) -> None:
    """Eight clients (issue 50's figure) search (the default method and BM25) against a
    running server for the whole of an add, from the upload to the job's end: every search
    answers 200."""
    import threading

    import httpx
    import uvicorn

    from tests.service.test_browser import _free_port

    token = add_reviewer(fresh_store, "ed", [EDITOR])
    port = _free_port()
    srv = uvicorn.Server(
        uvicorn.Config(create_app(fresh_store), host="127.0.0.1", port=port, log_level="warning")
    )
    server = threading.Thread(target=srv.run, daemon=True)
    server.start()
    while not srv.started:
        time.sleep(0.05)
    base, done, answers = f"http://127.0.0.1:{port}", threading.Event(), []

    def client(method: str | None) -> None:
        body = {"question": "Who may remove a lock?", "k": 5} | ({"method": method} if method else {})
        with httpx.Client(base_url=base, timeout=60) as h:
            while not done.is_set():
                answers.append(h.post("/search", json=body).status_code)

    clients = [threading.Thread(target=client, args=(m,)) for m in (None, "bm25") * 4]
    try:
        for t in clients:
            t.start()
        with httpx.Client(base_url=base, timeout=120) as h:
            files = {"file": (pdf.name, pdf.read_bytes(), "application/pdf")}
            r = h.post("/documents", files=files, headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 202, r.text
            while not (state := h.get(r.json()["url"]).json())["finished"]:
                time.sleep(0.2)
        assert state["phase"] == "done", state
    finally:
        done.set()
        for t in clients:
            t.join(timeout=60)
        srv.should_exit = True
        server.join(timeout=10)
    assert len(answers) > 8 and set(answers) == {200}, sorted(set(answers))
