"""Cleaning operations for the 'cleaned' text version (study §3.2, Table 3).

Each operation is its own function and its own switch in ``CleanConfig`` so that
ablations (study §4.6) can turn one off at a time. They run in a fixed order:
glyph mapping (private-use bullets become "•" before lines are compared),
header/footer removal (needs the original lines), "Page N of M" lines, dehyphenation
(needs the line breaks), whitespace normalisation (removes them).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class CleanConfig:
    """Which cleaning operations run. All on by default."""

    headers_footers: bool = True
    dehyphenate: bool = True
    whitespace: bool = True
    glyphs: bool = True
    page_numbers: bool = True

    def as_dict(self) -> dict[str, bool]:
        return asdict(self)


def line_key(line: str) -> str:
    """A repeated header/footer ignoring page numbers and case: digits → '#'."""
    return re.sub(r"\d+", "#", re.sub(r"\s+", " ", line.strip().lower()))


def repeated_edge_lines(pages: list[str], edge: int = 2, min_share: float = 0.3) -> set[str]:
    """Keys of lines that recur in the first/last ``edge`` non-empty lines of many pages.

    A line is a running header/footer when it appears at a page edge on at least
    ``min_share`` of the pages and on at least 3 pages, and is short (≤ 100 chars):
    such lines repeat the title or page number and carry no evidence. 0.3 rather
    than 0.5 because booklets alternate headers between even and odd pages. A bare
    page number ("#") counts too.
    """
    counts: Counter[str] = Counter()
    for text in pages:
        lines = [ln for ln in text.split("\n") if ln.strip()]
        edges = {line_key(ln) for ln in lines[:edge] + lines[-edge:] if len(ln.strip()) <= 100}
        counts.update(edges)
    need = max(3, min_share * len(pages))
    return {k for k, c in counts.items() if c >= need and k.strip()}


def strip_edge_lines(text: str, keys: Collection[str], edge: int = 2, prefix: int = 0) -> str:
    """One page without the lines among its first and last ``edge`` non-empty ones whose
    ``line_key`` is in ``keys`` (``repeated_edge_lines`` of its document); with ``prefix``,
    also those whose key is longer than ``prefix`` words and opens like a longer key (a
    variant of a running line: "… Act 2015 Schedule 1" beside "… Act 2015 Part 3 s 61")."""
    if not keys:
        return text
    opens = {" ".join(k.split()[:prefix]) for k in keys if prefix and len(k.split()) > prefix}

    def running(line: str) -> bool:
        key = line_key(line)
        words = key.split()
        return key in keys or (len(words) > prefix and " ".join(words[:prefix]) in opens)

    lines = text.split("\n")
    nonempty = [i for i, ln in enumerate(lines) if ln.strip()]
    edge_idx = set(nonempty[:edge] + nonempty[-edge:])
    return "\n".join(ln for i, ln in enumerate(lines) if not (i in edge_idx and running(ln)))


def remove_headers_footers(pages: list[str], edge: int = 2) -> list[str]:
    """Drop running header/footer lines found by ``repeated_edge_lines`` from page edges."""
    keys = repeated_edge_lines(pages, edge)
    return [strip_edge_lines(text, keys, edge) for text in pages]


#: a character of Unicode's private-use area: symbol-font glyphs (Symbol, Wingdings) that
#: PDFium cannot map, almost always list bullets (U+F0B7, U+F0A7, U+F02D, U+F0D8 …)
_PRIVATE = "\ue000-\uf8ff"
_PRIVATE_BULLET = re.compile(rf"(?:(?<=\s)|^)[{_PRIVATE}](?=[ \t]|$)", re.MULTILINE)
_PRIVATE_ANY = re.compile(rf"[{_PRIVATE}]")


def map_glyphs(text: str) -> str:
    """Private-use glyphs standing alone (a bullet before an item) become "•", any other
    is removed; soft hyphens (U+00AD) are removed: they only mark where a word may
    break. PDFium's U+FFFE hyphen marker is left to ``dehyphenate``."""
    text = _PRIVATE_BULLET.sub("•", text)
    return _PRIVATE_ANY.sub("", text).replace("\u00ad", "")


#: a "Page N of M" footer line, with the running title some documents put before it
#: ("Code of Practice Page 47 of 72", "… November 2024 | Page 11 of 41")
PAGE_OF = re.compile(r"^(?:.{0,100}?[\s|–-])?page\s+\d{1,4}\s+of\s+\d{1,4}$", re.IGNORECASE)


def remove_page_numbers(text: str) -> str:
    """Drop every line that is a "Page N of M" footer (wherever PDFium put it on the
    page): it is furniture, and joined to the next line it starts a quoted sentence."""
    return "\n".join(ln for ln in text.split("\n") if not PAGE_OF.match(ln.strip()))


# "-" or U+2010 (New Zealand's legislation) + line break (pypdf), or PDFium's U+FFFE marker
# for a hyphen it removed at a line end
_HYPHEN_BREAK = re.compile(r"(\w+)(?:[-\u2010][ \t]*\n[ \t]*|\ufffe\n?)([a-z]\w*)")


def dehyphenate(text: str, vocabulary: set[str] | None = None) -> str:
    """Join words split across a line break with a hyphen: "iso-\\nlating" → "isolating".

    Only a lower-case continuation is joined. When ``vocabulary`` (the document's
    words, lower-cased) holds the hyphenated compound (e.g. "self-contained") but
    not the joined form, the hyphen is kept and only the line break goes.
    """

    def fix(m: re.Match[str]) -> str:
        a, b = m.group(1), m.group(2)
        joined, compound = (a + b).lower(), f"{a}-{b}".lower()
        if vocabulary and compound in vocabulary and joined not in vocabulary:
            return f"{a}-{b}"
        return a + b

    return _HYPHEN_BREAK.sub(fix, text)


def normalize_whitespace(text: str) -> str:
    """Collapse spaces/tabs, join broken lines into paragraphs, keep blank-line breaks."""
    text = text.replace("\u00a0", " ").replace("\f", "\n").replace("\u00ad", "").replace("\ufffe", "-")
    paragraphs = re.split(r"\n[ \t]*\n+", text)
    out = [re.sub(r"\s+", " ", p).strip() for p in paragraphs]
    return "\n\n".join(p for p in out if p)


def document_vocabulary(pages: list[str]) -> set[str]:
    """Lower-cased word forms (hyphenated compounds included) of a document."""
    return {w.lower().replace("\u2010", "-") for t in pages for w in re.findall(r"\w+(?:[-\u2010]\w+)*", t)}


def clean_pages(pages: list[str], config: CleanConfig = CleanConfig()) -> list[str]:
    """The cleaned version of one document's pages (same count and order)."""
    out = list(pages)
    if config.glyphs:
        out = [map_glyphs(t) for t in out]
    if config.headers_footers:
        out = remove_headers_footers(out)
    if config.page_numbers:
        out = [remove_page_numbers(t) for t in out]
    if config.dehyphenate:
        vocab = document_vocabulary(out)
        out = [dehyphenate(t, vocab) for t in out]
    if config.whitespace:
        out = [normalize_whitespace(t) for t in out]
    return out
