"""Checks that the PDF fixtures in ``pdf_factory`` are what they claim to be."""

from __future__ import annotations

import csv
import hashlib
import io
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
import pytest
from pypdf import PdfReader

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pdf_factory as pf  # noqa: E402

# ----------------------------------------------------------------------------- helpers


def page_texts(path: Path, password: str | None = None) -> list[str]:
    doc = pdfium.PdfDocument(str(path), password=password)
    try:
        return [page.get_textpage().get_text_range() for page in doc]
    finally:
        doc.close()


def norm(text: str) -> str:
    return " ".join(text.split())


def image_counts(path: Path) -> list[int]:
    doc = pdfium.PdfDocument(str(path))
    try:
        return [len(list(page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE]))) for page in doc]
    finally:
        doc.close()


def read_manifest(corpus: Path) -> tuple[list[str], list[dict[str, str]]]:
    with (corpus / "manifest.csv").open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), list(reader)


def tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def build_all(root: Path) -> Path:
    """Every builder once, into ``root`` (used for the determinism checks)."""
    pf.text_pdf(root / "text.pdf", ["alpha page", "", "gamma page"], header="H", footer="Guide — page {n}")
    pf.two_column_pdf(root / "two.pdf", [("left side", "right side")])
    pf.hyphenated_pdf(root / "hyph.pdf", ["the energy-iso-", "lating device"])
    pf.image_only_pdf(root / "image.pdf", n_pages=2)
    pf.mixed_pdf(root / "mixed.pdf", ["first", None, "third"])
    pf.corrupt_pdf(root / "corrupt.pdf")
    pf.empty_file(root / "empty.pdf")
    pf.encrypted_pdf(root / "enc.pdf", "locked text")
    pf.safety_corpus(root / "corpus")
    return root


# ----------------------------------------------------------------------------- text_pdf


def test_text_pdf_pages_header_footer_and_blank(tmp_path: Path) -> None:
    out = pf.text_pdf(
        tmp_path / "doc.pdf",
        ["First page about lockout.", "Second page about guarding.", "", "Fourth page."],
        header="Running Header",
        footer="Safety Guide — page {n}",
    )
    assert out == tmp_path / "doc.pdf"
    texts = page_texts(out)
    assert len(texts) == 4
    assert "First page about lockout." in texts[0]
    assert "Second page about guarding." in texts[1]
    assert "Fourth page." in texts[3]
    assert "lockout" not in texts[1] and "guarding" not in texts[0]
    for n, text in enumerate(texts, start=1):
        assert "Running Header" in text
        assert f"Safety Guide — page {n}" in text
    # extraction order: header, body, footer
    assert texts[0].index("Running Header") < texts[0].index("First") < texts[0].index("Safety Guide")
    # blank body page carries only header/footer
    assert norm(texts[2]) == "Running Header Safety Guide — page 3"


def test_text_pdf_blank_page_has_no_text(tmp_path: Path) -> None:
    texts = page_texts(pf.text_pdf(tmp_path / "b.pdf", ["Some words here.", ""]))
    assert len(texts) == 2
    assert texts[1].strip() == ""
    assert image_counts(tmp_path / "b.pdf") == [0, 0]


def test_text_pdf_wraps_long_text_within_page(tmp_path: Path) -> None:
    sentence = "Each worker attaches a personal lock to the group lockbox. "
    out = pf.text_pdf(tmp_path / "long.pdf", [sentence * 15])
    doc = pdfium.PdfDocument(str(out))
    page = doc[0]
    width = page.get_width()
    textpage = page.get_textpage()
    assert norm(textpage.get_text_range()) == norm(sentence * 15)
    assert textpage.get_text_range().count("\n") >= 5  # really wrapped
    for i in range(textpage.count_chars()):
        left, _bottom, right, _top = textpage.get_charbox(i)
        assert 0 <= left and right <= width
    doc.close()


def test_text_pdf_rejects_text_that_overflows_a_page(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="do not fit"):
        pf.text_pdf(tmp_path / "too_long.pdf", ["word " * 5000])


# ----------------------------------------------------------------------------- layouts


def test_two_column_pdf(tmp_path: Path) -> None:
    left = "Point of operation guards keep hands out of the danger zone. " * 3
    right = "Light curtains stop the machine when the light field is broken. " * 3
    out = pf.two_column_pdf(tmp_path / "two.pdf", [(left, right), ("Page two left", "and right")])
    texts = page_texts(out)
    assert len(texts) == 2
    first = norm(texts[0])
    assert first.index("Point of operation") < first.index("Light curtains")
    assert norm(left) in first and norm(right) in first
    assert norm(texts[1]) == "Page two left and right"

    # the columns really sit side by side: right column chars start right of the middle
    doc = pdfium.PdfDocument(str(out))
    page = doc[0]
    textpage = page.get_textpage()
    middle = page.get_width() / 2
    raw = textpage.get_text_range()
    first_right = raw.index("Light")
    assert textpage.get_charbox(0)[0] < middle
    assert textpage.get_charbox(first_right)[0] > middle
    # both columns start at the same height
    assert abs(textpage.get_charbox(0)[3] - textpage.get_charbox(first_right)[3]) < 1
    doc.close()


def test_hyphenated_pdf_keeps_lines_exactly(tmp_path: Path) -> None:
    lines = ["Isolate the machine with the energy-iso-", "lating device before servicing."]
    out = pf.hyphenated_pdf(tmp_path / "h.pdf", lines)
    # pypdf keeps the raw line structure
    assert PdfReader(out).pages[0].extract_text().splitlines() == lines
    # pdfium marks a line-end hyphen (U+FFFE) and joins the lines
    text = page_texts(out)[0]
    assert re.search(r"energy-iso[-\ufffe\u00ad]\s*lating device", text), repr(text)


# ----------------------------------------------------------------------------- images


def test_image_only_pdf_has_images_and_no_text(tmp_path: Path) -> None:
    out = pf.image_only_pdf(tmp_path / "scan.pdf", n_pages=3)
    texts = page_texts(out)
    assert len(texts) == 3
    assert all(t.strip() == "" for t in texts)
    assert image_counts(out) == [1, 1, 1]


def test_image_only_pdf_without_pillow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pf, "_pil_available", lambda: False)
    out = pf.image_only_pdf(tmp_path / "scan_nopil.pdf")
    assert page_texts(out) == [""]
    assert image_counts(out) == [1]
    # the inline image actually paints dark pixels
    doc = pdfium.PdfDocument(str(out))
    bitmap = doc[0].render(scale=0.25, grayscale=True)
    assert min(bytes(bitmap.buffer)) < 100
    doc.close()


def test_mixed_pdf_has_one_image_only_page(tmp_path: Path) -> None:
    out = pf.mixed_pdf(tmp_path / "mixed.pdf", ["Hearing protection page.", None, "Last page."])
    texts = page_texts(out)
    assert len(texts) == 3
    assert "Hearing protection page." in texts[0]
    assert texts[1].strip() == ""
    assert "Last page." in texts[2]
    assert image_counts(out) == [0, 1, 0]


def test_png_bytes_is_a_valid_png() -> None:
    pil_image = pytest.importorskip("PIL.Image")
    data = pf._png_bytes(4, 3, bytes(range(12)))
    with pil_image.open(io.BytesIO(data)) as im:
        assert im.size == (4, 3)
        assert im.mode == "L"
        assert im.tobytes() == bytes(range(12))


# ----------------------------------------------------------------------------- broken files


def test_corrupt_pdf_fails_to_open(tmp_path: Path) -> None:
    out = pf.corrupt_pdf(tmp_path / "corrupt.pdf")
    data = out.read_bytes()
    assert data.startswith(b"%PDF-")
    assert b"%%EOF" not in data
    with pytest.raises(pdfium.PdfiumError):
        pdfium.PdfDocument(str(out))


def test_empty_file(tmp_path: Path) -> None:
    out = pf.empty_file(tmp_path / "empty.pdf")
    assert out.stat().st_size == 0
    with pytest.raises(pdfium.PdfiumError):
        pdfium.PdfDocument(str(out))


def test_encrypted_pdf_needs_password(tmp_path: Path) -> None:
    out = pf.encrypted_pdf(tmp_path / "enc.pdf", "Confined space rescue plan.", password="pw123")
    with pytest.raises(pdfium.PdfiumError):
        pdfium.PdfDocument(str(out))
    with pytest.raises(pdfium.PdfiumError):
        pdfium.PdfDocument(str(out), password="wrong")
    assert "Confined space rescue plan." in page_texts(out, password="pw123")[0]
    reader = PdfReader(out)
    assert reader.is_encrypted
    assert b"Confined space" not in out.read_bytes()


# ----------------------------------------------------------------------------- manifest


def test_write_manifest_columns_defaults_and_hashes(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    pf.text_pdf(corpus / "pdf" / "a.pdf", ["one", "two"])
    pf.corrupt_pdf(corpus / "pdf" / "bad.pdf")
    path = pf.write_manifest(
        corpus,
        [
            {
                "doc_id": "a",
                "file": "a.pdf",
                "title": "Doc A",
                "topic": "loto",
                "project_type": "bridge",
            },
            {"doc_id": "bad", "file": "bad.pdf", "phase": "design", "year": ""},
            {"doc_id": "missing", "pages": 7, "sha256": "0" * 64},
        ],
    )
    assert path == corpus / "manifest.csv"
    assert path.read_bytes().startswith(b"doc_id,file,title,topic,authority,")
    header, rows = read_manifest(corpus)
    assert header == [*pf.MANIFEST_COLUMNS, "project_type", "phase"]
    a, bad, missing = rows
    assert a["sha256"] == hashlib.sha256((corpus / "pdf/a.pdf").read_bytes()).hexdigest()
    assert a["pages"] == "2"
    assert a["project_type"] == "bridge" and a["phase"] == ""
    for key, value in pf.MANIFEST_DEFAULTS.items():
        if key != "topic":
            assert a[key] == value
    assert a["authority"] == "Test Authority" and a["jurisdiction"] == "US"
    assert a["license"] == "CC0" and a["found_in"] == "generated by tests"
    assert bad["sha256"] == hashlib.sha256((corpus / "pdf/bad.pdf").read_bytes()).hexdigest()
    assert bad["pages"] == ""  # unreadable
    assert bad["year"] == ""  # explicit empty value kept
    assert bad["title"] and bad["topic"]
    assert missing["file"] == "missing.pdf"
    assert missing["sha256"] == "0" * 64 and missing["pages"] == "7"


# ----------------------------------------------------------------------------- safety corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pf.safety_corpus(tmp_path_factory.mktemp("safety") / "corpus")


def test_safety_corpus_manifest(corpus: Path) -> None:
    header, rows = read_manifest(corpus)
    assert header == [*pf.MANIFEST_COLUMNS, "project_type"]
    by_id = {r["doc_id"]: r for r in rows}
    assert list(by_id) == list(pf.SAFETY_CORPUS_DOCS)
    for doc_id, row in by_id.items():
        pdf = corpus / "pdf" / row["file"]
        assert re.fullmatch(r"[a-z0-9][a-z0-9_-]*", doc_id)
        assert row["sha256"] == hashlib.sha256(pdf.read_bytes()).hexdigest()
        assert int(row["pages"]) == len(page_texts(pdf)) == len(pf.SAFETY_CORPUS_DOCS[doc_id])
        assert row["project_type"]
        assert row["role"] in {"primary", "supporting"}
    assert {r["topic"] for r in rows} == {"loto", "machine_guarding", "confined_spaces", "ppe"}
    uk = [r for r in rows if r["jurisdiction"] == "UK"]
    assert [(r["doc_id"], r["authority"]) for r in uk] == [("hse_ppe_at_work", "HSE")]


def test_safety_corpus_page_text(corpus: Path) -> None:
    texts = {doc_id: page_texts(corpus / "pdf" / f"{doc_id}.pdf") for doc_id in pf.SAFETY_CORPUS_DOCS}
    for doc_id, pages in pf.SAFETY_CORPUS_DOCS.items():
        for n, body in enumerate(pages, start=1):
            extracted = norm(texts[doc_id][n - 1].replace("\ufffe", "-"))
            if not body:
                assert extracted == "", (doc_id, n)
                continue
            assert 400 <= len(body) <= 1200, (doc_id, n, len(body))
            for line in body.split("\n"):
                assert norm(line) in extracted, (doc_id, n, line)

    # distinctive phrases sit on exactly one page of the corpus
    where = {
        "group lockbox": ("loto_energy_control", 2),
        "point of operation guards": ("machine_guarding", 1),
        "atmospheric testing before entry of a permit-required confined space": (
            "confined_space_entry",
            3,
        ),
        "hearing protection": ("hse_ppe_at_work", 2),
        "tongue guard": ("machine_guarding", 2),
        "face-fit test": ("hse_ppe_at_work", 3),
    }
    for phrase, expected in where.items():
        hits = [
            (doc_id, n)
            for doc_id, pages in texts.items()
            for n, text in enumerate(pages, start=1)
            if phrase in norm(text).lower()
        ]
        assert hits == [expected], (phrase, hits)


def test_safety_corpus_layout_features(corpus: Path) -> None:
    loto = page_texts(corpus / "pdf" / "loto_energy_control.pdf")
    for n, text in enumerate(loto, start=1):
        assert pf.LOTO_HEADER in text
        assert f"Safety Guide — page {n}" in text
    assert re.search(r"energy-iso[-\ufffe]\s*lating device", loto[0])
    assert "energy-iso-\nlating" in PdfReader(corpus / "pdf/loto_energy_control.pdf").pages[0].extract_text()

    confined = page_texts(corpus / "pdf" / "confined_space_entry.pdf")
    assert confined[1] == ""
    assert image_counts(corpus / "pdf" / "confined_space_entry.pdf") == [0, 0, 0]

    doc = pdfium.PdfDocument(str(corpus / "pdf" / "machine_guarding.pdf"))
    for page in doc:
        textpage = page.get_textpage()
        xs = [textpage.get_charbox(i)[0] for i in range(textpage.count_chars())]
        middle = page.get_width() / 2
        assert any(x < middle - 20 for x in xs) and any(x > middle + 5 for x in xs)
    doc.close()


# ----------------------------------------------------------------------------- determinism


def test_builds_are_byte_identical(tmp_path: Path) -> None:
    first = tree_hashes(build_all(tmp_path / "one"))
    second = tree_hashes(build_all(tmp_path / "two"))
    assert len(first) == 13  # 8 single files + manifest.csv + 4 corpus PDFs
    assert first == second


def test_builds_are_identical_across_processes(tmp_path: Path) -> None:
    here = tree_hashes(build_all(tmp_path / "here"))
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
        import test_pdf_factory as t
        t.build_all(Path({str(tmp_path / "there")!r}))
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    assert tree_hashes(tmp_path / "there") == here
