"""PDF extraction (both engines), extraction errors, and the page audit flags."""

from __future__ import annotations

from pathlib import Path

import pdf_factory as pf
import pytest

from sourcepage.corpus.audit import audit_page, multi_column_risk, spacing_artifact
from sourcepage.corpus.extract import ENGINES, ExtractionError, extract_pdf
from sourcepage.records import PageLayout


def _norm(text: str) -> str:
    return " ".join(text.split())


# ----------------------------------------------------------------------------- extraction


@pytest.mark.parametrize("engine", ENGINES)
def test_page_per_page_text(tmp_path: Path, engine: str) -> None:
    pages = ["Alpha page about lockout devices.", "", "Gamma page about machine guards."]
    ex = extract_pdf(pf.text_pdf(tmp_path / "d.pdf", pages), engine)
    assert len(ex.texts) == len(ex.layouts) == 3
    assert _norm(ex.texts[0]) == pages[0]
    assert ex.texts[1].strip() == ""
    assert _norm(ex.texts[2]) == pages[2]
    assert ex.seconds >= 0
    assert all("\r" not in t for t in ex.texts)


@pytest.mark.parametrize("engine", ENGINES)
def test_safety_corpus_pages_per_engine(safety_corpus: Path, engine: str) -> None:
    for doc_id, bodies in pf.SAFETY_CORPUS_DOCS.items():
        ex = extract_pdf(safety_corpus / "pdf" / f"{doc_id}.pdf", engine)
        assert len(ex.texts) == len(bodies), doc_id
        for n, (text, body) in enumerate(zip(ex.texts, bodies, strict=True), 1):
            if not body:
                assert not text.strip(), f"{doc_id} p{n}"
                continue
            # each page holds its own first sentence words, not another page's
            head = " ".join(body.split()[:4])
            assert head in _norm(text), f"{doc_id} p{n} ({engine})"
            for m, other in enumerate(bodies, 1):
                if m != n and other:
                    assert " ".join(other.split()[:4]) not in _norm(text)


def test_engines_agree_on_words(safety_corpus: Path) -> None:
    a = extract_pdf(safety_corpus / "pdf" / "hse_ppe_at_work.pdf", "pypdfium2")
    b = extract_pdf(safety_corpus / "pdf" / "hse_ppe_at_work.pdf", "pypdf")
    assert [_norm(t) for t in a.texts] == [_norm(t) for t in b.texts]
    assert a.layouts == b.layouts  # layout always comes from PDFium


def test_unknown_engine(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown extraction engine 'tika'"):
        extract_pdf(pf.text_pdf(tmp_path / "d.pdf", ["x"]), "tika")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("build", "message"),
    [
        (pf.corrupt_pdf, "unreadable PDF"),
        (pf.empty_file, "empty file (0 bytes)"),
        (lambda p: pf.encrypted_pdf(p, "Locked text about permits."), "encrypted PDF: a password"),
        (lambda p: pf.image_only_pdf(p, 2), "image-only PDF: no extractable text on any of its 2 pages"),
    ],
    ids=["corrupt", "empty", "encrypted", "image_only"],
)
def test_bad_pdfs_raise_extraction_error(tmp_path: Path, engine: str, build, message: str) -> None:
    path = build(tmp_path / "bad.pdf")
    with pytest.raises(ExtractionError) as ei:
        extract_pdf(path, engine)
    assert message in str(ei.value)


def test_text_less_pdf_without_images(tmp_path: Path) -> None:
    with pytest.raises(ExtractionError, match="text-less PDF"):
        extract_pdf(pf.text_pdf(tmp_path / "blank.pdf", ["", ""]))


# ----------------------------------------------------------------------------- audit


def test_blank_page_is_low_text(safety_corpus: Path) -> None:
    ex = extract_pdf(safety_corpus / "pdf" / "confined_space_entry.pdf")
    audits = [audit_page(t, la) for t, la in zip(ex.texts, ex.layouts, strict=True)]
    assert audits[1].chars == 0 and audits[1].low_text_100 and audits[1].low_text_300
    assert not audits[0].low_text_100 and not audits[2].low_text_100
    assert not any(a.multi_column_risk or a.spacing_artifact or a.images for a in audits)


def test_low_text_thresholds() -> None:
    layout = PageLayout(images=0, lines=1, side_by_side_lines=0)
    assert audit_page("x" * 99, layout).low_text_100
    assert not audit_page("x" * 100, layout).low_text_100
    assert audit_page("x" * 299, layout).low_text_300
    assert not audit_page("  " + "x" * 300 + "\n", layout).low_text_300


def test_image_page_in_mixed_pdf(tmp_path: Path) -> None:
    text = "Lockout and tagout procedures protect workers during servicing. " * 4
    ex = extract_pdf(pf.mixed_pdf(tmp_path / "mixed.pdf", [text, None, text]))
    audits = [audit_page(t, la) for t, la in zip(ex.texts, ex.layouts, strict=True)]
    assert audits[1].images > 0 and audits[1].low_text_100 and audits[1].chars == 0
    for a in (audits[0], audits[2]):
        assert a.images == 0 and not a.low_text_100


def test_two_column_page_is_multi_column_risk(safety_corpus: Path) -> None:
    ex = extract_pdf(safety_corpus / "pdf" / "machine_guarding.pdf")
    for n, (text, layout) in enumerate(zip(ex.texts, ex.layouts, strict=True), 1):
        assert multi_column_risk(layout), f"machine_guarding p{n}: {layout}"
        assert audit_page(text, layout).multi_column_risk


def test_single_column_pages_are_not_multi_column(safety_corpus: Path) -> None:
    for doc_id in ("loto_energy_control", "confined_space_entry", "hse_ppe_at_work"):
        ex = extract_pdf(safety_corpus / "pdf" / f"{doc_id}.pdf")
        assert not any(multi_column_risk(la) for la in ex.layouts), (doc_id, ex.layouts)


def test_multi_column_rule_thresholds() -> None:
    assert multi_column_risk(PageLayout(images=0, lines=20, side_by_side_lines=4))
    assert not multi_column_risk(PageLayout(images=0, lines=20, side_by_side_lines=3))
    assert not multi_column_risk(PageLayout(images=0, lines=40, side_by_side_lines=7))  # < 20%
    assert multi_column_risk(PageLayout(0, 30, 0, left_column_rects=5, right_column_rects=6))
    assert not multi_column_risk(PageLayout(0, 30, 0, left_column_rects=12, right_column_rects=4))


def test_spacing_artifact_on_letter_spaced_pdf(tmp_path: Path) -> None:
    spaced = " ".join("Lockout devices must be applied by the authorized employee.".replace(" ", ""))
    ex = extract_pdf(
        pf.text_pdf(
            tmp_path / "spaced.pdf",
            [spaced, "Lockout devices must be applied by the authorized employee before work."],
        )
    )
    assert audit_page(ex.texts[0], ex.layouts[0]).spacing_artifact
    assert not audit_page(ex.texts[1], ex.layouts[1]).spacing_artifact


def test_spacing_artifact_rules() -> None:
    assert spacing_artifact("s a f e t y " * 5)
    assert not spacing_artifact("Class I Division 2 locations need a hot work permit before welding. " * 5)
    glued = "lockoutdevicesmustbeappliedbyauthorized " * 3 + "normal words here " * 6
    assert spacing_artifact(glued)
    urls = "see https://www.osha.gov/laws-regs/regulations/standardnumber/1910 " * 3 + "word " * 20
    assert not spacing_artifact(urls)


def test_contents_page_flag() -> None:
    from sourcepage.corpus.audit import contents_page

    toc = (
        "Contents\nWhat is lockout? ............ 3\nWho is affected?.......... 7\nTraining . . . . . . . 12\n"
    )
    assert contents_page(toc)
    assert not contents_page("What is lockout? ............ 3\nOnly two... 4\n")
    assert not contents_page("Employees must apply locks. Devices must be durable. See page 12.")


def test_dot_leaders_are_not_spacing_artifacts() -> None:
    toc = "\n".join(
        f"What are the employer requirements number {i}?......................{i}" for i in range(30)
    )
    assert not spacing_artifact(toc)


def _row(doc_id: str, page_no: int, chars: int, **flags: int) -> dict:
    from sourcepage.corpus.audit import AUDIT_FLAGS

    return {"doc_id": doc_id, "page_no": page_no, "chars": chars, **dict.fromkeys(AUDIT_FLAGS, 0), **flags}


def test_summarize_audit_counts_flagged_pages_per_document() -> None:
    from sourcepage.corpus.audit import page_flags, summarize_audit

    rows = [
        _row("b", 1, 50, low_text_100=1, low_text_300=1),
        _row("b", 2, 250, low_text_300=1, images=3),
        _row("a", 1, 1000, multi_column_risk=1, contents_page=1),
    ]
    docs, total = summarize_audit(rows)
    assert [d.doc_id for d in docs] == ["b", "a"]  # row order, as the store lists them
    b = docs[0]
    assert b.pages == 2 and b.chars_per_page == 150
    assert b.counts == {
        "low_text_100": 1,
        "low_text_300": 2,
        "images": 1,  # pages with images, not images
        "multi_column_risk": 0,
        "spacing_artifact": 0,
        "contents_page": 0,
        "ocr": 0,  # pages read by OCR (ocr_confidence set)
    }
    assert total.doc_id == "all" and total.pages == 3 and total.chars_per_page == pytest.approx(1300 / 3)
    assert total.counts["low_text_300"] == 2 and total.counts["contents_page"] == 1
    assert page_flags(rows[2]) == ["multi_column_risk", "contents_page"] and page_flags(_row("c", 1, 9)) == []
    empty_docs, empty_total = summarize_audit([])
    assert empty_docs == [] and empty_total.pages == 0 and empty_total.chars_per_page == 0


def test_audit_csv_and_the_store(safety_store: Path) -> None:
    import csv
    import io

    from sourcepage.corpus.audit import audit_csv, summarize_audit
    from sourcepage.store.db import Store

    st = Store(safety_store)
    rows = st.page_rows()
    st.close()
    docs, total = summarize_audit(rows)
    assert total.pages == 11 and len(docs) == 4
    assert total.counts["low_text_100"] == 1  # the blank page
    parsed = list(csv.DictReader(io.StringIO(audit_csv(rows))))
    assert len(parsed) == 11 and parsed[0]["page"] == f"{rows[0]['doc_id']}#p{rows[0]['page_no']}"
    assert list(parsed[0])[:3] == ["page", "doc_id", "page_no"]
    assert audit_csv([]).strip() == "page"
