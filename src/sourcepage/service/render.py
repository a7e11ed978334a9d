"""Render one PDF page to PNG with the evidence passage and query words highlighted.

The passage is located on the page through PDFium's own text page: page characters
and passage are both reduced to their lower-case letters and digits (so line breaks,
hyphenation repaired by cleaning and the U+FFFE marker do not matter), the passage
is searched in the page, and the matching character range becomes PDFium's merged
text rectangles. A passage that is not found whole (a cleaned version without its
running header, an enriched chunk with its metadata header) is matched line by line.
Query words are found with ``textpage.search`` (whole words) inside the passage, or
anywhere on the page when no passage is given.

A PDF page is untrusted input: :func:`render_page` renders in a worker process under
:data:`~sourcepage.limits.RENDER_LIMITS` (memory, time; ``RENDER_WORKERS`` workers per
process, each rendering one page at a time, replaced when a page breaks a limit), and
lowers the scale of a page that would have more than ``pixels`` pixels. PDFium is not thread-safe: every
in-process call goes through one lock.
"""

from __future__ import annotations

import io
import math
import os
import queue
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image, ImageDraw

from sourcepage.executor import LimitedPool
from sourcepage.limits import RENDER_LIMITS, Limits
from sourcepage.text.sentences import quote_pieces

#: page images rendered at once (one worker process each)
RENDER_WORKERS = min(2, os.cpu_count() or 1)
_pdfium_lock = threading.Lock()
#: page-image requests that may wait for a render worker (more: 503 at once): room for a
#: busy review team (50 clients of `bench --load` never fill it, 8 places did), not for a
#: web page's 200 <img> tags
IMAGE_QUEUE = 32 * RENDER_WORKERS


class ImageGate:
    """The bounded queue of page-image requests of one app, apart from search.

    Image requests render in threads of their own (``limiter``: one per render worker),
    never in the route threads that searches and ``/health`` use; at most
    ``RENDER_WORKERS + IMAGE_QUEUE`` are admitted at once and the next one is refused at
    once (503), so 200 ``<img>`` tags of a web page cannot hold the service."""

    def __init__(self, rendering: int = RENDER_WORKERS, waiting: int = IMAGE_QUEUE):
        self.rendering, self.capacity = rendering, rendering + waiting
        self._inside = 0
        self._lock = threading.Lock()
        self._limiter: Any = None

    def try_enter(self) -> bool:
        with self._lock:
            if self._inside >= self.capacity:
                return False
            self._inside += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self._inside = max(0, self._inside - 1)

    def limiter(self) -> Any:
        """The anyio CapacityLimiter of the image threads (made in the event loop)."""
        if self._limiter is None:
            import anyio

            self._limiter = anyio.CapacityLimiter(self.rendering)
        return self._limiter


_pools: dict[Limits, queue.LifoQueue[LimitedPool]] = {}
_pools_lock = threading.Lock()

PASSAGE_FILL = (255, 214, 10, 55)  # light translucent yellow: the chunk
QUOTE_FILL = (255, 196, 0, 150)  # stronger yellow with an outline: the quoted sentence
QUOTE_LINE = (191, 140, 0, 255)
TERM_FILL = (255, 140, 0, 110)  # translucent orange
TERM_LINE = (214, 96, 0, 255)
MIN_LINE = 12  # alphanumeric characters a passage line needs to be matched on its own


def _alnum_index(chars: Iterable[str]) -> tuple[str, list[int]]:
    """Lower-case letters and digits of ``chars`` and the index each came from."""
    text: list[str] = []
    where: list[int] = []
    for i, c in enumerate(chars):
        if c.isalnum():
            text.append(c.lower())
            where.append(i)
    return "".join(text), where


def _page_chars(tp: pdfium.PdfTextPage) -> list[str]:
    out = []
    for i in range(tp.count_chars()):
        u = pdfium_c.FPDFText_GetUnicode(tp, i)
        out.append(chr(u) if 0 < u < 0x110000 else " ")
    return out


def passage_ranges(page_chars: list[str], passage: str) -> list[tuple[int, int]]:
    """Character ranges (first, last inclusive) of the page that hold ``passage``: the
    whole passage, else each of its lines (each of its sentences when it is one line)."""
    hay, where = _alnum_index(page_chars)
    if not hay:
        return []
    needle, _ = _alnum_index(passage)
    if needle:
        at = hay.find(needle)
        if at >= 0:
            return [(where[at], where[at + len(needle) - 1])]
    ranges: list[tuple[int, int]] = []
    start = 0
    lines = passage.splitlines()
    # one line not found whole (a quote with "[…]", as the desk's image is asked for): its sentences
    for line in lines if len(lines) > 1 else quote_pieces(passage):
        n, _ = _alnum_index(line)
        if len(n) < MIN_LINE:
            continue
        at = hay.find(n, start)
        if at < 0:
            at = hay.find(n)
        if at >= 0:
            ranges.append((where[at], where[at + len(n) - 1]))
            start = at + len(n)
    return ranges


def quote_ranges(page_chars: list[str], quote: str) -> list[tuple[int, int]]:
    """Character ranges of the page that hold ``quote``: the whole quote, else each of its
    sentences (a quote's "[…]" stands for page text it leaves out, and a quote joins
    sentences the page breaks across lines: each is found and highlighted)."""
    return passage_ranges(page_chars, "\n".join(quote_pieces(quote)))


def _rects(tp: pdfium.PdfTextPage, first: int, last: int) -> list[tuple[float, float, float, float]]:
    n = tp.count_rects(first, last - first + 1)
    return [tp.get_rect(i) for i in range(n)]


def render_page(
    pdf_path: Path,
    page_number: int,
    *,
    scale: float = 1.5,
    passage: str = "",
    terms: Iterable[str] = (),
    quote: str = "",
    limits: Limits = RENDER_LIMITS,
) -> tuple[bytes, dict[str, Any]]:
    """PNG bytes of page ``page_number`` (1-based) and what was highlighted at which
    ``scale``: the passage lightly (``passage_boxes``), the ``quote`` (a sentence of it)
    strongly (``quote_boxes``), the question's terms (``term_boxes``); rendered in a worker
    process under ``limits``.

    IndexError when the PDF has no such page; LimitExceeded when the page broke the
    memory or time limit.
    """
    job = (str(pdf_path), page_number, scale, passage, tuple(sorted(set(terms))), limits.pixels, quote)
    with _pools_lock:
        free = _pools.get(limits)
        if free is None:
            free = _pools[limits] = queue.LifoQueue()
            for _ in range(RENDER_WORKERS):
                free.put(LimitedPool(1, limits, ("sourcepage.service.render",)))
    pool = free.get()  # waits while every worker renders
    try:
        return pool.map(render_job, [job])[0]
    finally:
        free.put(pool)


def render_job(
    job: tuple[str, int, float, str, tuple[str, ...], int, str],
) -> tuple[bytes, dict[str, Any]]:
    """:func:`render_in_process` of one ``(path, page, scale, passage, terms, max_pixels, quote)``."""
    path, n, scale, passage, terms, max_pixels, quote = job
    return render_in_process(
        Path(path), n, scale=scale, passage=passage, terms=terms, max_pixels=max_pixels, quote=quote
    )


def render_in_process(
    pdf_path: Path,
    page_number: int,
    *,
    scale: float = 1.5,
    passage: str = "",
    terms: Iterable[str] = (),
    max_pixels: int = RENDER_LIMITS.pixels,
    quote: str = "",
) -> tuple[bytes, dict[str, Any]]:
    """:func:`render_page` in this process, without the memory and time limits."""
    with _pdfium_lock:
        pdf = pdfium.PdfDocument(str(pdf_path))
        try:
            if not 1 <= page_number <= len(pdf):
                raise IndexError(f"the PDF has {len(pdf)} pages, not {page_number}")
            page = pdf[page_number - 1]
            left, bottom, right, top = page.get_cropbox()
            area = max(1.0, abs(right - left) * abs(top - bottom))
            if area * scale * scale > max_pixels:  # a huge page: fewer pixels per point
                scale = math.sqrt(max_pixels / area)
            image = page.render(scale=scale, rotation=0).to_pil().convert("RGBA")
            tp = page.get_textpage()
            chars = _page_chars(tp)
            passage_boxes: list[tuple[float, float, float, float]] = []
            ranges = passage_ranges(chars, passage) if passage.strip() else []
            for a, b in ranges:
                passage_boxes += _rects(tp, a, b)
            quote_boxes: list[tuple[float, float, float, float]] = []
            for a, b in quote_ranges(chars, quote) if quote.strip() else []:
                quote_boxes += _rects(tp, a, b)
            term_boxes: list[tuple[float, float, float, float]] = []
            for term in sorted(set(terms)):
                if len(term) < 2:
                    continue
                searcher = tp.search(term, match_case=False, match_whole_word=True)
                while (hit := searcher.get_next()) is not None:
                    at, count = hit
                    if ranges and not any(a <= at <= b for a, b in ranges):
                        continue
                    term_boxes += _rects(tp, at, at + count - 1)
            tp.close()
            page.close()
        finally:
            pdf.close()

    def px(box: tuple[float, float, float, float], pad: float) -> tuple[float, float, float, float]:
        x0, y0, x1, y1 = box  # PDF points, origin bottom-left
        return (
            (x0 - left) * scale - pad,
            (top - y1) * scale - pad,
            (x1 - left) * scale + pad,
            (top - y0) * scale + pad,
        )

    overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    for box in passage_boxes:
        draw.rectangle(px(box, 2 * scale / 1.5), fill=PASSAGE_FILL)
    for box in quote_boxes:
        draw.rectangle(px(box, 2 * scale / 1.5), fill=QUOTE_FILL, outline=QUOTE_LINE)
    for box in term_boxes:
        draw.rectangle(px(box, 1), fill=TERM_FILL, outline=TERM_LINE)
    out = Image.alpha_composite(image, overlay).convert("RGB")
    buf = io.BytesIO()
    out.save(buf, format="PNG", optimize=False)
    # where the highlight starts, as a share of the image's height (the page view scrolls there)
    marked = quote_boxes or passage_boxes
    first = max(0.0, min(px(b, 0)[1] for b in marked)) / image.size[1] if marked else None
    info = {
        "highlight_top": round(first, 4) if first is not None else None,
        "passage_boxes": len(passage_boxes),
        "term_boxes": len(term_boxes),
        "quote_boxes": len(quote_boxes),
        "scale": round(scale, 4),
    }
    return buf.getvalue(), info
