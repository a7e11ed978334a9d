"""Text as a person reads it (#27): OCR of scanned pages, printed page labels, clean text
for quotes, and column order; on generated PDFs and on the real corpus pages named in
the issue (skipped when ../shared is absent)."""

from __future__ import annotations

import csv
import os
import re
import sqlite3
from pathlib import Path

import pdf_factory as pf
import pypdfium2 as pdfium
import pytest

from sourcepage.corpus.audit import multi_column_risk, page_flags, summarize_audit
from sourcepage.corpus.extract import _layout, extract_pdf
from sourcepage.corpus.ocr import needs_ocr, tesseract_path
from sourcepage.corpus.pagelabels import citation, detect_labels, roman_value, to_roman
from sourcepage.ingest import ingest
from sourcepage.records import Document
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.search import Searcher
from sourcepage.store.db import Store
from sourcepage.text.clean import clean_pages, map_glyphs, remove_page_numbers
from sourcepage.text.sentences import quotable
from sourcepage.text.versions import build_versions

#: ../shared beside the checkout (SOURCEPAGE_SHARED names it for a worktree elsewhere)
SHARED = Path(os.environ.get("SOURCEPAGE_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
needs_tesseract = pytest.mark.skipif(tesseract_path() is None, reason="tesseract is not installed")
SCAN_TEXT = (
    "Lockout devices must be applied by each authorized employee.\n\n"
    "The energy isolating device must be locked in the safe position."
)


def _shared(corpus: str, doc_id: str) -> Path:
    manifest = SHARED / corpus / "manifest.csv"
    if not manifest.is_file():
        pytest.skip(f"{manifest} is not here")
    rows = {r["doc_id"]: r for r in csv.DictReader(manifest.open(encoding="utf-8"))}
    return SHARED / corpus / "pdf" / rows[doc_id]["file"]


# --------------------------------------------------------------------------- OCR


@needs_tesseract
def test_a_rasterised_page_is_read_by_ocr_stored_searchable_and_flagged(tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    pf.rasterised_pdf(corpus / "pdf" / "scan.pdf", SCAN_TEXT)
    pf.text_pdf(corpus / "pdf" / "typed.pdf", ["A typed page about machine guarding and fixed guards."])
    pf.write_manifest(corpus, [{"doc_id": "scan"}, {"doc_id": "typed"}])
    report = ingest(corpus, tmp_path / "s")
    assert sorted(report.extracted) == ["scan", "typed"] and not report.failed
    st = Store(tmp_path / "s")
    row = st.page("scan", 1)
    assert "authorized employee" in row["raw"] and "isolating device" in row["raw"]
    assert row["ocr_confidence"] > 80
    assert st.page("typed", 1)["ocr_confidence"] is None
    rows = st.page_rows()
    docs, total = summarize_audit(rows)
    assert total.counts["ocr"] == 1
    assert any(f.startswith("ocr ") for f in page_flags(next(r for r in rows if r["doc_id"] == "scan")))
    hits = Searcher(st).ranked(parse_method("bm25"), "isolating device locked safe position", 2, {})
    assert hits[0].page_id == "scan#p1"
    assert st.page_marks("scan", 1)[1] == row["ocr_confidence"]


def test_without_tesseract_a_scanned_page_keeps_its_text_layer_with_a_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdf = pf.mixed_pdf(tmp_path / "m.pdf", ["Typed page about lockout and tagout of machines.", None])
    monkeypatch.setenv("PATH", str(tmp_path))  # no tesseract on PATH
    ex = extract_pdf(pdf)
    assert ex.ocr == [None, None]
    assert ex.texts[1] == ""
    assert len(ex.notices) == 1 and "tesseract is not installed" in ex.notices[0] and "p. 2" in ex.notices[0]


def test_osha3150_appendix_e_pages_are_the_ones_sent_to_ocr() -> None:
    """OSHA 3150 pp.64-72 are scans under a one-line text layer: exactly those pages look
    scanned (the OCR itself is checked on the generated page: it takes seconds a page)."""
    pdf = pdfium.PdfDocument(str(_shared("corpus-construction", "osha3150-scaffold-use")))
    scanned = []
    for i in range(len(pdf)):
        page = pdf[i]
        tp = page.get_textpage()
        if needs_ocr(tp.get_text_range(), _layout(page, tp).images):
            scanned.append(i + 1)
    assert scanned == list(range(64, 73))


# --------------------------------------------------------------------------- page labels


def test_printed_numbers_with_roman_front_matter_become_page_labels(tmp_path: Path) -> None:
    labels = ["", "i", "ii", "iii", "1", "2", "3", "4", "5", "6", ""]
    pages = [f"Body text of this page number {i} about hazards." for i in range(len(labels))]
    pdf = pf.numbered_pdf(tmp_path / "n.pdf", pages, labels)
    assert extract_pdf(pdf).labels == labels
    footer = pf.numbered_pdf(
        tmp_path / "f.pdf", pages, labels, header="Code of Practice", footer="Guide Page {label} of {total}"
    )
    assert extract_pdf(footer).labels[4:10] == ["1", "2", "3", "4", "5", "6"]


def test_pdf_page_labels_win_over_printed_numbers(tmp_path: Path) -> None:
    pages = [f"Page text {i} on confined spaces." for i in range(5)]
    pdf = pf.page_labelled_pdf(tmp_path / "l.pdf", pages, [(0, "ROMAN_LOWER", 1), (2, "ARABIC", 1)])
    assert extract_pdf(pdf).labels == ["i", "ii", "1", "2", "3"]


def test_label_helpers() -> None:
    assert [roman_value(s) for s in ("i", "iv", "xiv", "iiii", "page")] == [1, 4, 14, None, None]
    assert to_roman(49) == "xlix"
    assert detect_labels(["one", "two"]) == ["", ""]  # too few pages to agree
    assert citation("osha3120", 14, "8") == "osha3120 p. 8 (PDF p. 14)"
    assert citation("osha3120", 14, "") == citation("osha3120", 14, "14") == "osha3120 p.14"


def test_osha3120_pdf_page_14_is_printed_page_8(tmp_path: Path) -> None:
    ex = extract_pdf(_shared("corpus", "osha3120-lockout-tagout"))
    assert ex.labels[13] == "8"
    assert ex.labels[6:9] == ["1", "2", "3"]
    cite = citation("osha3120-lockout-tagout", 14, ex.labels[13])
    assert cite == "osha3120-lockout-tagout p. 8 (PDF p. 14)"


# --------------------------------------------------------------------------- clean text

PUA_PAGE = (
    "Hazardous manual tasks\nCode of Practice Page 12 of 72\n"
    "Workers must be trained in the tasks that they carry out:\n"
    "\uf02d applying sudden or unexpected forces, and\n\uf0b7 restraining a person or animal.\n"
    "The employer must keep a con\u00adtributing record of every hazardous manual task.\n"
)


def test_glyphs_soft_hyphens_and_page_of_lines_never_reach_cleaned_text_or_quotes() -> None:
    assert map_glyphs("\uf02d item\nx\uf0e0y con\u00adtributing") == "• item\nxy contributing"
    assert remove_page_numbers("Code of Practice Page 47 of 72\nbody") == "body"
    (cleaned,) = clean_pages([PUA_PAGE])
    bad = re.compile(r"[\ue000-\uf8ff\u00ad\ufffe]|page \d+ of \d+", re.IGNORECASE)
    assert not bad.search(cleaned) and "• applying sudden" in cleaned and "contributing record" in cleaned
    units = quotable(PUA_PAGE)
    assert units and not any(bad.search(u.text) for u in units)
    assert any(u.text.startswith("Workers must be trained") and "• restraining" in u.text for u in units)
    doc = Document.from_dict({"doc_id": "d", "title": "T"})
    _, chunks = build_versions(doc, [PUA_PAGE])
    assert "\uf02d" in chunks["raw"][0].text  # the raw version stays raw


def test_running_headers_of_the_document_stay_out_of_quotes() -> None:
    from sourcepage.text.sentences import quote_text, running_lines

    header = "Published by the Safety Board and"  # ends open: read alone, it joins the next line
    words = ("hoists", "ladders", "scaffolds", "guardrails")
    pages = [f"{header}\nEmployers must record each inspection of the {w} every day." for w in words]
    assert quotable(pages[0])[0].text.startswith(header)
    assert quotable(quote_text(pages[0], running_lines(pages)))[0].text.startswith("Employers must record")


# --------------------------------------------------------------------------- columns

#: pages a person marked from their images (corpus-intl): two columns of running text, or one
TWO_COLUMN = {
    ("osha3170-safeguarding-amputations", 20): True,
    ("osha3170-safeguarding-amputations", 30): True,
    ("osha3157-woodworking", 12): True,
    ("osha3120-lockout-tagout", 14): False,
    ("osha3120-lockout-tagout", 20): False,
    ("au-nsw-confined-spaces-cop", 12): False,
    ("nz-hswa-2015", 11): False,
    ("eu-reg-2023-1230-machinery", 11): False,
    ("osha3146-fall-protection-construction", 11): False,
    ("osha2236-materials-handling", 12): False,
    ("osha3138-permit-required-confined-spaces", 11): False,
}


def test_the_audit_column_check_agrees_with_the_pages_a_person_marked() -> None:
    for (doc_id, n), two in TWO_COLUMN.items():
        pdf = pdfium.PdfDocument(str(_shared("corpus-intl", doc_id)))
        page = pdf[n - 1]
        assert multi_column_risk(_layout(page, page.get_textpage())) is two, (doc_id, n)


def test_osha3170_p9_is_flagged_interleaved() -> None:
    """The re-typeset OSHA 3170 of ../shared/corpus prints both columns' text on one line:
    p.9 is flagged; its character boxes hold no gutter, so no order can be recovered."""
    ex = extract_pdf(_shared("corpus", "osha3170-safeguarding-amputations"))
    from sourcepage.corpus.audit import interleaved_columns

    assert interleaved_columns(ex.layouts[8])
    assert ex.ordered[8] is None


def test_osha3170_pages_that_join_columns_on_every_line_are_flagged_too() -> None:
    """Pp. 31 and 40 of the re-typeset OSHA 3170 join two columns on nearly every line, so
    no line is wider than the page's own median; measured against the document's column
    width (most of its pages show the joins) they are flagged, and their sentences are
    never an answer. A document where a minority of pages show it (HSE L74: its tables)
    keeps its one-column pages unflagged."""
    from sourcepage.corpus.audit import interleaved_columns

    ex = extract_pdf(_shared("corpus", "osha3170-safeguarding-amputations"))
    for n in (31, 40):
        assert ex.layouts[n - 1].text_lines >= 6 and interleaved_columns(ex.layouts[n - 1]), n
        assert ex.ordered[n - 1] is None  # no gutter: nothing to re-read
    assert sum(interleaved_columns(la) for la in ex.layouts) >= 45
    l74 = extract_pdf(_shared("corpus-intl", "uk-hse-l74-first-aid"))
    assert not any(interleaved_columns(l74.layouts[n - 1]) for n in (9, 14))


def test_interleaved_columns_are_reordered_for_the_cleaned_text_only(tmp_path: Path) -> None:
    left = [f"left column line {i} about lockout devices" for i in range(1, 31)]
    right = [f"right column {i} on permit spaces" for i in range(1, 9)]
    pdf = pf.interleaved_pdf(tmp_path / "i.pdf", left, right, title="Two Columns")
    ex = extract_pdf(pdf)
    assert "lockout devices right column 1" in " ".join(ex.texts[0].split())  # PDFium runs them together
    ordered = ex.ordered[0]
    assert ordered is not None and ordered.split("\n")[:2] == ["Two Columns", left[0]]
    assert ordered.split("\n")[31:] == right
    assert sorted(ordered.split()) == sorted(ex.texts[0].split())  # re-read, nothing lost
    doc = Document.from_dict({"doc_id": "i", "title": "T"})
    cleaned, chunks = build_versions(doc, ex.texts, ordered=ex.ordered)
    assert "line 30 about lockout devices right column 1 on" in cleaned[0]
    assert "right column 1 on" in chunks["raw"][0].text.split("left column line 2")[0]
    two = pf.two_column_pdf(tmp_path / "t.pdf", [(" ".join(left[:20]), " ".join(right))])
    assert extract_pdf(two).ordered == [None]  # PDFium reads a plain two-column page in order


def test_store_keeps_labels_ocr_and_order_per_page(tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    labels = ["", "1", "2", "3", "4"]
    pf.numbered_pdf(corpus / "pdf" / "n.pdf", [f"Body {i} about guards." for i in range(5)], labels)
    pf.write_manifest(corpus, [{"doc_id": "n"}])
    ingest(corpus, tmp_path / "s")
    st = Store(tmp_path / "s")
    assert st.page_labels("n") == labels
    assert st.page_marks("n", 3) == ("2", None)
    with sqlite3.connect(tmp_path / "s" / "store.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM pages WHERE ordered IS NOT NULL").fetchone()[0] == 0


def test_schema_5_store_gains_labels_from_its_stored_text(tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    labels = ["", "1", "2", "3", "4"]
    pf.numbered_pdf(corpus / "pdf" / "n.pdf", [f"Body {i} about ladders." for i in range(5)], labels)
    pf.write_manifest(corpus, [{"doc_id": "n"}])
    ingest(corpus, tmp_path / "s")
    with sqlite3.connect(tmp_path / "s" / "store.sqlite") as conn:
        for col in ("ocr_confidence", "page_label", "ordered"):
            conn.execute(f"ALTER TABLE pages DROP COLUMN {col}")
        # schema 5 (structure, already filled): the migration to 6 adds the label columns
        conn.execute("UPDATE meta SET value='5' WHERE key='schema_version'")
    st = Store(tmp_path / "s")
    assert st.page_labels("n") == [""] * 5 and st.page_marks("n", 2) == ("", None)
    st.close()
    report = ingest(corpus, tmp_path / "s")  # nothing to extract; the labels are read first
    assert report.unchanged == ["n"]
    assert Store(tmp_path / "s").page_labels("n") == labels
