"""Printed page labels: the page number a reader of the paper copy sees.

A PDF may carry page labels (``/PageLabels``, read through PDFium); none of the study's
corpora do, so the label is otherwise read from the page itself: the numbers standing in
the first or last lines of each page ("8 Control of Hazardous Energy…", "Code of Practice
Page 28 of 72", a bare "11"). A number is a page number only when it agrees with many
other pages: its physical page minus the number (the offset) is the document's most
common one. Pages from the first to the last page that shows that offset are labelled
(a page between them without a printed number still has one in print); lower-case roman
numbers before them (front matter) are found the same way. Hand-written here because no
library reads printed page numbers from text.

``citation`` spells a page reference for people: "osha3120 p. 8 (PDF p. 14)".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import pypdfium2 as pdfium

from sourcepage.store.db import Store

#: how many non-empty lines at the top and at the bottom of a page may hold its number
EDGE_LINES = 3
#: the fewest pages that must agree on an offset (and at least this share of the pages)
MIN_PAGES = 3
MIN_SHARE = 0.2

_ARABIC = (
    re.compile(r"^(?:page\s+)?(\d{1,4})(?:\s+of\s+\d{1,4})?$", re.I),  # "11", "Page 3 of 9"
    re.compile(r"\bpage\s+(\d{1,4})(?:\s+of\s+\d{1,4})?$", re.I),  # "… | Page 11 of 41"
    re.compile(r"^(\d{1,4})\s+[A-Z][^.!?]*$"),  # "8 Control of Hazardous Energy"
    re.compile(r"^[A-Z][^.!?]*?\s(\d{1,4})$"),  # "SAFEGUARDING … AMPUTATIONS 9"
)
_ROMAN = (
    re.compile(r"^(?:page\s+)?([ivxl]{1,7})$", re.I),
    re.compile(r"^([ivxl]{1,7})\s+[A-Z][^.!?]*$"),
    re.compile(r"^[A-Z][^.!?]*?\s([ivxl]{1,7})$"),
)
_ROMAN_VALUES = {"i": 1, "v": 5, "x": 10, "l": 50}


def roman_value(s: str) -> int | None:
    """The value of a lower-case roman number ("xiv" → 14), None when it is not one."""
    s = s.lower()
    if not s or any(c not in _ROMAN_VALUES for c in s):
        return None
    total = 0
    for a, b in zip(s, s[1:] + " ", strict=True):
        v = _ROMAN_VALUES[a]
        total += -v if b in _ROMAN_VALUES and _ROMAN_VALUES[b] > v else v
    return total if total > 0 and to_roman(total) == s else None


def to_roman(n: int) -> str:
    """Lower-case roman numeral of 1 ≤ n < 90."""
    out = ""
    for value, sym in ((50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")):
        while n >= value:
            out, n = out + sym, n - value
    return out


def _edge_lines(text: str) -> list[str]:
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    edges = lines[:EDGE_LINES] + lines[-EDGE_LINES:] if len(lines) > 2 * EDGE_LINES else lines
    return [ln for ln in edges if len(ln) <= 120]


def _candidates(text: str, roman: bool) -> set[int]:
    """Numbers that may be the printed page number of a page (from its edge lines)."""
    out: set[int] = set()
    for line in _edge_lines(text):
        for pattern in _ROMAN if roman else _ARABIC:
            m = pattern.search(line)
            if not m:
                continue
            value = roman_value(m.group(1)) if roman else int(m.group(1))
            if value:
                out.add(value)
    return out


def _best_offset(pages: Sequence[str], roman: bool, upto: int) -> tuple[int, list[int]] | None:
    """The offset (physical − printed) most pages among the first ``upto`` agree on, and
    those pages (1-based), or None when too few agree."""
    support: dict[int, list[int]] = {}
    for i, text in enumerate(pages[:upto], 1):
        for v in _candidates(text, roman):
            if i - v >= 0:
                support.setdefault(i - v, []).append(i)
    if not support:
        return None
    counts = Counter({o: len(p) for o, p in support.items()})
    offset = max(counts, key=lambda o: (counts[o], -abs(o), -o))
    need = 2 if roman else max(MIN_PAGES, MIN_SHARE * len(pages))
    if counts[offset] < need:
        return None
    return offset, support[offset]


def detect_labels(pages: Sequence[str]) -> list[str]:
    """The printed label of each page ('' where none is printed or inferable)."""
    labels = [""] * len(pages)
    arabic = _best_offset(pages, roman=False, upto=len(pages))
    first = len(pages) + 1
    if arabic:
        offset, found = arabic
        first = found[0]
        for i in range(found[0], found[-1] + 1):
            labels[i - 1] = str(i - offset)
    roman = _best_offset(pages, roman=True, upto=first - 1)
    if roman:
        offset, found = roman
        for i in range(found[0], found[-1] + 1):
            if i - offset < 90:
                labels[i - 1] = to_roman(i - offset)
    if arabic:  # the unnumbered first pages of the arabic run (a chapter opening on "1")
        offset = arabic[0]
        i = first - 1
        while i >= 1 and i - offset >= 1 and not labels[i - 1]:
            labels[i - 1] = str(i - offset)
            i -= 1
    return labels


def pdf_labels(pdf: pdfium.PdfDocument) -> list[str] | None:
    """The PDF's own page labels (``/PageLabels``), or None when it has none."""
    labels = [pdf.get_page_label(i) or "" for i in range(len(pdf))]
    return labels if any(labels) else None


def page_labels(pdf: pdfium.PdfDocument | None, pages: Sequence[str]) -> list[str]:
    """The PDF's page labels where it has them, else the ones read from the page texts."""
    labels = pdf_labels(pdf) if pdf is not None else None
    return labels if labels is not None else detect_labels(pages)


def citation(doc_id: str, page_number: int, page_label: str = "") -> str:
    """A page reference a reader can follow in print and in the PDF:
    ``osha3120 p. 8 (PDF p. 14)``; ``osha3120 p.14`` (the physical page, as before
    labels were read) when no printed number is known or it is the physical one."""
    if not page_label or page_label == str(page_number):
        return f"{doc_id} p.{page_number}"
    return f"{doc_id} p. {page_label} (PDF p. {page_number})"


def labels_from_text(texts: list[str]) -> list[str]:
    """Printed page labels read from the page texts (a source without a PDF: text files;
    a one-page BEIR document has none)."""
    return detect_labels(texts) if len(texts) >= MIN_PAGES else [""] * len(texts)


def refresh_page_labels(store: Store) -> int:
    """Read the printed page labels of every stored document when a store migration left
    them pending (schema 4 → 5); returns how many pages got a label."""
    pending = store.pages_needing_labels()
    if not pending and store.get_meta("page_labels_pending") is None:
        return 0
    labels = {d: labels_from_text(raw) for d, raw in pending.items()}
    store.set_page_labels(labels)
    return sum(1 for labs in labels.values() for lab in labs if lab)
