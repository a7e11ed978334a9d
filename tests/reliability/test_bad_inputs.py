"""The bad-input matrix: PDFs, manifests, question files and API requests a careless user
or an attacker sends. A bad document is skipped with its reason and the rest is served; a
bad manifest or question file gives one line naming the file, line, field or page, exit
code 2, and writes nothing; a bad request is a 4xx with a readable reason, never a 500.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pdf_factory as pf
import pytest
import reliability_kit as K
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from sourcepage.cli import app as cli
from sourcepage.corpus.fetch import fetch_corpus
from sourcepage.ingest import ingest
from sourcepage.limits import Limits
from sourcepage.retrieval.index import build_indexes
from sourcepage.service.app import create_app

LOCAL = "http://127.0.0.1"

# --------------------------------------------------------------------------- PDFs


def _rows(corpus: Path) -> list[dict[str, str]]:
    with (corpus / "manifest.csv").open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _add_documents(corpus: Path, files: dict[str, Path]) -> None:
    """Add one manifest row per file (doc_id = the key) to a corpus."""
    rows: list[dict[str, object]] = [dict(r) for r in _rows(corpus)]
    for doc_id, path in files.items():
        rows.append({"doc_id": doc_id, "file": path.name, "title": doc_id, "pages": ""})
    pf.write_manifest(corpus, rows)


def _bad_pdfs(pdf: Path, source: Path) -> dict[str, Path]:
    """doc_id -> a bad file under ``pdf``."""
    bad = {
        "corrupt": pf.corrupt_pdf(pdf / "corrupt.pdf"),
        "truncated": K.truncated_pdf(pdf / "truncated.pdf", source),
        "encrypted": pf.encrypted_pdf(pdf / "encrypted.pdf", "Lockout text behind a password"),
        "zero-byte": pf.empty_file(pdf / "zero-byte.pdf"),
        "png-named-pdf": pdf / "png-named-pdf.pdf",
        "html-named-pdf": pdf / "html-named-pdf.pdf",
        "blank-3000": K.blank_pages_pdf(pdf / "blank-3000.pdf", 3000),
        "image-only": pf.image_only_pdf(pdf / "image-only.pdf", 2),
        "inflation-bomb": K.bomb_pdf(pdf / "inflation-bomb.pdf", 150),
        "too-many-pages": K.many_pages_pdf(pdf / "too-many-pages.pdf", 4100),
        "zero-pages": K.zero_pages_pdf(pdf / "zero-pages.pdf"),
        "latin1-text": pdf / "latin1-text.txt",
        "empty-text": pdf / "empty-text.md",
        "blank-text": pdf / "blank-text.txt",
    }
    bad["png-named-pdf"].write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    bad["html-named-pdf"].write_bytes(b"<html><body><script>alert(1)</script></body></html>")
    bad["latin1-text"].write_bytes("Sécurité des machines: protège-mains".encode("latin-1"))
    bad["empty-text"].write_bytes(b"")
    bad["blank-text"].write_text("   \n\f\n  \n", encoding="utf-8")
    return bad


#: doc_id -> words its skip reason must hold
PDF_CASES = {
    "corrupt": "unreadable PDF",
    "truncated": "unreadable PDF",
    "encrypted": "encrypted PDF",
    "zero-byte": "empty file",
    "png-named-pdf": "unreadable PDF",
    "html-named-pdf": "unreadable PDF",
    "blank-3000": "text-less PDF: no extractable text on any of its 3000 pages",
    "image-only": "image-only PDF",
    "inflation-bomb": "memory limit of 256 MiB",
    "too-many-pages": "4100 pages, over the page limit of 4000",
    "zero-pages": "PDF has no pages",  # was "unreadable PDF (Failed to load document (PDFium: Success))"
    "latin1-text": "not a UTF-8 text file",
    "empty-text": "empty file",
    "blank-text": "text-less file",
}
LIMITS = Limits(memory_mb=256, seconds=120, pages=4000)


@pytest.fixture(scope="module")
def bad_pdf_ingest(safety_corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    import shutil

    root = tmp_path_factory.mktemp("bad_pdfs")
    corpus = Path(shutil.copytree(safety_corpus, root / "corpus"))
    bad = _bad_pdfs(corpus / "pdf", corpus / "pdf" / "loto_energy_control.pdf")
    _add_documents(corpus, bad)
    store = root / "store"
    report = ingest(corpus, store, workers=2, limits=LIMITS)
    build_indexes(store, "raw", ["bm25", "dense"])
    return report, store


@pytest.mark.parametrize("doc_id", sorted(PDF_CASES))
def test_bad_document_skipped_with_its_reason(bad_pdf_ingest, doc_id: str) -> None:
    report, store = bad_pdf_ingest
    assert doc_id in report.failed, sorted(report.failed)
    assert PDF_CASES[doc_id] in report.failed[doc_id]
    assert f"{doc_id}." in report.failed[doc_id]  # the file is named


def test_the_good_documents_are_served(bad_pdf_ingest) -> None:
    report, store = bad_pdf_ingest
    good = {"loto_energy_control", "machine_guarding", "confined_space_entry", "hse_ppe_at_work"}
    assert set(report.extracted) == good and set(report.failed) == set(PDF_CASES)
    assert K.integrity(store / "store.sqlite") == "ok"
    with TestClient(create_app(store), base_url=LOCAL) as c:
        body = c.post("/search", json={"question": "group lockbox", "k": 3}).json()
        assert body["results"][0]["page"] == "loto_energy_control#p2"
        assert {d["doc_id"] for d in c.get("/documents").json()} == good


def test_a_document_over_the_time_limit_is_skipped(fresh_corpus: Path, tmp_path: Path) -> None:
    # 100,000 blank pages take seconds to read (0.03–0.15 ms a page here); the others, milliseconds
    slow = K.blank_pages_pdf(fresh_corpus / "pdf" / "slow.pdf", 100_000)
    _add_documents(fresh_corpus, {"slow": slow})
    report = ingest(fresh_corpus, tmp_path / "store", limits=Limits(seconds=0.5, pages=200_000))
    assert "stopped at the time limit of 0.5 s" in report.failed["slow"]
    assert set(report.failed) == {"slow"} and len(report.extracted) == 4


def test_a_page_too_large_to_render_is_rendered_smaller(fresh_corpus: Path, tmp_path: Path) -> None:
    poster = fresh_corpus / "pdf" / "poster.pdf"
    huge = K.raw_pdf(poster, [K.text_stream("Lockout poster")], size=(14400, 14400))
    _add_documents(fresh_corpus, {"poster": huge})
    store = tmp_path / "store"
    ingest(fresh_corpus, store)
    with TestClient(create_app(store), base_url=LOCAL) as c:
        r = c.get("/pages/poster%23p1/image", params={"scale": 3})
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    scale = float(r.headers["x-render-scale"])
    assert (14400 * scale) ** 2 <= Limits().pixels < (14400 * 3) ** 2


# --------------------------------------------------------------------------- manifests


def _manifest_case(corpus: Path, case: str) -> str:
    """Break the manifest of ``corpus`` as ``case`` says; returns what the error must say."""
    path = corpus / "manifest.csv"
    rows = _rows(corpus)
    cols = list(rows[0])

    def write(rows: list[dict[str, str]], cols: list[str] = cols) -> None:
        with path.open("w", encoding="utf-8", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)

    if case == "missing-manifest":  # and no PDF to draft one from (test_pdfs_without_manifest_draft_and_stop)
        path.unlink()
        shutil.rmtree(corpus / "pdf")
        return "manifest.csv: manifest.csv not found"
    if case == "missing-column":
        write(rows, [c for c in cols if c != "title"])
        return "manifest.csv:1 [title]: required column missing from header"
    if case == "bad-doc-id":
        rows[1]["doc_id"] = "Bad ID"
        write(rows)
        return "manifest.csv:3 [doc_id]: 'Bad ID' must match [a-z0-9][a-z0-9_-]*"
    if case == "duplicate-doc-id":
        rows[2]["doc_id"] = rows[0]["doc_id"]
        write(rows)
        return "manifest.csv:4 [doc_id]: duplicate 'loto_energy_control' (first on line 2)"
    if case == "missing-file":
        rows[0]["file"] = "nowhere.pdf"
        write(rows)
        return "manifest.csv:2 [file]:"
    if case == "file-outside-pdf":
        rows[0]["file"] = "../manifest.csv"
        write(rows)
        return "manifest.csv:2 [file]: must be a bare file name under pdf/"
    if case == "sha-mismatch":
        rows[3]["sha256"] = "0" * 64
        write(rows)
        return "manifest.csv:5 [sha256]: manifest says 0000"
    if case == "sha-not-hex":
        rows[3]["sha256"] = "not-a-checksum"
        write(rows)
        return "manifest.csv:5 [sha256]: 'not-a-checksum' is not a SHA-256 hex digest"
    if case == "bad-year":
        rows[0]["year"] = "20x4"
        write(rows)
        return "manifest.csv:2 [year]: '20x4' is not a year"
    if case == "bad-pages":
        rows[0]["pages"] = "three"
        write(rows)
        return "manifest.csv:2 [pages]: 'three' is not a number"
    if case == "field-over-128k":
        rows[1]["title"] = "x" * (200 * 1024)
        write(rows)
        return "manifest.csv:3: a field is longer than 131072 characters"
    if case == "not-utf8":
        path.write_bytes(path.read_bytes().replace(b"Lockout", "Lockoüt".encode("latin-1")))
        return "manifest.csv: not UTF-8"
    if case == "extra-fields":
        text = path.read_text(encoding="utf-8").splitlines()
        text[2] += ",surplus,fields"
        path.write_text("\n".join(text) + "\n", encoding="utf-8")
        return "manifest.csv:3: row has more fields than the header"
    if case == "header-only":
        write([])
        return "manifest.csv:2: manifest has no document rows"
    if case == "duplicate-column":
        lines = path.read_text(encoding="utf-8").splitlines()
        lines = [lines[0] + ",title"] + [ln + ",again" for ln in lines[1:]]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return "manifest.csv:1 [title]: column appears more than once in header"
    raise AssertionError(case)


MANIFEST_CASES = [
    "missing-manifest",
    "missing-column",
    "bad-doc-id",
    "duplicate-doc-id",
    "missing-file",
    "file-outside-pdf",
    "sha-mismatch",
    "sha-not-hex",
    "bad-year",
    "bad-pages",
    "field-over-128k",
    "not-utf8",
    "extra-fields",
    "header-only",
    "duplicate-column",
]


def _one_line_error(res) -> str:
    """The one error line; progress lines of a step begun before the error (``label …``,
    ``label: done in N s``) may precede it."""
    step = re.compile(r".* …$|.*: done in \d+\.\d s$")
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and not step.fullmatch(ln)]
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    return lines[0]


def test_pdfs_without_manifest_draft_and_stop(fresh_corpus: Path, tmp_path: Path) -> None:
    """A folder of PDFs without manifest.csv: a draft is written, nothing ingested (exit 1)."""
    (fresh_corpus / "manifest.csv").unlink()
    store = tmp_path / "store"
    res = CliRunner().invoke(cli, ["ingest", "--corpus", str(fresh_corpus), "--store", str(store)])
    assert res.exit_code == 1 and "--accept-draft" in res.stderr, res.output
    assert (fresh_corpus / "manifest.csv").is_file() and not store.exists()


@pytest.mark.parametrize("case", MANIFEST_CASES)
def test_bad_manifest_one_line_exit_2_nothing_written(fresh_corpus: Path, tmp_path: Path, case: str) -> None:
    want = _manifest_case(fresh_corpus, case)
    store = tmp_path / "store"
    res = CliRunner().invoke(cli, ["ingest", "--corpus", str(fresh_corpus), "--store", str(store)])
    line = _one_line_error(res)
    assert want in line and str(fresh_corpus) in line, line
    assert not store.exists()


def test_downloader_refuses_a_file_outside_its_cache(tmp_path: Path) -> None:
    src = tmp_path / "bench"
    row = {"doc_id": "evil", "file": "../../escaped.pdf", "sha256": "0" * 64, "pages": "1"}
    pf.write_manifest(src, [row])
    rep = fetch_corpus(src / "manifest.csv", cache=tmp_path / "cache")
    assert "not a bare file name" in rep.problems["evil"]
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["manifest.csv", "manifest.csv"]


# --------------------------------------------------------------------------- question files

ANSWERABLE = {
    "id": "Q1",
    "question": "How do workers use a group lockbox?",
    "topic": "loto",
    "type": "direct",
    "answerability": "answerable",
    "evidence": [{"page": "loto_energy_control#p2", "grade": 2}],
}
UNSUPPORTED = {
    "id": "U1",
    "question": "What is the fine for a missing guard in Ohio?",
    "topic": "machine_guarding",
    "type": "direct",
    "answerability": "unsupported",
}


def _question_file(tmp_path: Path, case: str) -> tuple[Path, str]:
    path = tmp_path / "questions.jsonl"
    if case == "missing":
        return tmp_path / "nothing.jsonl", "nothing.jsonl: no such file"
    content = {
        "empty": ("", "questions.jsonl: no questions"),
        "comments-only": ("// to do\n\n", "questions.jsonl: no questions"),
        "no-answerable": (json.dumps(UNSUPPORTED) + "\n", "questions.jsonl: no answerable question"),
        "invalid-json": (json.dumps(ANSWERABLE) + "\n{not json\n", "questions.jsonl:2: invalid JSON"),
        "array-line": ("[1, 2]\n", "questions.jsonl:1: expected a JSON object, got list"),
        "unknown-page": (
            json.dumps({**ANSWERABLE, "evidence": [{"page": "loto_energy_control#p99", "grade": 2}]}) + "\n",
            "questions.jsonl:1:",
        ),
        "duplicate-id": (json.dumps(ANSWERABLE) + "\n" + json.dumps(ANSWERABLE) + "\n", "duplicate id 'Q1'"),
    }
    if case == "not-utf8":
        path.write_bytes(json.dumps(ANSWERABLE).replace("lockbox", "lockbôx").encode("latin-1") + b"\n")
        # named by file and line (issue 51: not by the byte offset in the file)
        return path, "questions.jsonl:1: not UTF-8"
    text, want = content[case]
    path.write_text(text, encoding="utf-8")
    return path, want


EVAL_CASES = [
    "missing",
    "empty",
    "comments-only",
    "no-answerable",
    "invalid-json",
    "array-line",
    "unknown-page",
    "duplicate-id",
    "not-utf8",
]


@pytest.mark.parametrize("case", EVAL_CASES)
def test_bad_question_file_for_eval(safety_corpus: Path, tmp_path: Path, case: str) -> None:
    qfile, want = _question_file(tmp_path, case)
    out = tmp_path / "out"
    res = CliRunner().invoke(
        cli, ["eval", "--corpus", str(safety_corpus), "--questions", str(qfile), "--out", str(out)]
    )
    line = _one_line_error(res)
    assert want in line, line
    assert not out.exists()


@pytest.mark.parametrize(
    ("case", "want"),
    [
        ("missing", "nothing.jsonl: no such file"),
        ("empty", "it has 0 answerable and 0 others"),
        ("only-answerable", "it has 2 answerable and 0 others"),
    ],
)
def test_bad_question_file_for_calibrate(indexed_store: Path, tmp_path: Path, case: str, want: str) -> None:
    qfile = tmp_path / ("nothing.jsonl" if case == "missing" else "dev.jsonl")
    if case == "empty":
        qfile.write_text("", encoding="utf-8")
    elif case == "only-answerable":
        qfile.write_text(json.dumps(ANSWERABLE) + "\n" + json.dumps({**ANSWERABLE, "id": "Q2"}) + "\n")
    res = CliRunner().invoke(
        cli, ["calibrate", "--store", str(indexed_store), "--questions", str(qfile), "--semantic", "lsa"]
    )
    line = _one_line_error(res)
    assert want in line and str(qfile.name) in line, line
    assert not list(indexed_store.rglob("policy.json"))


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (["search", "lock", "-k", "0"], "-k must be between 1 and 100"),
        (["search", "lock", "--method", "bm26"], "bm26"),
        (["search", "lock", "--filter", "colour=red"], "colour"),
        (["reviewer", "add", "adjudicator:eve"], "reviewer name 'adjudicator:eve'"),
        (["serve", "--host", "0.0.0.0"], "add --public"),
        (["serve", "--public", "--allowed-host", "sp.example"], "needs reviewer accounts"),
    ],
)
def test_bad_command_arguments(indexed_store: Path, args: list[str], want: str, monkeypatch) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: None)  # a server that would start returns at once
    res = CliRunner().invoke(cli, [*args, "--store", str(indexed_store)])
    line = _one_line_error(res)
    assert want in line, line


# --------------------------------------------------------------------------- API requests


@pytest.fixture(scope="module")
def api(safety_store: Path, tmp_path_factory: pytest.TempPathFactory):
    import shutil

    store = Path(shutil.copytree(safety_store, tmp_path_factory.mktemp("api") / "store"))
    build_indexes(store, "raw", ["bm25", "dense"])
    with TestClient(create_app(store), base_url=LOCAL) as c:
        yield c


SEARCH = {"question": "group lockbox"}
IMAGE = "/pages/loto_energy_control%23p1/image"
NOT_JSON = {"content": b"{not", "headers": {"content-type": "application/json"}}


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "words"),
    [
        ("GET", "/pages/loto_energy_control%23p99999999999999999999", {}, 422, "page number out of range"),
        ("GET", "/pages/loto_energy_control%23p18446744073709551617/image", {}, 422, "out of range"),
        ("GET", "/pages/not-a-page-id", {}, 422, "not a page id"),
        ("GET", "/pages/nodoc%23p1", {}, 404, "no document 'nodoc'"),
        ("GET", "/pages/loto_energy_control%23p4", {}, 404, "has pages 1-3, not 4"),
        ("GET", IMAGE, {"params": {"scale": 10}}, 422, "scale"),
        ("GET", IMAGE, {"params": {"highlight": "x" * 4001}}, 422, "highlight"),
        ("GET", IMAGE, {"params": {"chunk": "machine_guarding#p1#c1"}}, 422, "not a chunk of"),
        ("GET", IMAGE, {"params": {"version": "fancy"}}, 422, "version"),
        ("POST", "/search", {"json": {**SEARCH, "k": 0}}, 422, "k"),
        ("POST", "/search", {"json": {**SEARCH, "k": 51}}, 422, "k"),
        ("POST", "/search", {"json": {"question": "   "}}, 422, "the question is empty"),
        ("POST", "/search", {"json": {"question": "x" * 501}}, 422, "question"),
        ("POST", "/search", {"json": {**SEARCH, "method": "bm26"}}, 422, "bm26"),
        ("POST", "/search", {"json": {**SEARCH, "filters": {"colour": "red"}}}, 422, "colour"),
        ("POST", "/search", {"json": {**SEARCH, "filters": {"topic": {"a": 1}}}}, 422, "filters"),
        ("POST", "/search", NOT_JSON, 422, "JSON"),
        ("POST", "/search", {"json": {**SEARCH, "text_version": "fancy"}}, 422, "text_version"),
        ("POST", "/search", {"json": {"question": "'; DROP TABLE chunks; --"}}, 200, ""),
    ],
)
def test_bad_request(api: TestClient, method: str, path: str, kwargs: dict, status: int, words: str) -> None:
    r = api.request(method, path, **kwargs)
    assert r.status_code == status, (r.status_code, r.text[:300])
    if words:
        assert words in r.json()["error"]


def test_a_request_never_builds_an_index(plain_store: Path) -> None:
    with TestClient(create_app(plain_store), base_url=LOCAL) as c:
        r = c.post("/search", json=SEARCH)
        page = c.get("/", params={"q": "group lockbox"}, headers={"accept": "text/html"})
    assert r.status_code == 409
    command = f"run `sourcepage index --store {plain_store} --version raw --method bm25`"
    assert r.json()["error"].endswith(command)
    assert page.status_code == 422 and "sourcepage index" in page.text
    assert not (plain_store / "indexes").exists()


def test_the_service_notices_a_reingest(fresh_corpus: Path, fresh_store: Path) -> None:
    build_indexes(fresh_store, "raw", ["bm25", "dense"])
    with TestClient(create_app(fresh_store), base_url=LOCAL) as c:
        first = c.post("/search", json={"question": "hearing protection ear defenders", "k": 3}).json()
        assert first["results"][0]["doc_id"] == "hse_ppe_at_work"
        rows = [r for r in _rows(fresh_corpus) if r["doc_id"] != "hse_ppe_at_work"]
        pf.write_manifest(fresh_corpus, rows)
        ingest(fresh_corpus, fresh_store)
        stale = c.post("/search", json={"question": "hearing protection ear defenders", "k": 3})
        assert stale.status_code == 409 and "sourcepage index" in stale.json()["error"]
        assert c.get("/pages/hse_ppe_at_work%23p2").status_code == 404
        build_indexes(fresh_store, "raw", ["bm25", "dense"])
        again = c.post("/search", json={"question": "hearing protection ear defenders", "k": 10}).json()
        assert again["results"] and all(r["doc_id"] != "hse_ppe_at_work" for r in again["results"])


def test_judgments_are_append_only_in_the_database(tmp_path: Path) -> None:
    from sourcepage.labels import judgments as jm

    conn = jm.connect(tmp_path / "labels.sqlite")
    jm.record(conn, "Q1", "loto_energy_control#p2", 2, "ada")
    conn.close()
    raw = sqlite3.connect(tmp_path / "labels.sqlite")  # any connection, not only ours
    for sql in ("UPDATE labels SET body='{\"grade\": 0}'", "DELETE FROM labels"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            with raw:
                raw.execute(sql)
    assert raw.execute("SELECT json_extract(body, '$.grade') FROM labels").fetchall() == [(2,)]
    raw.close()
