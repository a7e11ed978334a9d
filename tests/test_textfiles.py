"""Plain-text corpora: .txt/.md files under pdf/, pages split at form feeds or <<<PAGE>>>."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import pdf_factory as pf
import pytest

from sourcepage.corpus.extract import ExtractionError
from sourcepage.corpus.textfiles import extract_document, extract_text_file, split_pages
from sourcepage.ingest import ingest
from sourcepage.records import MANIFEST_COLUMNS
from sourcepage.retrieval.search import Searcher
from sourcepage.store.db import Store

LOTO = [
    "Lockout/tagout overview. Hazardous energy must be controlled before servicing machines.",
    "Each authorized employee applies a personal padlock to the energy isolating device.",
    "Only the employee who applied the lock may remove it, after checking that tools are cleared.",
]
CONFINED = [
    "Confined space entry. A permit is required before entering a permit-required confined space.",
    "The attendant stays outside and tests the atmosphere for oxygen and flammable gases.",
]


def _write(path: Path, text: str) -> str:
    path.write_bytes(text.encode("utf-8"))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifest(corpus: Path, rows: list[dict[str, str]]) -> None:
    with open(corpus / "manifest.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(MANIFEST_COLUMNS))
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in MANIFEST_COLUMNS})


def _row(doc_id: str, file: str, sha: str, pages: int, topic: str) -> dict[str, str]:
    return {
        "doc_id": doc_id,
        "file": file,
        "title": doc_id.replace("_", " ").title(),
        "topic": topic,
        "authority": "OSHA",
        "jurisdiction": "US",
        "year": "2020",
        "doc_type": "guidance",
        "role": "primary",
        "sha256": sha,
        "pages": str(pages),
        "license": "public domain",
        "found_in": "test",
    }


@pytest.fixture
def text_corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    (corpus / "pdf").mkdir(parents=True)
    # .txt with form feeds, and a trailing form feed as pdftotext writes it
    sha1 = _write(corpus / "pdf" / "loto.txt", "\f".join(LOTO) + "\f")
    # .md with the <<<PAGE>>> marker line
    sha2 = _write(corpus / "pdf" / "confined.md", "# Confined spaces\n" + "\n<<<PAGE>>>\n".join(CONFINED))
    # and a PDF next to them: one corpus may mix both
    pdf = pf.text_pdf(
        corpus / "pdf" / "guarding.pdf", ["Machine guarding: fixed barrier guards at the nip point."]
    )
    _manifest(
        corpus,
        [
            _row("loto_txt", "loto.txt", sha1, 3, "loto"),
            _row("confined_md", "confined.md", sha2, 2, "confined_spaces"),
            _row("guarding_pdf", "guarding.pdf", pf.sha256_file(pdf), 1, "machine_guarding"),
        ],
    )
    return corpus


def test_split_pages():
    assert split_pages("a\fb\fc") == ["a", "b", "c"]
    assert split_pages("a\fb\f") == ["a", "b"]  # a trailing separator opens no page
    assert split_pages("a\f\fc") == ["a", "", "c"]  # empty pages elsewhere keep numbering
    assert split_pages("a\n<<<PAGE>>>\nb\r\n  <<<PAGE>>> \r\nc") == ["a\n", "b\n", "c"]
    assert split_pages("inline <<<PAGE>>> is not a marker") == ["inline <<<PAGE>>> is not a marker"]
    assert split_pages("one page") == ["one page"]


def test_extract_text_file_and_dispatch(tmp_path):
    p = tmp_path / "a.TXT"
    p.write_text("\ufeffpage one\r\nline\fpage two", encoding="utf-8")
    ex = extract_document(p, "pypdf")  # the engine does not matter for text
    assert ex.texts == ["page one\nline", "page two"]
    assert [la.images for la in ex.layouts] == [0, 0]
    assert ex.layouts[0].lines == 2 and ex.layouts[0].side_by_side_lines == 0
    (tmp_path / "e.txt").write_bytes(b"")
    with pytest.raises(ExtractionError, match="empty file"):
        extract_text_file(tmp_path / "e.txt")
    (tmp_path / "w.txt").write_text(" \f \n", encoding="utf-8")
    with pytest.raises(ExtractionError, match="text-less"):
        extract_text_file(tmp_path / "w.txt")
    (tmp_path / "l1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(ExtractionError, match="UTF-8"):
        extract_text_file(tmp_path / "l1.txt")
    with pytest.raises(ValueError, match="unknown extraction engine"):
        extract_document(p, "tika")


def test_ingest_text_corpus_pages_audit_and_search(text_corpus, tmp_path):
    store = tmp_path / "store"
    rep = ingest(text_corpus, store, workers=1)
    assert not rep.failed and not rep.warnings, (rep.failed, rep.warnings)
    assert sorted(rep.extracted) == ["confined_md", "guarding_pdf", "loto_txt"]
    st = Store(store)
    assert st.page_texts("loto_txt") == LOTO
    assert len(st.page_texts("confined_md")) == 2
    audit = {(r["doc_id"], r["page_no"]): r for r in st.page_rows()}
    for (doc, _), r in audit.items():
        if doc != "guarding_pdf":
            assert r["images"] == 0 and r["multi_column_risk"] == 0 and r["low_text_300"] == 1
    assert st.document_rows()["loto_txt"]["n_pages"] == 3
    s = Searcher(st, "raw")
    assert s.rank("who may remove the lock", "bm25", k=1).hits[0].page_id == "loto_txt#p3"
    assert s.rank("attendant tests oxygen atmosphere", "bm25", k=1).hits[0].page_id == "confined_md#p2"
    assert s.rank("nip point barrier guards", "bm25", k=1).hits[0].page_id == "guarding_pdf#p1"
    enriched = Searcher(st, "enriched").rank("padlock", "bm25", k=1).hits[0]
    assert enriched.page_id == "loto_txt#p2"
    st.close()


def test_incremental_reingest_of_text_files(text_corpus, tmp_path):
    store = tmp_path / "store"
    ingest(text_corpus, store, workers=1)
    again = ingest(text_corpus, store, workers=1)
    assert again.extracted == [] and sorted(again.unchanged) == ["confined_md", "guarding_pdf", "loto_txt"]
    # change one text file: only it is re-extracted, and its old version goes to the history
    new_pages = [*LOTO, "A fourth page about group lockout with a lockbox."]
    sha = _write(text_corpus / "pdf" / "loto.txt", "\f".join(new_pages))
    with open(text_corpus / "manifest.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if r["doc_id"] == "loto_txt":
            r.update(sha256=sha, pages="4")
    _manifest(text_corpus, rows)
    rep = ingest(text_corpus, store, workers=1)
    assert rep.extracted == ["loto_txt"] and sorted(rep.unchanged) == ["confined_md", "guarding_pdf"]
    st = Store(store)
    assert st.page_texts("loto_txt") == new_pages
    assert [h["version"] for h in st.history("loto_txt")] == [1]
    assert Searcher(st, "raw").rank("lockbox group lockout", "bm25", k=1).hits[0].page_id == "loto_txt#p4"
    st.close()
    # changed text settings rebuild from the stored raw text, without re-extracting
    from sourcepage.text.chunk import ChunkConfig
    from sourcepage.text.versions import TextSettings

    rep = ingest(text_corpus, store, workers=1, settings=TextSettings(chunk=ChunkConfig(mode="page")))
    assert rep.extracted == [] and sorted(rep.rebuilt) == ["confined_md", "guarding_pdf", "loto_txt"]
