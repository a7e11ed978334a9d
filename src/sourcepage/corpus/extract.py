"""PDF → text per physical page, plus the page geometry the audit needs.

pypdfium2 (Apache/BSD, PDFium) is the default engine; pypdf is available because
the study used it. Layout measurements (image objects, text-line rectangles) always
come from PDFium, whatever engine produced the text, so the audit does not change
with the engine.
"""

from __future__ import annotations

import hashlib
import logging
import re
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from sourcepage.corpus import structure
from sourcepage.corpus.audit import interleaved_columns
from sourcepage.corpus.columns import reorder_columns
from sourcepage.corpus.ocr import merge_text_layer, needs_ocr, ocr_page, tesseract_path
from sourcepage.corpus.pagelabels import page_labels
from sourcepage.limits import LimitExceeded
from sourcepage.records import PageLayout

ENGINES = ("pypdfium2", "pypdf")


class ExtractionError(Exception):
    """A document that cannot be ingested; the message says why in plain words."""


@dataclass(frozen=True)
class Extracted:
    """Per-page text and layout of one PDF, and the extraction time in seconds;
    ``ocr``: the mean OCR confidence (0–100) of each page read by OCR, None for the
    others; ``labels``: each page's printed label ('' when unknown); ``ordered``: a
    page's text in column order where the extraction ran its columns together;
    ``notices``: what a person should know about the extraction (pages that needed OCR it could not get)."""

    texts: list[str]
    layouts: list[PageLayout]
    seconds: float
    #: SHA-256 of the bytes the text was read from ('' for text in hand): ingest stores
    #: a document only when it equals the checksum its manifest row was validated with
    sha256: str = ""
    #: the PDF outline (level, page index, title) and PDFium's styled lines per page, for
    #: corpus.structure (empty for text sources)
    toc: list[tuple[int, int, str]] = field(default_factory=list)
    lines: list[list[structure.Line]] | None = None
    ocr: list[float | None] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    ordered: list[str | None] = field(default_factory=list)


def _layout(
    page: pdfium.PdfPage, textpage: pdfium.PdfTextPage, widths: list[float] | None = None
) -> PageLayout:
    """Count image objects, text lines, and the signatures of text columns.

    A line counts as side-by-side when PDFium reports two or more text rectangles at
    the same height, each at least 20% of the page wide, separated by a gap of at
    least 3% of the page width. Column rectangles are text runs at least 20% of the
    page wide that lie wholly in the left 55% (left column) or start right of 45%
    (right column) of the page.
    """
    width, _ = page.get_size()
    images = sum(1 for _ in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,), max_depth=3))
    rects = [textpage.get_rect(i) for i in range(textpage.count_rects())]
    lines: list[list[tuple[float, float, float, float]]] = []
    for r in sorted(rects, key=lambda r: (-(r[1] + r[3]) / 2, r[0])):
        mid = (r[1] + r[3]) / 2
        if lines and abs((lines[-1][0][1] + lines[-1][0][3]) / 2 - mid) <= 3.0:
            lines[-1].append(r)
        else:
            lines.append([r])
    side = 0
    for line in lines:
        wide = sorted((r for r in line if r[2] - r[0] >= 0.2 * width), key=lambda r: r[0])
        if any(b[0] - a[2] >= 0.03 * width for a, b in zip(wide, wide[1:], strict=False)):
            side += 1
    wide_rects = [r for r in rects if r[2] - r[0] >= 0.2 * width]
    left = sum(1 for r in wide_rects if r[2] <= 0.55 * width)
    right = sum(1 for r in wide_rects if r[0] >= 0.45 * width)
    widths = _line_widths(textpage) if widths is None else widths
    median = sorted(widths)[len(widths) // 2] if widths else 0.0
    return PageLayout(
        images=images,
        lines=len(lines),
        side_by_side_lines=side,
        left_column_rects=left,
        right_column_rects=right,
        text_lines=len(widths),
        wide_lines=sum(1 for w in widths if w > WIDE_LINE * median),
    )


#: a text line this many times wider than the page's median line holds two columns' text
WIDE_LINE = 1.6
#: a document whose columns run together on more than this share of its text pages …
MOST_PAGES = 0.5
#: … (pages with at least this many text lines) has its other pages measured against
#: its column width
TEXT_PAGE_LINES = 6


def run_together(layouts: list[PageLayout], widths: list[list[float]]) -> dict[int, int]:
    """Pages (index → wide lines) whose columns run together although the page alone does
    not show it: in a document where most text pages do (``interleaved_columns``), a page
    on which nearly every line joins two columns has a wide median line, so no line is
    wider than ``WIDE_LINE`` × its own median (the re-typeset OSHA 3170 of
    ../shared/corpus: pp. 31, 40 and 15 others read as two sentences on every line, and
    were quoted as answers). Those pages are measured against the document's column
    width instead: the median line of the pages that do show it."""
    text_pages = [i for i, w in enumerate(widths) if len(w) >= TEXT_PAGE_LINES]
    shown = [i for i in text_pages if interleaved_columns(layouts[i])]
    if len(shown) < 3 or len(shown) <= MOST_PAGES * len(text_pages):
        return {}
    column = statistics.median(statistics.median(widths[i]) for i in shown)
    out = {}
    for i in text_pages:
        if i in shown:
            continue
        wide = sum(1 for w in widths[i] if w > WIDE_LINE * column)
        layout = replace(layouts[i], wide_lines=wide)
        if interleaved_columns(layout):
            out[i] = wide
    return out


def _line_widths(textpage: pdfium.PdfTextPage) -> list[float]:
    """Width in points of every PDFium text line of 20 characters or more: from the left
    edge of its first character to the right edge of its last (two character boxes a
    line, so the audit stays cheap). Where PDFium reads two columns across, as in OSHA
    3170's text, a line joins a left-column line and a right-column line, so the widths
    fall into two groups, one about twice the other; a one-column or a correctly ordered
    two-column page has lines of about one width."""
    text = textpage.get_text_range()
    if len(text) != textpage.count_chars():  # characters outside the BMP shift the indexes
        return []
    out: list[float] = []
    for m in re.finditer(r"[^\r\n]+", text):
        line = m.group(0)
        body = line.strip()
        if len(body) < 20:
            continue
        first = m.start() + (len(line) - len(line.lstrip()))
        last = m.start() + len(line.rstrip()) - 1
        x0 = textpage.get_charbox(first)[0]
        x1 = textpage.get_charbox(last)[2]
        if x1 > x0:
            out.append(x1 - x0)
    return out


def _open(data: bytes) -> pdfium.PdfDocument:
    if not data:
        raise ExtractionError("empty file (0 bytes)")
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        msg = str(e).lower()
        if "password" in msg:
            raise ExtractionError("encrypted PDF: a password is required to open it") from e
        if _page_count(data) == 0:  # PDFium refuses an empty page tree with "Success"
            raise ExtractionError("PDF has no pages") from e
        raise ExtractionError(f"unreadable PDF ({e})") from e


def _page_count(data: bytes) -> int | None:
    """Pages in the page tree as pypdf reads it, None when pypdf cannot read it either."""
    import io

    import pypdf

    try:
        return len(pypdf.PdfReader(io.BytesIO(data)).pages)
    except Exception:  # pypdf raises many types on damaged files
        return None


def _pypdf_texts(data: bytes, n_pages: int) -> list[str]:
    import io

    import pypdf

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # font warnings on real OSHA PDFs
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ExtractionError("encrypted PDF: a password is required to open it")
        texts = [(p.extract_text() or "") for p in reader.pages]
    except ExtractionError:
        raise
    except Exception as e:  # pypdf raises many types on damaged files
        raise ExtractionError(f"pypdf could not read the PDF ({type(e).__name__}: {e})") from e
    if len(texts) != n_pages:
        raise ExtractionError(f"pypdf sees {len(texts)} pages, PDFium sees {n_pages}")
    return texts


def check_pages(n: int, max_pages: int | None) -> None:
    """LimitExceeded when a document has more than ``max_pages`` pages."""
    if max_pages is not None and n > max_pages:
        raise LimitExceeded("pages", f"{n} pages, over the page limit of {max_pages}")


def extract_pdf(path: str | Path, engine: str = "pypdfium2", max_pages: int | None = None) -> Extracted:
    """Extract every physical page of ``path``; OCR its scanned pages (``corpus.ocr``) and
    read its printed page labels (``corpus.pagelabels``).

    Raises ExtractionError for a corrupt, encrypted, empty (0 pages) or image-only
    PDF without readable text on any page (after OCR, when tesseract is installed),
    LimitExceeded for a PDF of more than ``max_pages`` pages (checked before any page
    is read). Line ends are normalised to ``\\n``; nothing else is changed (that is the
    raw text version).
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown extraction engine {engine!r}; choose from {ENGINES}")
    path = Path(path)
    t0 = time.perf_counter()
    # read once: the checksum and the text come from the same bytes (a file replaced
    # between two reads was stored with one file's checksum and the other's text)
    data = path.read_bytes()
    pdf = _open(data)
    try:
        n = len(pdf)
        if n == 0:
            raise ExtractionError("PDF has no pages")
        check_pages(n, max_pages)
        texts: list[str] = []
        layouts: list[PageLayout] = []
        toc, lines = structure.outline(pdf), []
        ordered: list[str | None] = []
        widths: list[list[float]] = []
        for i in range(n):
            page = pdf[i]
            tp = page.get_textpage()
            if engine == "pypdfium2":
                texts.append(tp.get_text_range())
            widths.append(_line_widths(tp))
            layouts.append(_layout(page, tp, widths[-1]))
            lines.append(structure.page_lines(tp))
            ordered.append(column_order(page, tp, layouts[-1]))
            tp.close()
            page.close()
        for i, wide in run_together(layouts, widths).items():
            layouts[i] = replace(layouts[i], wide_lines=wide)
            page = pdf[i]
            tp = page.get_textpage()
            ordered[i] = column_order(page, tp, layouts[i])
            tp.close()
            page.close()
        if engine == "pypdf":
            texts = _pypdf_texts(data, n)
        texts = [t.replace("\r\n", "\n").replace("\r", "\n") for t in texts]
        texts, ocr, notices = read_scanned_pages(pdf, texts, layouts)
        labels = page_labels(pdf, texts)
    finally:
        pdf.close()
    if not any(t.strip() for t in texts):
        kind = "image-only" if any(la.images for la in layouts) else "text-less"
        why = "; ".join(notices) or "no OCR"
        raise ExtractionError(f"{kind} PDF: no extractable text on any of its {n} pages ({why})")
    ordered = [None if c is not None else o for o, c in zip(ordered, ocr, strict=True)]
    sha = hashlib.sha256(data).hexdigest()
    return Extracted(texts, layouts, time.perf_counter() - t0, sha, toc, lines, ocr, labels, notices, ordered)


def column_order(page: pdfium.PdfPage, tp: pdfium.PdfTextPage, layout: PageLayout) -> str | None:
    """The page's text re-read column by column (``corpus.columns``) when the audit finds
    its columns run together in the extracted text; None otherwise."""
    if not interleaved_columns(layout):
        return None
    text = reorder_columns(tp, page.get_size()[0])
    return text.replace("\r\n", "\n").replace("\r", "\n") if text else None


def read_scanned_pages(
    pdf: pdfium.PdfDocument, texts: list[str], layouts: list[PageLayout]
) -> tuple[list[str], list[float | None], list[str]]:
    """OCR every page that looks scanned (``ocr.needs_ocr``): its text becomes the OCR
    text led by the text-layer lines OCR did not read. Returns the page texts, each
    page's OCR confidence (None: not OCR'd) and notices (tesseract missing or failing)."""
    todo = [i for i, (t, la) in enumerate(zip(texts, layouts, strict=True)) if needs_ocr(t, la.images)]
    ocr: list[float | None] = [None] * len(texts)
    if not todo:
        return texts, ocr, []
    pages = ", ".join(str(i + 1) for i in todo[:10]) + (" …" if len(todo) > 10 else "")
    tesseract = tesseract_path()
    if tesseract is None:
        return (
            texts,
            ocr,
            [
                f"{len(todo)} scanned page(s) (images, almost no text: p. {pages}) were not read: "
                "tesseract is not installed (apt-get install tesseract-ocr, then ingest --force)"
            ],
        )
    out, notices, unread = list(texts), [], []
    for i in todo:
        page = pdf[i]
        try:
            read = ocr_page(page, tesseract)
        except RuntimeError as e:
            notices.append(f"OCR of p. {i + 1} failed: {e}")
            continue
        finally:
            page.close()
        if read.text.strip():
            out[i] = merge_text_layer(texts[i], read.text)
            ocr[i] = read.confidence
        else:
            unread.append(str(i + 1))
    if unread:
        notices.append(f"OCR read no text on p. {', '.join(unread)}")
    return out, ocr, notices
