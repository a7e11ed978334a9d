"""Page layout / quality audit (study §3.2 "Extraction and Normalization Quality Controls").

Flags are automated risk indicators, not adjudicated labels: low text (<100 and
<300 characters, the study's cut-offs), embedded images, multi-column reading-order
risk, spacing artifacts (letter-spaced or glued words), and contents pages.
``summarize_audit`` condenses a store's page rows per document (``sourcepage audit``).
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sourcepage.records import PageAudit, PageLayout, page_id
from sourcepage.store.db import Store

_TOKEN = re.compile(r"\S+")


def spacing_artifact(text: str) -> bool:
    """True when words look letter-spaced ("s a f e t y") or glued ("lockoutdevicesmust").

    Letter-spacing: over 30% of alphabetic tokens are single letters (≥ 20 tokens).
    Gluing: over 5% of tokens are longer than 25 characters without a URL-like shape or a
    dot leader.
    """
    tokens = _TOKEN.findall(text)
    alpha = [t for t in tokens if t.isalpha()]
    if len(alpha) >= 20 and sum(len(t) == 1 for t in alpha) / len(alpha) > 0.30:
        return True
    # dot leaders of a contents page ("requirements?.........23") are not glued words
    long = [t for t in tokens if len(t) > 25 and "/" not in t and "..." not in t and "." not in t.strip(".")]
    return len(tokens) >= 20 and len(long) / len(tokens) > 0.05


_LEADER = re.compile(r"(?:\.\s*){4,}\d+\s*$")


def contents_page(text: str) -> bool:
    """True for a table of contents (or list of figures): at least 3 lines that end in a
    dot leader and a page number ("What is lockout? ........ 12"). Such a page names
    topics and page numbers but supports no answer, yet shares every topic word."""
    return sum(1 for line in text.split("\n") if _LEADER.search(line)) >= 3


def multi_column_risk(layout: PageLayout) -> bool:
    """True when text sits in two columns: at least 4 lines (and 20% of lines) with
    side-by-side rectangles, or at least 5 column-wide text runs in each half of the
    page making up 15% of the lines or more, or — columns interleaved in the text
    itself, as in OSHA 3170 — at least 3 PDFium text lines (and 8% of the lines of 20
    characters or more) wider than 1.6 × the median line, where one line joins text of
    two columns (``extract._line_widths``). Conservative: a risk flag, not a label."""
    n = max(layout.lines, 1)
    side = layout.side_by_side_lines >= 4 and layout.side_by_side_lines >= 0.2 * n
    cols = min(layout.left_column_rects, layout.right_column_rects)
    return side or (cols >= 5 and cols >= 0.15 * n) or interleaved_columns(layout)


#: the share of a page's text lines that must be wide for its columns to count as run
#: together: 0.08, not 0.1, so that OSHA 3170 (../shared/corpus) p.9, which a reader marked
#: as interleaved (4 wide lines of 42), is flagged; no page of the two OSHA corpora or of
#: corpus-intl changes flag between 0.1 and 0.08 besides three of that document's.
WIDE_SHARE = 0.08


def interleaved_columns(layout: PageLayout) -> bool:
    """True when the extracted text runs two columns together line by line: at least 3
    PDFium text lines (and ``WIDE_SHARE`` of the lines of 20 characters or more) wider
    than ``extract.WIDE_LINE`` × the median line."""
    return layout.wide_lines >= 3 and layout.wide_lines >= WIDE_SHARE * layout.text_lines


#: share of a page's visible characters that, when control or private-use, mark its text
#: as glyph codes of a font without a Unicode map (not words)
UNMAPPED_SHARE = 0.3


def unmapped_glyphs(text: str) -> bool:
    """True when at least 20 visible characters and ``UNMAPPED_SHARE`` of them are control
    (other than line ends and tabs) or private-use characters: such text was stored as
    ``ok`` and could be neither searched nor quoted (ingest warns, kind ``glyphs``)."""
    visible = [c for c in text if not c.isspace()]
    if len(visible) < 20:
        return False
    bad = sum(1 for c in visible if unicodedata.category(c) in ("Cc", "Co"))
    return bad / len(visible) >= UNMAPPED_SHARE


def audit_page(text: str, layout: PageLayout) -> PageAudit:
    """All flags for one page; ``chars`` counts non-whitespace-trimmed characters."""
    chars = len(text.strip())
    return PageAudit(
        chars=chars,
        images=layout.images,
        low_text_100=chars < 100,
        low_text_300=chars < 300,
        multi_column_risk=multi_column_risk(layout),
        spacing_artifact=spacing_artifact(text),
        contents_page=contents_page(text),
        interleaved_columns=interleaved_columns(layout),
    )


def refresh_contents_flags(store: Store) -> int:
    """Compute the contents-page flag of every stored page when a store migration left it
    pending (schema 1 → 2); returns how many pages were flagged."""
    rows = store.pages_needing_contents_flag()
    if not rows:
        return 0
    flags = [(int(contents_page(raw)), d, n) for d, n, raw in rows]
    store.set_contents_flags(flags)
    return sum(f for f, _, _ in flags)


#: the page flags of the store's audit, in the order ``sourcepage audit`` shows them
AUDIT_FLAGS = (
    "low_text_100",
    "low_text_300",
    "images",
    "multi_column_risk",
    "spacing_artifact",
    "contents_page",
    "ocr",
)


def _flag(row: Mapping[str, Any], key: str) -> bool:
    """One flag of a page row; ``ocr``: the page's text was read by OCR."""
    if key == "ocr":
        return row.get("ocr_confidence") is not None
    return bool(row[key])


@dataclass(frozen=True)
class AuditSummary:
    """Flag counts of one document (or of all, ``doc_id == "all"``): pages with each flag."""

    doc_id: str
    pages: int
    chars_per_page: float
    counts: dict[str, int]


def page_flags(row: Mapping[str, Any]) -> list[str]:
    """The flags (``AUDIT_FLAGS`` order) set on one page row of ``Store.page_rows``; an
    OCR'd page's flag carries its mean confidence (``ocr 92%``)."""
    return [f"ocr {row['ocr_confidence']:.0f}%" if k == "ocr" else k for k in AUDIT_FLAGS if _flag(row, k)]


def summarize_audit(rows: Sequence[Mapping[str, Any]]) -> tuple[list[AuditSummary], AuditSummary]:
    """Per-document summaries (in row order) and the total over every page row."""
    by_doc: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_doc.setdefault(r["doc_id"], []).append(r)
    docs = [
        AuditSummary(
            doc_id,
            len(rs),
            sum(r["chars"] for r in rs) / len(rs),
            {k: sum(1 for r in rs if _flag(r, k)) for k in AUDIT_FLAGS},
        )
        for doc_id, rs in by_doc.items()
    ]
    total = AuditSummary(
        "all",
        len(rows),
        sum(r["chars"] for r in rows) / max(len(rows), 1),
        {k: sum(d.counts[k] for d in docs) for k in AUDIT_FLAGS},
    )
    return docs, total


def audit_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """The page rows as CSV, led by a ``page`` column (``doc#pN``)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=["page", *rows[0].keys()] if rows else ["page"])
    w.writeheader()
    for r in rows:
        w.writerow({"page": page_id(r["doc_id"], r["page_no"]), **r})
    return buf.getvalue()
