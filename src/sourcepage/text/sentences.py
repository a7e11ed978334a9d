"""The sentence splitter shared by the sentence reranker, the answerability features and
the extractive answers (one definition, so a quoted sentence is the unit that was scored),
and the quotable sentences of a page (``quotable``): body text only, in its cleaned form.

A page's raw lines still show its structure (cleaning joins them), so ``quotable`` reads
the raw lines, drops what is not a statement — table-of-contents lines with dot leaders,
headings, figure and table captions, question-form headings, bare page numbers — and
cleans what remains as the cleaned text version does (hyphenation repaired, PDFium's
U+FFFE marker removed, whitespace collapsed). Each candidate remembers the heading it
stands under, so a sentence under "How often do I need to review my procedures?" can be
matched to a question through its heading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

from sourcepage.text.clean import (
    PAGE_OF,
    dehyphenate,
    document_vocabulary,
    map_glyphs,
    repeated_edge_lines,
    strip_edge_lines,
)

_SENT = re.compile(r"(?<=[.!?;])\s+(?=[A-Z0-9•■(\"'])|\s*[•■]\s+")


def split_sentences(text: str) -> list[str]:
    """Sentences of a passage (whitespace collapsed; bullets split), 30–600 characters."""
    flat = re.sub(r"\s+", " ", text).strip()
    return [s.strip() for s in _SENT.split(flat) if 30 <= len(s.strip()) <= 600]


# --------------------------------------------------------------------------- quotable text

#: a dot leader of a contents line ("What is lockout? ........ 12"), anywhere in a line
_LEADER = re.compile(r"(?:\.\s?){4,}|…{2,}|(?:_\s?){4,}")
_PAGE_NO = re.compile(r"^(?:[ivxlc]{1,6}|\d{1,4}|page \d+(?: of \d+)?)$", re.IGNORECASE)
_CAPTION = re.compile(
    r"^(?:figure|fig\.|table|photo|photograph|image|source|exhibit|chart|diagram|illustration)"
    r"\s*(?:\d|[A-Z]\b|[ivx]+\b|:)",
    re.IGNORECASE,
)
_BULLET = re.compile(r"^[•■▪●◦\-–]\s")
#: a numbered paragraph or item opening a line: "(1) A PCBU must …", "(a) when …": a short
#: line before it is a section heading ("61 Duty to have worker participation practices")
_PARA = re.compile(r"^\((?:\d{1,3}[A-Z]?|[a-z]{1,2}|[ivx]{1,5})\)\s")
_END = (".", "!", "?", ":", ";")
#: a line ending in one of these continues: it is not a heading
_FUNCTION_WORDS = frozenset(
    "a an the of for to and or nor but which that who whom whose with in on at by as from into "
    "is are was were be been must may shall should can will than if when where".split()
)
#: a line that ends so the next line must go on with it ("… when necessary (see" / "Figure 7).")
_OPENS = re.compile(r"(?:\(|\b(?:see|refer to|in|of|and|or|to|at|the|a|an))\s*$", re.IGNORECASE)
#: the longest line (in words) that may be a heading
HEADING_WORDS = 12
#: the longest quote: an introduced list is quoted whole up to this length
MAX_QUOTE = 700


@dataclass(frozen=True)
class Quotable:
    """One quotable unit of a page: a sentence, a list item, or a sentence that introduces
    a list (ending in ':') together with its items (``kind`` "sentence", "item", "list");
    ``heading`` is the heading it stands under ('' when none)."""

    text: str
    heading: str
    kind: str
    bullet: str = ""  # the bullet character of a list item
    #: the first and last piece of the page it spans (``quotable`` numbers every sentence,
    #: item, caption and contents line of the page's body in order, kept or not): two units
    #: are adjacent on the page when the second's ``first`` follows the first's ``last``
    first: int = -1
    last: int = -1
    #: what ``tidy`` took from its start (a paragraph number "(2)", a cross-reference "(See
    #: Sections 6(e) and (f) …)"), put back when the unit stands inside a quote after another
    #: (never at a quote's edge)
    lead: str = ""


#: the lines at each end of a page that may be its document's running header or footer: four,
#: for New Zealand's Acts end a page with "Part 4 s 107 Health and Safety at Work Act 2015" /
#: "Version as at" / "5 April 2025" / "68", which joined the last sentence of the page
QUOTE_EDGE = 4


def running_lines(pages: list[str]) -> frozenset[str]:
    """The ``clean.line_key`` of each running header or footer line of a document, from
    all its raw pages (``clean.repeated_edge_lines`` over ``QUOTE_EDGE`` lines)."""
    return frozenset(repeated_edge_lines(pages, QUOTE_EDGE))


#: a running line's first words that make a line at a page's edge one of its variants
RUNNING_PREFIX = 5


def quote_text(raw: str, running: frozenset[str]) -> str:
    """A raw page as quotes are made from it: without its document's running header and
    footer lines (``running_lines``) at its ends, nor their variants — a line at an end
    whose first ``RUNNING_PREFIX`` words (as ``clean.line_key`` writes them) open a longer
    running line ("5 April 2025 Health and Safety at Work Act 2015 Schedule 1" beside
    "… Part 3 s 61" on most pages); the rest of the text unchanged."""
    return strip_edge_lines(raw, running, QUOTE_EDGE, RUNNING_PREFIX)


def _line_kind(line: str, prev: str, prev_kind: str, nxt: str) -> str:
    """'blank', 'contents', 'page', 'caption', 'question', 'heading' or 'body' for one
    stripped raw line, from the previous non-blank line and its kind and the next one."""
    if not line:
        return "blank"
    if _LEADER.search(line):
        return "contents"
    if _PAGE_NO.match(line):
        return "page"
    words = line.split()
    short = len(words) <= HEADING_WORDS
    if _CAPTION.match(line) and len(words) <= 25 and not _OPENS.search(prev if prev_kind == "body" else ""):
        return "caption"  # not "Figure 7)." after "… when necessary (see": the sentence goes on
    if _BULLET.match(line):
        return "body"
    after_break = not prev or prev.endswith(_END) or prev_kind != "body"
    starts_block = (
        not nxt
        or nxt[0].isupper()
        or nxt[0].isdigit()
        or _BULLET.match(nxt) is not None
        or _PARA.match(nxt) is not None
    )
    # a question heading also after a sentence closed by a bracket: "… (See 29 CFR 1910.147(e)(3).)"
    if line.endswith("?") and short and (after_break or prev.rstrip(')"”’]').endswith(_END)):
        return "question"
    open_end = words[-1].lower() in _FUNCTION_WORDS
    if (
        short
        and after_break
        and starts_block
        and not line.endswith((".", ",", ";", ":", "—", "–", "-"))
        and not open_end
    ):
        if line[0].isupper() or line[0].isdigit():
            return "heading"
    return "body"


def _blocks(raw: str) -> list[tuple[str, str, int]]:
    """(heading, body text, pieces dropped before it) blocks of a raw page: runs of body
    lines between non-body ones; the dropped pieces are the captions and contents lines
    between it and the block before (text a quote leaves out), not headings or page numbers.
    A heading or question that wraps (its next line starts lower-case and ends the
    heading) is one heading; a page with three or more contents lines has no blocks.
    Private-use glyphs are mapped first (bullets become "•"); page furniture is no text."""
    lines = [ln.strip() for ln in map_glyphs(raw.replace("\r\n", "\n")).split("\n")]
    lines = ["" if PAGE_OF.match(ln) else ln for ln in lines]
    kinds: list[str] = []
    prev, prev_kind = "", "blank"
    for i, ln in enumerate(lines):
        nxt = next((n for n in lines[i + 1 :] if n), "")
        kinds.append(_line_kind(ln, prev, prev_kind, nxt))
        if ln:
            prev, prev_kind = ln, kinds[-1]
    if kinds.count("contents") >= 3:
        return []
    for i in range(len(lines) - 1):
        if kinds[i] == "body" and lines[i + 1][:1].islower() and kinds[i + 1] in ("body", "question"):
            two = len(lines[i].split()) + len(lines[i + 1].split())
            before = next((j for j in range(i - 1, -1, -1) if lines[j]), None)
            opens = before is None or kinds[before] != "body" or lines[before].endswith(_END)
            after = lines[i + 2] if i + 2 < len(lines) else ""
            head_like = lines[i + 1].endswith("?") or (
                not lines[i + 1].endswith((".", ",", ";", ":")) and after[:1].isupper()
            )
            if two <= 2 * HEADING_WORDS and head_like and opens:
                kinds[i] = kinds[i + 1] = "question" if lines[i + 1].endswith("?") else "heading"
    out: list[tuple[str, str, int]] = []
    heading, body, last, dropped, before = "", [], "blank", 0, 0
    for ln, kind in zip(lines, kinds, strict=True):
        if kind == "body":
            if not body:
                before, dropped = dropped, 0
            body.append(ln)
        else:
            if body:
                out.append((heading, "\n".join(body), before))
                body = []
            dropped += kind in ("caption", "contents")
            if kind in ("heading", "question"):
                wraps = last in ("heading", "question") and ln[:1].islower()
                heading = f"{heading} {ln}" if wraps else ln
        if kind != "blank":
            last = kind
    if body:
        out.append((heading, "\n".join(body), before))
    return out


def _items(flat: str) -> list[tuple[str, str]]:
    """(text, bullet) pieces of a flat block (bullet '' for prose), split at bullets; the prose after
    the last item of a list is split off it at the first sentence break."""
    parts = re.split(r"\s*([•■▪●])\s+", flat)
    out: list[tuple[str, str]] = [(parts[0], "")]
    for mark, p in zip(parts[1::2], parts[2::2], strict=True):
        m = re.search(r"(?<=[.!?])\s+(?=[A-Z])", p)
        out += [(p[: m.start()], mark), (p[m.end() :], "")] if m else [(p, mark)]
    return [(t.strip(), b) for t, b in out if t.strip()]


def _units(flat: str, heading: str) -> list[Quotable]:
    """Sentences and list items of one flat block, in order; an item is kept whatever its
    length here (``quotable`` joins short ones into their list and drops them alone). A
    piece that is no unit (a caption, a contents line, over 600 characters) stays as kind
    "dropped", so that the pieces of the page keep their numbers."""
    out: list[Quotable] = []
    for text, bullet in _items(flat):
        if bullet:
            out.append(Quotable(text, heading, "item", bullet))
            continue
        for s in _SENT.split(text):  # the one sentence rule (the bullets are already split)
            keep = not (_LEADER.search(s) or _CAPTION.match(s)) and len(s) <= 600
            out.append(Quotable(s, heading, "sentence" if keep else "dropped"))
    return out


def quotable(raw: str) -> list[Quotable]:
    """The quotable units of one page, in page order (see the module docstring): body
    sentences, list items of three words or more, and each sentence that ends in ':'
    joined with the items that follow it (whole items, up to ``MAX_QUOTE`` characters).
    Questions (text ending in '?'), captions, contents lines and fragments under five
    words are never quotable. Never in a unit: "Page N of M" lines, private-use glyphs
    (bullets become "•"), soft hyphens and PDFium's U+FFFE hyphen marker. The document's
    running headers and footers are taken off the page before (``quote_text``)."""
    vocab = document_vocabulary([raw])
    out: list[Quotable] = []
    piece = 0  # the number of the next piece of the page (``Quotable.first``)
    for heading, body, dropped in _blocks(raw):
        flat = re.sub(r"\s+", " ", dehyphenate(body, vocab).replace("\ufffe", "-")).strip()
        piece += dropped
        units = [replace(u, first=piece + i, last=piece + i) for i, u in enumerate(_units(flat, heading))]
        piece += len(units)
        for i, u in enumerate(units):
            if u.kind == "sentence" and u.text.endswith(":"):
                text, j = u.text, i + 1
                while j < len(units) and units[j].kind == "item":
                    longer = f"{text} {units[j].bullet} {units[j].text}"
                    if len(longer) > MAX_QUOTE:
                        break
                    text, j = longer, j + 1
                if j > i + 1:
                    out.append(Quotable(text, heading, "list", first=u.first, last=units[j - 1].last))
            if u.kind == "dropped":
                continue
            words = len(u.text.split())
            if u.text.endswith("?") or words < (3 if u.kind == "item" else 5) or len(u.text) < 20:
                continue
            out.append(u)
    return out


#: private-use code points (icon fonts' glyphs) and PDFium's noncharacters
_PRIVATE = re.compile("[\ue000-\uf8ff\ufffe\uffff]")
#: a running header or footer that ran into the unit: "Code of Practice Page 47 of 72"
_RUNNING_START = re.compile(r"^(?:\S+\s+){0,8}?Page\s+\d+\s+of\s+\d+\s+", re.IGNORECASE)
_RUNNING = re.compile(r"\s*\bPage\s+\d+\s+of\s+\d+\b\s*", re.IGNORECASE)
#: a paragraph number opening a unit: "53 ", "(53) ", "4.2 " before a capital
_PARAGRAPH_NO = re.compile(r"^\(?\d{1,3}(?:\.\d{1,2})*[.)]?\s+(?=[A-Z(“\"])")
#: a cross-reference in parentheses that the sentence splitter left before the sentence it
#: follows: "(See Sections 6(e) and (f) of 29 CFR Part 1910.147 for specific requirements.) In …"
_SEE_FIRST = re.compile(r"^\((?:see|refer to)\b(?:[^()]|\([^()]*\))*\)\s+(?=[A-Z])", re.IGNORECASE)


def tidy(text: str) -> str:
    """A unit as it is quoted: without private-use glyphs, running headers or footers
    ("Page 47 of 72" and the title before it), an opening paragraph number or an opening
    "(See …)" cross-reference."""
    return _tidied(text)[0]


def _tidied(text: str) -> tuple[str, str]:
    """``tidy``'s text and what it took from the start that a quote puts back inside it (a
    paragraph number "(2)", a "(See …)" cross-reference; '' none)."""
    t = _PRIVATE.sub("", text)
    t = _RUNNING_START.sub("", t)
    t = re.sub(r"\s+", " ", _RUNNING.sub(" ", t)).strip()
    number = _PARAGRAPH_NO.match(t)
    rest = t[number.end() :].strip() if number else t
    see = _SEE_FIRST.match(rest)
    rest = rest[see.end() :].strip() if see else rest
    lead = " ".join(m.group().strip() for m in (number, see) if m)
    return rest, lead


@lru_cache(maxsize=2048)  # a page's units are the same for every search that quotes it
def quote_units(raw: str) -> tuple[tuple[int, Quotable], ...]:
    """(position, unit as quoted: ``tidy``) of a page's quotable units of three words or
    more: the candidates of the quote selector, whose vectors the sentence table holds."""
    out = []
    for j, u in enumerate(quotable(raw)):
        text, lead = _tidied(u.text)
        if len(text.split()) >= 3:
            out.append((j, replace(u, text=text, lead=lead)))
    return tuple(out)


def locate(raw: str, unit: str, words: int = 6) -> int:
    """Where a quoted unit (``tidy``'s text) stands in its page's raw text: the start of its
    first ``words`` words with any white space between them, else of its last ``words`` words
    (a running header or paragraph number was cut from its start); -1 when neither is found."""
    parts = unit.split()
    for probe in (parts[:words], parts[-words:]):
        if probe and (m := re.search(r"\s+".join(map(re.escape, probe)), raw)):
            return m.start()
    return -1


#: what stands in a quote where page text between two of its sentences is left out
ELIDED = "[\u2026]"


def quote_pieces(quote: str) -> list[str]:
    """The sentences of a quote, without its ``ELIDED`` marks: a quote that leaves page text
    out is found on its page (the page view, the page image) sentence by sentence."""
    parts = (re.split(r"(?<=[.!?;:])\s+", part) for part in quote.split(ELIDED))
    return [x.strip() for part in parts for x in part if x.strip()]
