"""The three crash points: ``kill -9`` during ingest (serial and with workers), during an
index build and during label writes. After each: the SQLite files pass an integrity
check, nothing half-written is visible, a re-run finishes the work, and the result is
byte-identical to a run that was never interrupted. A killed ``ingest --workers 2``
leaves no worker process behind.

Each test starts the real command in a child process and kills it at a point it
observes (documents written, a build folder created, judgments acknowledged), so the
kill lands in the middle of the work on any machine. Marked ``slow`` (about a minute).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import threading
import time
import urllib.request
from pathlib import Path

import pdf_factory as pf
import pytest
import reliability_kit as K

from sourcepage.retrieval.index import build_indexes, current_build, load_index
from sourcepage.retrieval.methods import parse_method
from sourcepage.store.db import Store
from sourcepage.store.reviewers import add_reviewer

pytestmark = pytest.mark.slow

WORDS = "lockout tagout guard permit entry atmosphere hearing protection isolate energy valve breaker".split()


def _corpus(root: Path, docs: int, pages: int) -> Path:
    """``docs`` PDFs of ``pages`` pages, each page a distinct line of safety words."""
    rows = []
    for i in range(docs):
        texts = [
            f"Document {i} page {p}: " + " ".join(WORDS[(i * p + k) % len(WORDS)] for k in range(12))
            for p in range(pages)
        ]
        K.raw_pdf(root / "pdf" / f"doc{i:03d}.pdf", [K.text_stream(t) for t in texts])
        rows.append({"doc_id": f"doc{i:03d}", "title": f"Document {i}"})
    pf.write_manifest(root, rows)
    return root


def _wait(predicate, timeout: float, what: str, proc=None) -> None:
    deadline = time.time() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            output = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"the command ended ({proc.returncode}) before {what}: {output}")
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _ok_documents(store: Path) -> tuple[int, bool]:
    """(documents written, run finished) as another process sees them."""
    db = store / "store.sqlite"
    if not db.exists():
        return 0, False
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            n = con.execute("SELECT count(*) FROM documents WHERE status='ok'").fetchone()[0]
            done = con.execute("SELECT count(*) FROM runs WHERE finished_at IS NOT NULL").fetchone()[0]
            return int(n), bool(done)
        finally:
            con.close()
    except sqlite3.Error:
        return 0, False


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def _consistent(store: Path) -> None:
    """Every document the store calls ingested is whole: all its pages and chunks."""
    assert K.integrity(store / "store.sqlite") == "ok"
    con = sqlite3.connect(store / "store.sqlite")
    try:
        for doc_id, n_pages in con.execute("SELECT doc_id, n_pages FROM documents WHERE status='ok'"):
            pages = con.execute("SELECT count(*) FROM pages WHERE doc_id=?", (doc_id,)).fetchone()[0]
            chunks = con.execute("SELECT count(*) FROM chunks WHERE doc_id=?", (doc_id,)).fetchone()[0]
            assert pages == n_pages and chunks > 0, (doc_id, pages, n_pages, chunks)
    finally:
        con.close()


@pytest.fixture(scope="module")
def crash_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """A 60-document, 2,400-page corpus and the dump of a store ingested from it without
    interruption."""
    root = tmp_path_factory.mktemp("crash")
    corpus = _corpus(root / "corpus", 60, 40)
    clean = root / "clean"
    p = K.cli("ingest", "--corpus", str(corpus), "--store", str(clean))
    assert p.wait(300) == 0, p.stderr.read()
    return corpus, K.store_dump(clean)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_kill_during_ingest(crash_corpus, tmp_path: Path, workers: str) -> None:
    corpus, clean_dump = crash_corpus
    store = tmp_path / "store"
    p = K.cli("ingest", "--corpus", str(corpus), "--store", str(store), "--workers", workers)
    try:
        _wait(lambda: _ok_documents(store)[0] >= 8, 120, "8 documents were written", p)
        kids = K.descendants(p.pid)
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.wait(30)
    if workers == "2":
        assert len(kids) >= 2, kids  # the forkserver and its workers
        deadline = time.time() + 10
        while any(_alive(k) for k in kids) and time.time() < deadline:
            time.sleep(0.1)
        assert not [k for k in kids if _alive(k)], "worker processes outlived the killed ingest"
    _consistent(store)
    written, finished = _ok_documents(store)
    assert written >= 8 and not finished, (written, finished)  # killed in the middle
    again = K.cli("ingest", "--corpus", str(corpus), "--store", str(store))
    assert again.wait(300) == 0, again.stderr.read()
    _consistent(store)
    assert K.store_dump(store) == clean_dump


@pytest.fixture(scope="module")
def index_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("crash_index")
    corpus = _corpus(root / "corpus", 16, 16)
    store = root / "store"
    p = K.cli("ingest", "--corpus", str(corpus), "--store", str(store))
    assert p.wait(300) == 0, p.stderr.read()
    return store


def _build_files(store: Path, method: str) -> dict[str, bytes]:
    st = Store(store)
    try:
        path = current_build(st, "raw", parse_method(method))
    finally:
        st.close()
    assert path is not None
    files = {f.name: f.read_bytes() for f in sorted(path.iterdir())}
    params = json.loads(files.pop("params.json"))
    for timing in ("build_seconds", "built_at"):
        params.pop(timing)
    files["params.json"] = json.dumps(params, sort_keys=True).encode()
    return files


def test_kill_during_index_build(index_store: Path, tmp_path: Path) -> None:
    clean, crashed = (Path(shutil.copytree(index_store, tmp_path / n)) for n in ("clean", "crashed"))
    build_indexes(clean, "raw", ["lsa"])
    build_indexes(crashed, "raw", ["bm25"])
    folder = crashed / "indexes" / "raw" / "lsa"
    p = K.cli("index", "--store", str(crashed), "--version", "raw", "--method", "lsa")
    try:
        _wait(lambda: folder.is_dir() and any(folder.glob(".*.tmp")), 120, "the build folder appeared", p)
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.wait(30)
    stale = list(folder.glob(".*.tmp"))
    assert stale and not (folder / "CURRENT").exists()  # nothing half-built is published
    assert K.integrity(crashed / "store.sqlite") == "ok"
    st = Store(crashed)
    try:
        assert load_index(st, "raw", parse_method("lsa")) is None
        assert load_index(st, "raw", parse_method("bm25")) is not None  # the finished build still serves
    finally:
        st.close()
    build_indexes(crashed, "raw", ["lsa"])  # the re-run
    assert not any(s.exists() for s in stale)  # the killed build's folder is gone
    assert _build_files(crashed, "lsa") == _build_files(clean, "lsa")


# --------------------------------------------------------------------------- label writes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(store: Path, questions: Path, port: int):
    log = store.parent / f"serve-{store.name}-{port}.log"
    p = K.cli("serve", "--store", str(store), "--questions", str(questions), "--port", str(port), log=log)

    def up() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    _wait(up, 120, "the server answered /health", p)
    return p


def _post(port: int, token: str, body: dict) -> int:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/judgments",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status


def _export(port: int) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/judgments/export", timeout=30) as r:
        return r.read()


def _judgments(store: Path) -> set[tuple[str, str, int]]:
    if not (store / "labels.sqlite").exists():
        return set()
    con = sqlite3.connect(store / "labels.sqlite")
    try:
        rows = con.execute(
            "SELECT subject, json_extract(body, '$.page'), json_extract(body, '$.grade') FROM labels"
            " WHERE kind = 'judgment'"
        )
        return {(q, p, g) for q, p, g in rows}
    finally:
        con.close()


QUESTIONS = [
    {
        "id": f"Q{i}",
        "question": f"Which page of document {i} covers lockout?",
        "topic": "loto",
        "type": "direct",
        "answerability": "answerable",
        "evidence": [{"page": f"doc{i:03d}#p1", "grade": 2}],
    }
    for i in range(10)
]
LABELS = [
    {"question_id": f"Q{i}", "page": f"doc{i:03d}#p{n}", "grade": (i + n) % 3, "reviewer": "ada"}
    for i in range(10)
    for n in range(1, 7)
]


def _label(store: Path, questions: Path, crash: bool) -> bytes:
    """Post LABELS through a served store (``crash``: kill -9 the server after 20 are
    acknowledged, check, restart it, post what is missing); returns its export."""
    token = add_reviewer(store, "ada")
    port = _free_port()
    server = _serve(store, questions, port)
    try:
        if crash:
            acked: list[dict] = []
            stop = threading.Event()

            def writer() -> None:
                for body in LABELS:
                    if stop.is_set():
                        return
                    try:
                        if _post(port, token, body) == 201:
                            acked.append(body)
                    except OSError:
                        return

            t = threading.Thread(target=writer, daemon=True)
            t.start()
            _wait(lambda: len(acked) >= 20, 120, "20 judgments were acknowledged")
            os.kill(server.pid, signal.SIGKILL)
            server.wait(30)
            stop.set()
            t.join(30)
            assert K.integrity(store / "labels.sqlite") == "ok"
            rows = _judgments(store)
            assert {(b["question_id"], b["page"], b["grade"]) for b in acked} <= rows  # none lost
            assert len(acked) <= len(rows) <= len(acked) + 1 < len(LABELS)  # at most the one in flight
            port = _free_port()
            server = _serve(store, questions, port)  # the re-run: write what is missing
        done = _judgments(store)
        for body in LABELS:
            if (body["question_id"], body["page"], body["grade"]) not in done:
                assert _post(port, token, body) == 201
        return _export(port)
    finally:
        server.kill()
        server.wait(30)


def test_kill_during_label_writes(index_store: Path, tmp_path: Path) -> None:
    from sourcepage.evaluation.questions import read_questions
    from sourcepage.labels import judgments as jm

    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    conn = jm.connect(tmp_path / "clean-judgments.sqlite")  # the same labels, never interrupted
    for body in LABELS:
        jm.record(conn, body["question_id"], body["page"], body["grade"], body["reviewer"])
    jm.export(conn, read_questions(questions), tmp_path / "expected.jsonl")
    conn.close()
    expected = (tmp_path / "expected.jsonl").read_bytes()
    assert b"doc000#p" in expected
    crashed = Path(shutil.copytree(index_store, tmp_path / "crashed"))
    assert _label(crashed, questions, crash=True) == expected
