"""Document structure at ingest: each page's heading path and its kind.

A page's heading path ("Part 2 › Subpart 3—Duties of officers › 44 Duty of officers") comes
from the PDF outline (bookmarks) when the outline is dense enough to name sections, else from
heading detection over PDFium's text lines: a line set apart by its style (larger than the
body text, or bold where the body is not) and short enough to be a title, or a bare label
such as "Article 12" / "ANNEX III" followed by its title. Numbering patterns ("Part 2",
"Subpart 3", "Article 10", "Section 44", "4.2.1") give the level; unnumbered headings are
ranked by size. No library detects headings from PDFium's text runs (pdfplumber and PyMuPDF
work on their own parsers; PyMuPDF is AGPL), so this is written here, kept small.

Page kinds flag pages that name topics without stating rules: ``contents`` (tables of
contents), ``index`` (back-of-book indexes), ``glossary`` (definition lists titled so),
``amendments`` (amendments to other enactments: "Replace section 90E(1) with:") and
``change_table`` (correlation tables, amendment histories), ``recitals`` (the numbered
"(28) Economic operators should …" reasons before an act's Article 1). Retrieval may demote them.

``page_spans`` cuts a page's text where each of its headings begins and ``section_at`` names
the stretch a piece of it stands in: the section of a hit's passage or of a quote, and the
section index's span option (``retrieval.sections``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

#: the separator of a heading path
SEP = " › "
#: page kinds, in precedence order
KINDS = ("contents", "index", "change_table", "amendments", "glossary", "recitals")


@dataclass(frozen=True)
class Line:
    """One PDFium text line: its text, its height in points and whether it is bold."""

    text: str
    size: float
    bold: bool


@dataclass(frozen=True)
class Heading:
    """A heading found on page ``page`` (0-based) at line ``line`` of that page."""

    page: int
    line: int
    level: int
    title: str


@dataclass(frozen=True)
class PageStructure:
    """A page's dominant heading path, every path that covers part of it, and its kind."""

    section: str = ""
    sections: tuple[str, ...] = ()
    kind: str = ""


# ---- reading the PDF (called by corpus.extract) ----------------------------------------------

_JUNK_BOOKMARK = re.compile(r"^(?:OLE_LINK|_Toc|_Ref|_Hlk|_GoBack|bookmark\d)", re.IGNORECASE)


def outline(pdf: object) -> list[tuple[int, int, str]]:
    """The PDF's bookmarks as (level, page index, title), junk anchors ("OLE_LINK7") dropped."""
    out: list[tuple[int, int, str]] = []
    for bm in pdf.get_toc():  # type: ignore[attr-defined]
        title = " ".join(bm.get_title().split())
        dest = bm.get_dest()
        if not title or _JUNK_BOOKMARK.match(title) or dest is None:
            continue
        index = dest.get_index()
        if index is not None and index >= 0:
            out.append((bm.level, index, title))
    return out


def page_lines(textpage: object) -> list[Line]:
    """The text lines of a PDFium text page with the height (loose box) and weight of each
    line's first character. Empty when PDFium's character indexes do not match the text."""
    import pypdfium2.raw as pdfium_c

    text = textpage.get_text_range()  # type: ignore[attr-defined]
    if len(text) != textpage.count_chars():  # type: ignore[attr-defined]
        return []
    out: list[Line] = []
    for m in re.finditer(r"[^\r\n]+", text):
        raw = m.group(0)
        body = raw.strip()
        if not body:
            continue
        i = m.start() + len(raw) - len(raw.lstrip())
        box = textpage.get_charbox(i, loose=True)  # type: ignore[attr-defined]
        weight = pdfium_c.FPDFText_GetFontWeight(textpage, i)
        out.append(Line(body, round(abs(box[3] - box[1]), 1), weight >= 600))
    return out


# ---- heading detection ---------------------------------------------------------------------

_PART = re.compile(
    r"^(?:PART|Part|CHAPTER|Chapter|TITLE|Title|ANNEX|Annex|SCHEDULE|Schedule|APPENDIX|"
    r"Appendix)\s+([0-9]{1,3}[A-Z]?|[IVXLC]+|[A-Z])\b"
)
_SUBPART = re.compile(r"^(?:Subpart|SUBPART|Division|DIVISION|SECTION\s+[IVX]+)\s*[0-9A-Z]*\b")
_ARTICLE = re.compile(r"^(?:Article|ARTICLE|Section|SECTION|Regulation|Clause|Rule)\s+\d+[A-Z]?\b")
_DOTTED = re.compile(r"^(\d+(?:\.\d+)+)\.?\s+\S")
_NUMBERED = re.compile(r"^\d{1,3}[A-Z]{0,2}\.?\s+(?!CFR\b|USC\b|U\.S\.C)[A-Z‘'\"(]")
_BARE = re.compile(
    r"^(?:Article|ARTICLE|Section|ANNEX|Annex|CHAPTER|Chapter|PART|Part|Schedule|SCHEDULE)"
    r"\s+(?:\d+[A-Z]?|[IVXLC]+)$"
)
_PAGE_REF = re.compile(r"(?:\s|\.)\d{1,3}(?:[-–]\d{1,3})?$")
_LEADER = re.compile(r"(?:\.\s*){4,}\d+\s*$")


def _level(title: str, size_ratio: float, bold: bool) -> int:
    """Nesting level of a heading: from its numbering, else from its style."""
    if _PART.match(title):
        return 0
    if _SUBPART.match(title):
        return 1
    if _ARTICLE.match(title):
        return 2
    m = _DOTTED.match(title)
    if m:
        return 2 + m.group(1).count(".")
    if _NUMBERED.match(title):
        return 2
    return 3 if size_ratio >= 1.15 else 5


def _listing_page(lines: Sequence[str]) -> bool:
    """A contents or index page: most lines end in a page reference ("44 Duty of officers 42")."""
    body = [ln for ln in lines if len(ln) > 3]
    if len(body) < 6:
        return False
    return sum(1 for ln in body if _page_ref(ln)) >= 0.45 * len(body)


def _page_ref(line: str) -> bool:
    """A listing line: it ends in a page number, or is one (a wrapped entry's number)."""
    return bool(_PAGE_REF.search(line) or _LEADER.search(line) or line.strip().isdigit())


def _norm(s: str) -> str:
    return re.sub(r"[\d\s]+", " ", s).strip().lower()


def _body_style(pages: Sequence[Sequence[Line]]) -> tuple[float, bool]:
    sizes: Counter[float] = Counter()
    bold = 0
    for lines in pages:
        for ln in lines:
            if len(ln.text) >= 30:
                sizes[round(ln.size * 2) / 2] += len(ln.text)
                bold += len(ln.text) if ln.bold else -len(ln.text)
    return (sizes.most_common(1)[0][0] if sizes else 0.0), bold > 0


def _repeated(pages: Sequence[Sequence[Line]]) -> set[str]:
    """Lines that recur on many pages (sidebars), or on 3 pages or more at a page's top or
    bottom (running headers, numbers aside): never headings."""
    seen: Counter[str] = Counter()
    edge: Counter[str] = Counter()
    for lines in pages:
        seen.update({_norm(ln.text) for ln in lines})
        edge.update({_norm(ln.text) for ln in [*lines[:2], *lines[-2:]]})
    cut = max(3, int(0.3 * len(pages)))
    return {t for t, n in seen.items() if n >= cut and t} | {t for t, n in edge.items() if n >= 3 and t}


def _candidate(ln: Line, body: float, body_bold: bool) -> tuple[bool, float]:
    t = ln.text
    ratio = ln.size / body if body > 0 else 1.0
    styled = ratio >= 1.15 or (ln.bold and not body_bold)
    ok = (
        2 <= len(t) <= 120
        and len(t.split()) <= 16
        and (t[0].isupper() or t[0].isdigit())
        and any(c.isalpha() for c in t)
        and not t.endswith((",", ";", ".", ":", "”.", ".”"))
        and not _LEADER.search(t)
    )
    return ok and (styled or bool(_BARE.match(t))), ratio


def detect_headings(pages: Sequence[Sequence[Line]]) -> list[Heading]:
    """Headings of a document from its text lines (see the module docstring)."""
    body, body_bold = _body_style(pages)
    skip = _repeated(pages)
    out: list[Heading] = []
    for p, lines in enumerate(pages):
        i, refs = 0, sum(1 for ln in lines if _page_ref(ln.text))
        if _listing_page([ln.text for ln in lines]):  # a contents page: headings after it only
            i = 1 + max(k for k, ln in enumerate(lines) if _page_ref(ln.text))
        while i < len(lines):
            ln = lines[i]
            ok, ratio = _candidate(ln, body, body_bold)
            if not ok or (_norm(ln.text) in skip and not _BARE.match(ln.text)):
                i += 1
                continue
            title, j = ln.text, i + 1
            # a bare label takes the next line as its title; a styled heading its continuations
            while j < len(lines) and j <= i + 2 and len(title) < 150:
                nxt = lines[j]
                same = nxt.bold == ln.bold and abs(nxt.size - ln.size) < 0.6
                if _BARE.match(title) and j == i + 1 and len(nxt.text) <= 120:
                    title += " " + nxt.text
                elif same and (nxt.text[:1].islower() or title.endswith(("—", "-", "and", "of"))):
                    title += " " + nxt.text
                else:
                    break
                j += 1
            listed = (j < len(lines) - 1 and lines[j].text.isdigit()) or (refs >= 4 and _page_ref(title))
            if not listed:  # a contents entry ("Schedule 1 / Transitional provisions / 132") is not
                out.append(Heading(p, i, _level(title, ratio, ln.bold), title))
            i = j
    return out


def _from_outline(toc: Sequence[tuple[int, int, str]], pages: Sequence[Sequence[str]]) -> list[Heading]:
    """Bookmarks as headings, each placed at the line of its page that starts its title."""
    out: list[Heading] = []
    for level, page, title in toc:
        if page >= len(pages):
            continue
        key = _norm(title)[:25]
        line = next((i for i, t in enumerate(pages[page]) if key and _norm(t).startswith(key)), 0)
        out.append(Heading(page, line, level, title))
    return out


# ---- heading paths and kinds ---------------------------------------------------------------

_KIND_TITLES = (
    ("contents", re.compile(r"^(?:table of )?contents\b", re.IGNORECASE)),
    ("index", re.compile(r"^index\b", re.IGNORECASE)),
    (
        "change_table",
        re.compile(
            r"correlation table|amendment history|version history|document history|reprints? notes|"
            r"amendments incorporated|summary of (?:changes|amendments)",
            re.IGNORECASE,
        ),
    ),
    ("amendments", re.compile(r"\bamendments?\b|\brepeals?\b", re.IGNORECASE)),
    (
        "glossary",
        re.compile(
            r"^(?:glossary|definitions|abbreviations|acronyms|terms and definitions)\b", re.IGNORECASE
        ),
    ),
)
_AMEND_LINE = re.compile(
    r"^(?:Replace|Insert|Repeal|Revoke|Omit|After [^.]{1,60}, insert|In (?:section|regulation|clause|"
    r"Schedule|the heading|Part)\b.{0,120}\b(?:replace|insert|repeal|omit|revoke)\b)"
)


def _kind(path: Sequence[str], lines: Sequence[str], listing: bool, contents_flag: bool) -> str:
    """The page's kind from the titles of its heading path and its lines."""
    found = {
        k for k, pat in _KIND_TITLES for t in path if pat.search(t.split(" ", 2)[-1] if _PART.match(t) else t)
    }
    if contents_flag or (listing and "index" not in found):
        found.add("contents")
    if sum(1 for ln in lines if _AMEND_LINE.match(ln)) >= 3:
        found.add("amendments")
    return next((k for k in KINDS if k in found), "")


def _usable_outline(toc: Sequence[tuple[int, int, str]], n_pages: int) -> bool:
    """An outline names sections when it has a bookmark for every six pages or so."""
    return len(toc) >= max(3, n_pages // 6)


def document_structure(
    texts: Sequence[str],
    lines: Sequence[Sequence[Line]] | None = None,
    toc: Sequence[tuple[int, int, str]] = (),
    contents_flags: Sequence[bool] | None = None,
) -> list[PageStructure]:
    """One ``PageStructure`` per page. ``lines`` are PDFium's styled lines per page (None for a
    text source: its plain lines then, where only bare labels can be found)."""
    plain = [[ln.strip() for ln in t.split("\n") if ln.strip()] for t in texts]
    styled = (
        lines
        if lines is not None and len(lines) == len(texts)
        else [[Line(t, 0.0, False) for t in p] for p in plain]
    )
    line_texts = [[ln.text for ln in p] for p in styled]
    if _usable_outline(toc, len(texts)):
        heads = _from_outline(toc, line_texts)
    else:
        heads = detect_headings(styled)
    by_page: dict[int, list[Heading]] = {}
    for h in sorted(heads, key=lambda h: (h.page, h.line)):
        by_page.setdefault(h.page, []).append(h)
    stack: list[Heading] = []
    out: list[PageStructure] = []
    for p, page_lines_ in enumerate(line_texts):
        n = max(len(page_lines_), 1)
        if _listing_page(page_lines_):
            stack = []  # a contents page belongs to no section
        spans: list[tuple[str, int, list[str]]] = []  # (path, lines covered, titles)
        start = 0
        for h in by_page.get(p, []):
            if h.line > start or (not spans and stack):
                spans.append((_path(stack), h.line - start, [x.title for x in stack]))
            while stack and stack[-1].level >= h.level:
                stack.pop()
            stack.append(h)
            start = h.line
        spans.append((_path(stack), n - start, [x.title for x in stack]))
        covered = [s for s in spans if s[0]]
        paths = tuple(dict.fromkeys(s[0] for s in covered))
        best = max(covered, key=lambda s: s[1], default=("", 0, []))
        titles = best[2]
        flag = bool(contents_flags[p]) if contents_flags is not None else False
        kind = _kind(titles, plain[p], _listing_page(plain[p]), flag)
        out.append(PageStructure(best[0], paths, kind))
    return _recitals(out, plain, heads)


_RECITAL = re.compile(r"^\(\d{1,3}\)\s+[A-Z]")
_ARTICLE_1 = re.compile(r"^(?:Article|ARTICLE)\s+1\b(?!\d)")


def _recitals(
    out: list[PageStructure], plain: Sequence[Sequence[str]], heads: Sequence[Heading]
) -> list[PageStructure]:
    """Pages before an act's "Article 1" holding numbered recitals ("(28) Economic operators
    should …") are of kind ``recitals``: they give reasons, the articles state the rules."""
    first = next(
        (h.page for h in sorted(heads, key=lambda h: (h.page, h.line)) if _ARTICLE_1.match(h.title)), None
    )
    if first is None:
        return out
    return [
        PageStructure(p.section, p.sections, "recitals")
        if i < first and not p.kind and sum(1 for ln in plain[i] if _RECITAL.match(ln)) >= 2
        else p
        for i, p in enumerate(out)
    ]


def _path(stack: Sequence[Heading]) -> str:
    return SEP.join(h.title for h in stack)


def last_heading(path: str) -> str:
    """The most specific heading of a heading path ("45 Duties of workers")."""
    return path.rpartition(SEP)[2]


def section_text(structure: PageStructure) -> str:
    """The searchable heading text of a page: every heading of every path covering it."""
    titles = dict.fromkeys(t for p in structure.sections for t in p.split(SEP))
    return "\n".join(titles)


_TITLE_KEY = 25


def page_spans(text: str, paths: Sequence[str]) -> list[tuple[str, int, int]]:
    """The page's text cut where each heading path after the first begins: (path, start, end)
    per stretch. A heading is found by the first 25 characters of its last title, white space
    runs and case ignored (a title is joined from several lines; the page keeps the breaks).
    The first path (often carried over from the page before) starts at 0; a heading whose
    title is not found on the page adds its stretch to the one before."""
    if len(paths) < 2:
        return [(paths[0], 0, len(text))] if paths else []
    starts = [(paths[0], 0)]
    cursor = 0
    for path in paths[1:]:
        words = " ".join(path.split(SEP)[-1].split())[:_TITLE_KEY].split()
        found = (
            re.compile(r"\s+".join(map(re.escape, words)), re.IGNORECASE).search(text, cursor)
            if words
            else None
        )
        if found is None:
            continue
        cursor = found.start() + 1
        starts.append((path, found.start()))
    ends = [b for _, b in starts[1:]] + [len(text)]
    return [(path, b, e) for (path, b), e in zip(starts, ends, strict=True) if e > b]


def section_at(text: str, paths: Sequence[str], start: int, end: int) -> str:
    """The heading path of the stretch of the page (``page_spans``) that ``text[start:end]``
    overlaps most, the first of equals; '' when it overlaps none."""
    overlap = {path: min(end, e) - max(start, b) for path, b, e in page_spans(text, paths)}
    best = max(overlap, key=lambda p: overlap[p], default="")
    return best if overlap.get(best, 0) > 0 else ""


# ---- sections a text cites -----------------------------------------------------------------

#: each kind of provision a citation names → its written forms (a form ending in "." may run
#: into its number: "s.44"); and the label its headings start with
_CITE_FORMS = {
    "article": ("articles", "article", "art."),
    "section": ("sections", "section", "sec.", "ss.", "ss", "s.", "s"),
    "clause": ("clauses", "clause", "cl."),
    "regulation": ("regulations", "regulation", "reg.", "r."),
    "schedule": ("schedules", "schedule", "sch."),
    "annex": ("annexes", "annex"),
    "part": ("parts", "part"),
    "chapter": ("chapters", "chapter"),
    "appendix": ("appendices", "appendix", "app."),
    "subpart": ("subparts", "subpart"),
    "division": ("divisions", "division"),
}
_CITE_LABELS = {
    "article": r"Article|Art\.?",
    "section": r"Section|s\.?",
    "clause": r"Clause|cl\.?",
    "regulation": r"Regulation|Reg\.?|r\.?",
}
#: kinds whose headings may be a bare number: "44 Duty of officers" is section 44 of the NZ
#: Act, "4.3. Entry permits" clause 4.3 of an Australian code
_BARE_NUMBERED = ("section", "clause", "regulation")
_FORM_KIND = {f: k for k, forms in _CITE_FORMS.items() for f in forms}
_FORMS = "|".join(
    re.escape(f) + (r"\s*" if f.endswith(".") else r"\s+") for f in sorted(_FORM_KIND, key=len, reverse=True)
)
_NUM = r"(?:\d{1,3}[A-Z]{0,2}(?:\.\d{1,3})*|[IVXLC]{1,6}|[A-Z])(?![\w/]|\.\d)"
_CITE = re.compile(
    rf"(?<![\w'’.])(?P<form>(?i:{_FORMS}))(?P<nums>{_NUM}(?:\s*(?:,|&|(?i:and|or|to))\s*{_NUM})*)"
)


def cited_sections(text: str) -> list[tuple[str, str]]:
    """The provisions ``text`` cites, as (kind, number), in order, each once: "Article 10",
    "section 44", "s 44", "clause 4.3", "Schedule 1", "Annex III", "Part 2", "Subpart M"; a
    list gives each ("ss 36 and 37", "Articles 10, 11 or 13"). A number with a slash is an
    instrument's, not a provision's ("Regulation 2023/1230"), and a lettered subpart is a US
    standard ("OSHA Subpart M", fall protection in construction), which guidance cites whole:
    its own "Subpart M – Fall Protection: Non-mandatory Appendices" is no answer to either."""
    out = []
    for m in _CITE.finditer(text):
        kind = _FORM_KIND[re.sub(r"\s+", "", m.group("form")).lower()]
        nums = re.findall(_NUM, m.group("nums"))
        out += [(kind, n) for n in nums if not (kind == "subpart" and n.isalpha())]
    return list(dict.fromkeys(out))


def cites(title: str, kind: str, num: str) -> bool:
    """Whether a heading title is the cited provision: labelled ("Article 10 Obligations …",
    "Schedule 1 …", "Part 2 …", "Subpart M") or, for sections, clauses and regulations,
    numbered alone ("44 Duty of officers", "4.3. Entry permits"; not "4.30" or "4.3.1",
    which a path under 4.3 holds below it)."""
    return _citation(kind, num).match(title.strip()) is not None


def path_cites(path: str, kind: str, num: str) -> bool:
    """Whether one heading of a heading path is the cited provision (``cites``)."""
    pattern = _citation(kind, num)
    return any(pattern.match(t.strip()) for t in path.split(SEP))


@lru_cache(maxsize=256)
def _citation(kind: str, num: str) -> re.Pattern[str]:
    """The heading-title pattern of one cited provision (compiled once: a filter tests every
    page's headings)."""
    n = re.escape(num)
    forms = rf"(?i:{_CITE_LABELS.get(kind, kind)})\s*(?i:{n})(?!\w)(?!\.\d)"
    if kind in _BARE_NUMBERED:
        forms += rf"|{n}(?:\.(?!\d))?\s+\S"
    return re.compile(forms)
