"""Inputs that used to get through (issue 29): identifiers with a trailing newline,
bodies and lists without a size limit, terminal escapes from PDFs and manifests, JSONL
split on Unicode line separators, and the smaller cases of its point 12."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest
import reliability_kit as kit
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from sourcepage.cli import app as cli
from sourcepage.evaluation.questions import read_questions
from sourcepage.ingest import ingest
from sourcepage.records import parse_page_id
from sourcepage.service.app import create_app

BASE = "http://127.0.0.1:8000"
PAGE = "loto_energy_control#p2"


@pytest.fixture
def client(indexed_store: Path):
    with TestClient(create_app(indexed_store), base_url=BASE) as c:
        yield c


# --------------------------------------------------------------------------- 4. anchored identifiers


@pytest.mark.parametrize("bad", [PAGE + "\n", PAGE + "\r\n", " " + PAGE, PAGE + "\x00"])
def test_a_page_id_with_a_trailing_newline_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_page_id(bad)


def test_the_service_refuses_a_page_id_with_a_newline(client: TestClient) -> None:
    assert client.get("/pages/loto_energy_control%23p2%0A").status_code in (404, 422)


def test_identifier_patterns_are_anchored_at_the_very_end() -> None:
    """Every identifier pattern of the package refuses a trailing newline."""
    from sourcepage.corpus import beir, manifest
    from sourcepage.store import reviewers

    assert not manifest.DOC_ID.match("doc\n") and not manifest.DOC_ID.fullmatch("doc\n")
    assert not beir._VALID.match("doc\n")
    assert not reviewers.NAME.match("alice\n")


# --------------------------------------------------------------------------- 9. sizes before parsing


def test_a_huge_body_is_refused_before_it_is_read(client: TestClient) -> None:
    big = b'{"question": "' + b"a" * (3 << 20) + b'"}'
    r = client.post("/search", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413, r.text


def test_a_huge_body_without_a_length_is_refused(client: TestClient) -> None:
    def chunks():
        for _ in range(40):
            yield b" " * (100 << 10)

    r = client.post("/search", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413, r.text


def test_a_long_filter_list_is_refused(client: TestClient) -> None:
    body = {"question": "lockout", "method": "bm25", "filters": {"topic": ["x"] * 5000}}
    r = client.post("/search", json=body)
    assert r.status_code == 422 and "filters" in r.text


# --------------------------------------------------------------------------- 10. terminal-safe output

ESC = "\x1b]0;pwned\x07\x1b[2J"


def test_escapes_from_data_never_reach_the_terminal(fresh_corpus: Path, tmp_path: Path) -> None:
    (fresh_corpus / "pdf" / "hostile.txt").write_text(
        f"Lockout tagout hostile page {ESC} with a group lockbox and energy isolation.\n", encoding="utf-8"
    )
    rows = list(csv.DictReader((fresh_corpus / "manifest.csv").open(encoding="utf-8")))
    row = dict(
        rows[0], doc_id="hostile", file="hostile.txt", sha256="", title=f"Hostile {ESC} title", pages=""
    )
    with (fresh_corpus / "manifest.csv").open("a", encoding="utf-8", newline="") as f:
        csv.DictWriter(f, fieldnames=list(rows[0])).writerow(row)
    store = tmp_path / "store"
    runner = CliRunner()
    res = runner.invoke(
        cli, ["ingest", "--corpus", str(fresh_corpus), "--store", str(store), "--allow-checksum-mismatch"]
    )
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.output and "\x07" not in res.output
    for args in (
        ["search", "hostile lockbox energy isolation", "--store", str(store), "--method", "bm25"],
        ["audit", "--store", str(store), "--pages"],
    ):
        res = runner.invoke(cli, args)
        assert res.exit_code == 0, res.output
        assert "\x1b" not in res.output and "\x07" not in res.output, args


# --------------------------------------------------------------------------- 11. one JSONL reader


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\u0085"])
def test_jsonl_with_unicode_line_separators_reads(tmp_path: Path, sep: str) -> None:
    q = {
        "id": "Q1",
        "question": f"How do workers use{sep}a group lockbox?",
        "topic": "loto",
        "type": "direct",
        "answerability": "answerable",
        "evidence": [{"page": PAGE, "grade": 2}],
    }
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(q, ensure_ascii=False) + "\n", encoding="utf-8")
    (got,) = read_questions(path)
    assert sep in got.question


# --------------------------------------------------------------------------- 12. smaller


def test_security_headers(client: TestClient) -> None:
    h = client.get("/").headers
    assert "default-src" in h.get("content-security-policy", "")
    assert h.get("x-frame-options") == "DENY"
    assert h.get("x-content-type-options") == "nosniff"
    assert h.get("referrer-policy") == "same-origin"


def test_two_host_headers_get_400(client: TestClient) -> None:
    for hosts in (["evil.example", "127.0.0.1:8000"], ["127.0.0.1:8000", "evil.example"]):
        r = client.get("/health", headers=[("host", h) for h in hosts])
        assert r.status_code == 400, hosts


def test_a_truncated_index_gives_409_naming_the_index_command(indexed_store: Path) -> None:
    files = sorted(p for p in (indexed_store / "indexes").rglob("*.npy") if p.stat().st_size > 1024)
    assert files
    for p in files:
        data = p.read_bytes()
        p.write_bytes(data[: len(data) // 2])
    with TestClient(create_app(indexed_store), base_url=BASE) as c:
        r = c.post("/search", json={"question": "lockout", "method": "bm25"})
    assert r.status_code in (409, 503), r.text
    assert "sourcepage index" in r.json()["error"]


def test_bad_serve_and_ingest_options(plain_store: Path, fresh_corpus: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(cli, ["serve", "--store", str(plain_store), "--workers", "-3"])
    assert res.exit_code == 2 and "workers" in res.output
    res = runner.invoke(
        cli,
        ["ingest", "--corpus", str(fresh_corpus), "--store", str(tmp_path / "s"), "--enrich-fields", "titel"],
    )
    assert res.exit_code == 2 and "titel" in res.output
    assert not (tmp_path / "s" / "store.sqlite").exists()


def test_an_empty_manifest_is_one_line(fresh_corpus: Path, tmp_path: Path) -> None:
    (fresh_corpus / "manifest.csv").write_text("")
    res = CliRunner().invoke(cli, ["ingest", "--corpus", str(fresh_corpus), "--store", str(tmp_path / "s")])
    assert res.exit_code == 2
    assert len([ln for ln in res.output.splitlines() if ln.strip()]) == 1, res.output


def test_a_zero_page_pdf_says_so(fresh_corpus: Path, tmp_path: Path) -> None:
    from sourcepage.corpus.extract import ExtractionError, extract_pdf

    with pytest.raises(ExtractionError, match="no pages"):
        extract_pdf(kit.zero_pages_pdf(tmp_path / "zero.pdf"))


def test_a_symlink_out_of_the_corpus_is_refused(fresh_corpus: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.pdf"
    rows = list(csv.DictReader((fresh_corpus / "manifest.csv").open(encoding="utf-8")))
    target = fresh_corpus / "pdf" / rows[0]["file"]
    shutil.move(target, outside)
    os.symlink(outside, target)
    res = CliRunner().invoke(cli, ["ingest", "--corpus", str(fresh_corpus), "--store", str(tmp_path / "s")])
    assert res.exit_code == 2 and "outside" in res.output, res.output


def test_an_identical_pdf_under_two_doc_ids_is_warned(fresh_corpus: Path, tmp_path: Path) -> None:
    rows = list(csv.DictReader((fresh_corpus / "manifest.csv").open(encoding="utf-8")))
    shutil.copyfile(fresh_corpus / "pdf" / rows[0]["file"], fresh_corpus / "pdf" / "twin.pdf")
    row = dict(rows[0], doc_id="twin", file="twin.pdf")
    with (fresh_corpus / "manifest.csv").open("a", encoding="utf-8", newline="") as f:
        csv.DictWriter(f, fieldnames=list(rows[0])).writerow(row)
    report = ingest(fresh_corpus, tmp_path / "s", workers=1)
    assert any("twin" in w and rows[0]["doc_id"] in w for w in report.warnings), report.warnings


@pytest.mark.parametrize("name", ["alice\n", "../../etc", "a" * 10_000])
def test_judge_refuses_names_reviewer_add_refuses(indexed_store: Path, tmp_path: Path, name: str) -> None:
    q = tmp_path / "q.jsonl"
    q.write_text(
        json.dumps(
            {
                "id": "Q1",
                "question": "How do workers use a group lockbox?",
                "topic": "loto",
                "type": "direct",
                "answerability": "answerable",
                "evidence": [{"page": PAGE, "grade": 2}],
            }
        )
        + "\n"
    )
    res = CliRunner().invoke(
        cli, ["judge", "--questions", str(q), "--store", str(indexed_store), "--reviewer", name]
    )
    assert res.exit_code == 2 and "reviewer name" in res.output, res.output


def test_calibration_cross_validates_at_its_stated_minimum() -> None:
    """``check_classes`` accepts MIN_PER_CLASS of each class; the cross-validation must
    then run (before: scikit-learn's n_splits error after the features were computed)."""
    import numpy as np

    from sourcepage.evaluation.questions import question_from_dict
    from sourcepage.support.calibrate import MIN_PER_CLASS, check_classes, cross_validate
    from sourcepage.support.features import CLASSIFIER_FEATURES

    rng = np.random.default_rng(42)
    qs, rows = [], []
    for i in range(2 * MIN_PER_CLASS):
        ok = i < MIN_PER_CLASS
        qs.append(
            question_from_dict(
                {
                    "id": f"Q{i}",
                    "question": f"question {i}?",
                    "topic": "loto",
                    "type": "direct",
                    "answerability": "answerable" if ok else "unsupported",
                    "evidence": [{"page": PAGE, "grade": 2}] if ok else [],
                }
            )
        )
        rows.append({f: float(rng.normal(1.0 if ok else 0.0)) for f in CLASSIFIER_FEATURES})
    check_classes(qs)
    res = cross_validate(rows, qs, {"bm25": [1.0] * len(qs)})
    assert res["folds"] >= 2


def test_pages_of_unmapped_glyphs_are_warned(fresh_corpus: Path, tmp_path: Path) -> None:
    """A page whose text is glyph codes (a font without a Unicode map) is flagged."""
    kit.raw_pdf(fresh_corpus / "pdf" / "glyphs.pdf", [kit.text_stream("\x01\x02\x03\x04\x05\x06 " * 12)])
    rows = list(csv.DictReader((fresh_corpus / "manifest.csv").open(encoding="utf-8")))
    row = dict(rows[0], doc_id="glyphs", file="glyphs.pdf", sha256="", pages="")
    with (fresh_corpus / "manifest.csv").open("a", encoding="utf-8", newline="") as f:
        csv.DictWriter(f, fieldnames=list(rows[0])).writerow(row)
    report = ingest(fresh_corpus, tmp_path / "s", workers=1, allow_checksum_mismatch=True)
    assert any(w.startswith("glyphs: ") or "glyphs:" in w for w in report.warnings), report.warnings


@pytest.mark.parametrize("case", ["judge_db_text_file", "corrupt_store", "eval_out_is_a_file"])
def test_clean_errors_instead_of_tracebacks(
    indexed_store: Path, safety_corpus: Path, tmp_path: Path, case: str
):
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 10)
    q = tmp_path / "q.jsonl"
    q.write_text(
        json.dumps(
            {
                "id": "Q1",
                "question": "How do workers use a group lockbox?",
                "topic": "loto",
                "type": "direct",
                "answerability": "answerable",
                "evidence": [{"page": PAGE, "grade": 2}],
            }
        )
        + "\n"
    )
    if case == "judge_db_text_file":
        args = [
            "judge",
            "--questions",
            str(q),
            "--store",
            str(indexed_store),
            "--reviewer",
            "ann",
            "--db",
            str(text),
        ]
    elif case == "corrupt_store":
        bad = tmp_path / "bad"
        bad.mkdir()
        (bad / "store.sqlite").write_bytes(b"garbage" * 1000)
        args = ["search", "lockout", "--store", str(bad)]
    else:
        args = ["eval", "--corpus", str(safety_corpus), "--questions", str(q), "--out", str(text)]
    proc = kit.cli(*args)
    out, errs = proc.communicate(timeout=300)
    assert proc.returncode == 2, out + errs
    assert "Traceback" not in errs and errs.startswith("error:"), errs
