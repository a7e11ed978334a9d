"""Split page texts into retrieval chunks that know their page(s).

Modes: ``chunk`` (default; ``size`` characters with ``overlap``, boundaries at the
last sentence break in the second half of the window, else the last word break, else
a hard cut), ``page`` (one chunk per page), ``two_page`` (one chunk per pair of
consecutive pages p, p+1, sliding by one page).

Scope of ``chunk`` mode: ``page`` (default, as the study: chunks never cross a page
break) or ``document`` (the document's pages joined into one stream).

Page credit rule, for a chunk that covers several pages: the chunk is credited to
the page holding the most of its characters; on a tie, the earliest page. Its
``spans`` still list every page it covers. Page collapse (retrieval.pages) uses only
the credited page, so a hit never lends its score to a page that holds the minority
of its text. For ``two_page`` mode that makes page p the credited page of the
window (p, p+1) when page p holds at least half of the text.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from sourcepage.records import Chunk, page_id

MODES = ("chunk", "page", "two_page")
SCOPES = ("page", "document")
PAGE_JOIN = "\n\n"  # what separates pages in document scope / two-page windows

_SENTENCE_END = re.compile(r"[.!?;:][\"')\]]*\s")


@dataclass(frozen=True)
class ChunkConfig:
    """Chunking settings; the defaults are the study's (1000/200, within a page)."""

    size: int = 1000
    overlap: int = 200
    mode: str = "chunk"
    scope: str = "page"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"chunk mode {self.mode!r} not in {MODES}")
        if self.scope not in SCOPES:
            raise ValueError(f"chunk scope {self.scope!r} not in {SCOPES}")
        if self.size < 50:
            raise ValueError(f"chunk size {self.size} is too small (minimum 50)")
        if not 0 <= self.overlap < self.size // 2 + 1:
            raise ValueError(f"overlap {self.overlap} must be in [0, size/2]")

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def split_spans(text: str, size: int = 1000, overlap: int = 200) -> list[tuple[int, int]]:
    """(start, end) offsets of overlapping windows over ``text``, whitespace-trimmed.

    Each window ends at a sentence break (., !, ?, ;, :) found in its second half,
    else at a word break, else at ``size``. The next window starts ``overlap``
    characters before the previous end, moved forward to a word start.
    """
    n = len(text)
    spans: list[tuple[int, int]] = []
    start = 0
    while start < n and text[start].isspace():
        start += 1
    while start < n:
        end = min(start + size, n)
        if end < n:
            window = text[start + size // 2 : end]
            cuts = [m.end() for m in _SENTENCE_END.finditer(window)]
            if cuts:
                end = start + size // 2 + cuts[-1]
            else:
                ws = max(window.rfind(" "), window.rfind("\n"))
                if ws >= 0:
                    end = start + size // 2 + ws + 1
        s, e = start, end
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            spans.append((s, e))
        if end >= n:
            break
        nxt = max(end - overlap, start + 1)
        if nxt > 0 and not text[nxt - 1].isspace():  # move to the next word start
            while nxt < end and not text[nxt - 1].isspace():
                nxt += 1
        while nxt < n and text[nxt].isspace():
            nxt += 1
        start = nxt
    return spans


def _credit(spans: list[tuple[int, int, int]]) -> int:
    """Page holding most characters of the chunk; ties → the earliest page."""
    return max(spans, key=lambda s: (s[2] - s[1], -s[0]))[0]


def _map_spans(bounds: list[tuple[int, int, int]], s: int, e: int) -> tuple[tuple[int, int, int], ...]:
    """Map stream offsets [s, e) to (page, start, end) using page bounds in the stream."""
    out = []
    for page, ps, pe in bounds:
        a, b = max(s, ps), min(e, pe)
        if a < b:
            out.append((page, a - ps, b - ps))
    return tuple(out)


def chunk_document(doc_id: str, pages: list[str], config: ChunkConfig = ChunkConfig()) -> list[Chunk]:
    """Chunks of one document; ``pages[i]`` is the text of physical page i+1.

    Empty pages yield no chunk. Chunk ids are ``doc#pN#cK`` with K counting the
    chunks credited to page N, in order.
    """
    raw: list[tuple[str, tuple[tuple[int, int, int], ...]]] = []
    if config.mode == "page":
        for i, t in enumerate(pages, 1):
            if t.strip():
                raw.append((t.strip(), ((i, len(t) - len(t.lstrip()), len(t.rstrip())),)))
    elif config.mode == "two_page":
        for i in range(1, len(pages) + 1):
            group = [(j, pages[j - 1]) for j in (i, i + 1) if j <= len(pages)]
            if i > 1 and len(group) == 1:
                break  # the last page is already covered by the window (n-1, n)
            text, bounds = _join(group)
            s, e = _trim(text)
            if e > s:
                raw.append((text[s:e], _map_spans(bounds, s, e)))
    elif config.scope == "document":
        text, bounds = _join(list(enumerate(pages, 1)))
        for s, e in split_spans(text, config.size, config.overlap):
            raw.append((text[s:e], _map_spans(bounds, s, e)))
    else:
        for i, t in enumerate(pages, 1):
            for s, e in split_spans(t, config.size, config.overlap):
                raw.append((t[s:e], ((i, s, e),)))
    counters: dict[int, int] = {}
    chunks = []
    for text, spans in raw:
        page = _credit(list(spans))
        counters[page] = counters.get(page, 0) + 1
        chunks.append(Chunk(f"{page_id(doc_id, page)}#c{counters[page]}", doc_id, page, spans, text))
    return chunks


def _join(group: list[tuple[int, str]]) -> tuple[str, list[tuple[int, int, int]]]:
    parts, bounds, pos = [], [], 0
    for k, (page, t) in enumerate(group):
        if k:
            parts.append(PAGE_JOIN)
            pos += len(PAGE_JOIN)
        parts.append(t)
        bounds.append((page, pos, pos + len(t)))
        pos += len(t)
    return "".join(parts), bounds


def _trim(text: str) -> tuple[int, int]:
    s, e = 0, len(text)
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e
