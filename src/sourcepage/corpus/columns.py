"""Reading order of two-column pages whose extracted text runs the columns together.

Where PDFium joins a left-column line and the right-column line at the same height into
one text line (the audit's ``interleaved_columns``), the page's character boxes still
say which column each character stands in. ``reorder_columns`` finds the gutter (a
vertical strip in the middle of the page that almost no text line crosses) and rebuilds
the text: left column, then right column, with full-width lines (a title, a footer)
kept where they stand between the column runs. Hand-written because neither PDFium nor
pypdf offers column-aware text order, and the layout libraries that do (pdfminer's
LAParams) would add a second PDF parser for one page in a hundred.

When the page has no gutter (a PDF that itself prints the columns' text on one line,
as the re-typeset OSHA 3170 in ../shared/corpus does) nothing can be recovered: None.
"""

from __future__ import annotations

import pypdfium2 as pdfium

#: the gutter is looked for between these shares of the page width
GUTTER_ZONE = (0.3, 0.7)
#: at most this share of the text lines may cross the gutter (headings, footers)
MAX_CROSSING = 0.15
#: both columns must hold text on at least this share of the lines
MIN_SIDE = 0.15
#: the mean characters a column's lines must hold: shorter ones are table cells ("Yes No"),
#: whose rows must not be torn apart
MIN_SIDE_CHARS = 25
#: characters whose baselines differ by at most this many points share a line
LINE_TOLERANCE = 2.0


def _lines(text: str, boxes: list[tuple[float, float, float, float]]) -> list[list[int]]:
    """Character indexes grouped by text line (same baseline), top to bottom; each line's
    characters in PDFium's order. Line breaks PDFium inserted are left out."""
    rows: list[tuple[float, list[int]]] = []
    for i, ch in enumerate(text):
        if ch in "\r\n":
            continue
        y = boxes[i][1]
        for row in rows:
            if abs(row[0] - y) <= LINE_TOLERANCE:
                row[1].append(i)
                break
        else:
            rows.append((y, [i]))
    rows.sort(key=lambda r: -r[0])
    return [r[1] for r in rows]


def _gutter(
    text: str, boxes: list[tuple[float, float, float, float]], lines: list[list[int]], width: float
) -> float | None:
    """The x of a column gutter, or None: the point of the middle zone crossed by the
    fewest lines, when few lines cross it and both sides hold text on many lines."""
    spans = [[(boxes[i][0], boxes[i][2]) for i in line if not text[i].isspace()] for line in lines]
    spans = [s for s in spans if s]
    if len(spans) < 6:
        return None
    best: tuple[int, float] | None = None
    lo, hi = int(GUTTER_ZONE[0] * width), int(GUTTER_ZONE[1] * width)
    for x in range(lo, hi + 1, 2):
        crossing = sum(1 for s in spans if any(a < x < b for a, b in s))
        if best is None or crossing < best[0]:
            best = (crossing, float(x))
    if best is None or best[0] > MAX_CROSSING * len(spans):
        return None
    x = best[1]
    left = [sum(1 for _, b in s if b <= x) for s in spans]
    right = [sum(1 for a, _ in s if a >= x) for s in spans]
    for side in (left, right):
        held = [c for c in side if c]
        # both sides must be running text: on many lines, and lines of prose, not table cells
        if len(held) < MIN_SIDE * len(spans) or sum(held) / len(held) < MIN_SIDE_CHARS:
            return None
    return x


#: PDFium's text runs the columns together when at least this many of its lines (and
#: ``MIN_JOINED_SHARE`` of them) hold text on both sides of the gutter
MIN_JOINED = 3
MIN_JOINED_SHARE = 0.1


def _runs_together(text: str, boxes: list[tuple[float, float, float, float]], x: float) -> bool:
    """True when PDFium's own text lines step across the gutter from one character to the
    next on the same baseline: its reading order interleaves the columns."""
    joined = total = pos = 0
    for line in text.split("\n"):
        ink = [i for i in range(pos, pos + len(line)) if not text[i].isspace()]
        pos += len(line) + 1
        if len(ink) < 10:
            continue
        total += 1
        joined += any(
            boxes[a][2] <= x <= boxes[b][0] and abs(boxes[a][1] - boxes[b][1]) <= LINE_TOLERANCE
            for a, b in zip(ink, ink[1:], strict=False)
        )
    return joined >= MIN_JOINED and joined >= MIN_JOINED_SHARE * max(total, 1)


def reorder_columns(textpage: pdfium.PdfTextPage, width: float) -> str | None:
    """The page text read column by column, or None when there is no gutter or PDFium's
    text already reads one column after the other."""
    text = textpage.get_text_range()
    if len(text) != textpage.count_chars():  # characters outside the BMP shift indexes
        return None
    boxes: list[tuple[float, float, float, float]] = []
    for i in range(len(text)):
        box = textpage.get_charbox(i, loose=True)
        if boxes and (box[2] <= box[0] and box[3] <= box[1]):  # a space PDFium generated
            box = (boxes[-1][2], boxes[-1][1], boxes[-1][2], boxes[-1][3])
        boxes.append(box)
    lines = _lines(text, boxes)
    x = _gutter(text, boxes, lines, width)
    if x is None or not _runs_together(text, boxes, x):
        return None
    out: list[str] = []
    left: list[str] = []
    right: list[str] = []
    for line in lines:
        ink = [i for i in line if not text[i].isspace()]
        if any(boxes[i][0] < x < boxes[i][2] for i in ink):  # a full-width line
            out += left + right + ["".join(text[i] for i in line).strip()]
            left, right = [], []
            continue
        mid = [(boxes[i][0] + boxes[i][2]) / 2 for i in line]
        a = "".join(text[i] for i, m in zip(line, mid, strict=True) if m < x).strip()
        b = "".join(text[i] for i, m in zip(line, mid, strict=True) if m >= x).strip()
        if a:
            left.append(a)
        if b:
            right.append(b)
    out += left + right
    return "\n".join(ln for ln in out if ln)
