"""Guesses of a PDF's manifest fields from its own text: title, year, authority and
jurisdiction, document type, topic, role (``corpus.draft`` writes them to a draft manifest).

Every guess carries its evidence (``"OSHA" on page 1``), so a person can check it and the
hits can say it was guessed. The authorities are a short list of the issuing bodies of
workplace-safety documents, each with the manifest jurisdiction code it implies (the codes
``retrieval.routing`` then reads from the manifest: it derives its names from the corpus,
so this is the only hand-written list of authorities). More specific bodies come first
("SafeWork NSW" before "Safe Work Australia": a NSW code says it is based on the model code).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sourcepage.corpus.structure import Line


@dataclass(frozen=True)
class Guess:
    """One guessed field: its value and where it was read (``evidence``)."""

    field: str
    value: str
    evidence: str


#: (pattern, authority as a manifest writes it, jurisdiction code), most specific first
AUTHORITIES: tuple[tuple[str, str, str], ...] = (
    (r"SafeWork NSW|NSW Government|NSW (?:note|Work Health and Safety)", "SafeWork NSW", "AU-NSW"),
    (r"NSW Department|\bnsw\.gov\.au", "NSW Government", "AU-NSW"),
    (
        r"WorkSafe (?:WA|Western Australia)|Government of Western Australia|Department of (?:Energy, )?Mines"
        r"|commerce\.wa\.gov\.au",
        "WorkSafe WA",
        "AU-WA",
    ),
    (r"NT WorkSafe|WorkSafe NT|Northern Territory Government", "NT WorkSafe", "AU-NT"),
    (r"WorkSafe Victoria", "WorkSafe Victoria", "AU-VIC"),
    (
        r"Workplace Health and Safety Queensland|Queensland Government|worksafe\.qld\.gov\.au",
        "Workplace Health and Safety Queensland",
        "AU-QLD",
    ),
    (r"SafeWork SA", "SafeWork SA", "AU-SA"),
    (r"Safe Work Australia", "Safe Work Australia", "AU"),
    (
        r"Commonwealth of Australia|Australian Safety and Compensation Council"
        r"|Federal Register of Legislative",
        "Commonwealth of Australia",
        "AU",
    ),
    (r"WorkSafe New Zealand|WorkSafe NZ", "WorkSafe New Zealand", "NZ"),
    (
        r"Health and Safety at Work Act 2015|New Zealand Legislation",
        "New Zealand Parliamentary Counsel Office",
        "NZ",
    ),
    (r"WorkSafeBC", "WorkSafeBC", "CA-BC"),
    (r"CCOHS|Canadian Centre for Occupational Health", "CCOHS", "CA"),
    (r"Health and Safety Authority", "Health and Safety Authority (Ireland)", "IE"),
    (r"EU-OSHA|European Agency for Safety and Health", "EU-OSHA", "EU"),
    (
        r"(?:Regulation|Directive) \(EU\)|Official Journal of the European Union|European Parliament",
        "European Parliament and Council",
        "EU",
    ),
    (r"Health and Safety Executive|\bHSE\b|hse\.gov\.uk", "UK Health and Safety Executive (HSE)", "UK"),
    (r"NIOSH|National Institute for Occupational Safety", "US NIOSH (CDC)", "US"),
    (
        r"\bOSHA\b|Occupational Safety and Health Administration|osha\.gov",
        "US OSHA (Department of Labor)",
        "US",
    ),
)
_AUTHORITY_RES = tuple((re.compile(p), a, j) for p, a, j in AUTHORITIES)

#: (pattern over the title and first page, doc_type), first match wins; "guidance" otherwise
DOC_TYPES: tuple[tuple[str, str], ...] = (
    (r"(?i)\bquick ?card\b", "quick_card"),
    (r"(?i)\bfact ?sheet|\binformation sheet\b|\bhoja informativa\b", "fact_sheet"),
    (r"(?i)\bcode of practice\b", "code_of_practice"),
    (r"(?i)\bchecklist\b", "checklist"),
    (r"(?i)\bguidance on regulations\b|\bguide\b|\bguidance\b", "guidance"),
    (r"\b(?:Regulation|Directive) \((?:EU|EC)\)|\bAct \d{4}\b|\bRegulations \d{4}\b", "regulation"),
    (r"(?i)\btraining\b", "training"),
)
#: types named only by a title ("Model Work Health and Safety Bill"; a page names other acts)
TITLE_TYPES: tuple[tuple[str, str], ...] = ((r"\b(?:Regulations|Bill)\b", "regulation"),)
#: (pattern over the title, else the first pages, topic slug), first match wins
TOPICS: tuple[tuple[str, str], ...] = (
    (r"(?i)lockout|tagout|hazardous energy|energía peligrosa", "loto"),
    (r"(?i)confined space", "confined_spaces"),
    (r"(?i)demolition", "demolition"),
    (r"(?i)excavation|trench", "excavation"),
    (r"(?i)formwork|falsework|temporary works", "temporary_works"),
    (r"(?i)elevating work platform", "elevating_work_platforms"),
    (
        r"(?i)consultation, co-?operation|principal contractor|construction procurement",
        "contractor_coordination",
    ),
    (r"(?i)\bfalls?\b|fall protection|working at height|walking.working surface", "fall_protection"),
    (r"(?i)first.aid", "first_aid"),
    (r"(?i)electric", "electrical"),
    (r"(?i)manual (?:tasks|handling)", "manual_handling"),
    (r"(?i)materials handling", "materials_handling"),
    (r"(?i)amputation|safeguard|machine guarding|machinery|woodworking|\bplant\b", "machine_guarding"),
    (r"(?i)scaffold", "scaffolding"),
    (r"(?i)asbestos", "asbestos"),
    (r"(?i)\bnoise\b", "noise"),
    (r"(?i)hazardous (?:chemicals|substances)|chemical", "hazardous_substances"),
    (r"(?i)construction", "construction"),
    (r"(?i)hazard analysis|risk assessment|manage .*risks", "hazard_assessment"),
    (
        r"(?i)health and safety at work act|general duties|work health and safety (?:bill|regulations)",
        "general_duties",
    ),
)
#: a year standing alone: not part of "2006/42", "1910.147", "3146-05R" or a longer number
_YEAR = re.compile(r"(?<![\d/.\-])(19[5-9]\d|20\d\d)(?![\d/]|\.\d)")
#: a metadata title that names a file or a tool, not the document ("FactSheet3", "Paste-up")
_JUNK_TITLE = re.compile(r"(?i)paste-up|untitled|microsoft word|\.docx?\b|\.indd\b|\.pdf\b|^[\w-]*\d[\w-]*$")


def quote(text: str, limit: int = 60) -> str:
    """``text`` on one line, cut to ``limit`` characters, for evidence."""
    s = " ".join(text.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def guess_authority(pages: Sequence[str], author: str) -> tuple[Guess, Guess] | None:
    """(authority, jurisdiction) of the authority named first: in the PDF's Author field,
    else on page 1, 2, 3 (within one, the earliest named; at one place, the more specific of
    ``AUTHORITIES``); None when none is named."""
    texts = [author, *pages]
    sources = [
        (f"on page {i}" if i else "in the PDF's Author field", " ".join((t or "").split()))
        for i, t in enumerate(texts)
    ]
    for where, text in sources:
        found = [
            (m.start(), i, m) for i, (rx, _, _) in enumerate(_AUTHORITY_RES) if (m := rx.search(text or ""))
        ]
        if found:
            _, i, m = min(found, key=lambda f: (f[0], f[1]))
            _, authority, code = _AUTHORITY_RES[i]
            ev = f"'{quote(m.group(0))}' {where}"
            authority, ev_auth = _adopts_model(authority, code, sources, ev)
            return Guess("authority", authority, ev_auth), Guess("jurisdiction", code, ev)
    return None


#: a state's code that says it adopts the national model code (a NSW code's "NSW note")
_MODEL_CODE = re.compile(
    r"based on (?:a|the) national model code|model code of practice developed by Safe Work Australia"
)


def _adopts_model(authority: str, code: str, sources: Sequence[tuple[str, str]], ev: str) -> tuple[str, str]:
    """An Australian state's authority, marked as adopting the national model code when its
    text says so (``retrieval.routing.legal_jurisdiction`` reads the remark as the manifest
    writes it: the document states the model code's text)."""
    if not code.startswith("AU-"):
        return authority, ev
    for where, text in sources:
        m = _MODEL_CODE.search(text or "")
        if m:
            return (
                f"{authority} (based on Safe Work Australia model code)",
                f"{ev}; '{quote(m.group(0))}' {where}",
            )
    return authority, ev


def _good_metadata_title(title: str) -> bool:
    """A metadata title a person would cite: two words or more, two of them words of
    letters, not a file or tool name ("FactSheet3", "6869 DOL OSHA 3157 Paste-up")."""
    words = title.split()
    return (
        len(words) >= 2
        and sum(w.isalpha() and len(w) >= 3 for w in words) >= 2
        and not _JUNK_TITLE.search(title)
    )


def _sentence_case(text: str) -> str:
    """An all-capitals title in sentence case ("MANAGING ELECTRICAL RISKS" → "Managing
    electrical risks"); any other kept as it is."""
    letters = [c for c in text if c.isalpha()]
    if letters and all(c.isupper() for c in letters):
        return text[:1].upper() + text[1:].lower()
    return text


def largest_text(lines: Sequence[Line]) -> str:
    """The first page's title: the first run of lines set in its largest type (within 5 %,
    four lines at most), skipping a size whose run is one word ("FactSheet" above the real title)."""
    for size in sorted({ln.size for ln in lines if ln.size > 0}, reverse=True):
        run: list[str] = []
        for ln in lines:
            if ln.size >= size * 0.95 and len(run) < 4:
                run.append(ln.text)
            elif run:
                break
        text = " ".join(" ".join(run).split())
        if len(text.split()) >= 2:
            return text[:200]
    return ""


def guess_title(meta_title: str, lines: Sequence[Line], page: int) -> Guess | None:
    """The PDF's metadata title when it reads as one, else the first page's largest text."""
    meta = " ".join((meta_title or "").split())
    if meta and _good_metadata_title(meta):
        return Guess("title", quote(meta, 200), "the PDF's Title field")
    text = largest_text(lines)
    if text:
        return Guess("title", _sentence_case(text), f"the largest text on page {page}")
    return None


def _latest_year(text: str, this_year: int) -> tuple[int, re.Match[str]] | None:
    found = [(int(m.group(1)), m) for m in _YEAR.finditer(text or "") if int(m.group(1)) <= this_year]
    return max(found, key=lambda x: x[0]) if found else None


def guess_year(lines: Sequence[Line], page: int, pages: Sequence[str], created: str) -> Guess | None:
    """The latest year in the short lines (six words at most) of the first page with text
    ("AUGUST 2019", "2002 (Revised)", "as at 5 April 2025": a cover's date is the edition's;
    "since 1994." in a sentence is not), else the
    PDF's creation date, else the latest year in the text of the first pages."""
    import datetime

    this_year = datetime.date.today().year
    on_cover = [
        (f[0], ln.text)
        for ln in lines
        if len(ln.text.split()) <= 6 and (f := _latest_year(ln.text, this_year))
    ]
    if on_cover:
        year, line = max(on_cover, key=lambda x: x[0])
        return Guess("year", str(year), f"'{quote(line)}' on page {page}")
    m = re.match(r"D:(\d{4})", created or "")
    if m and 1950 <= int(m.group(1)) <= this_year:
        return Guess("year", m.group(1), "the PDF's creation date")
    for i, text in enumerate(pages):
        f = _latest_year(text, this_year)
        if f:
            around = text[max(0, f[1].start() - 25) : f[1].end() + 15]
            return Guess("year", str(f[0]), f"'{quote(around)}' on page {i + 1}")
    return None


def _first(
    patterns: Sequence[tuple[str, str]], sources: Sequence[tuple[str, str]], name: str
) -> Guess | None:
    for where, text in sources:
        for rx, value in patterns:
            m = re.search(rx, text or "")
            if m:
                return Guess(name, value, f"'{quote(m.group(0))}' {where}")
    return None


def guess_doc_type(title: str, meta_title: str, pages: Sequence[str]) -> Guess:
    """The type named in the title (or the PDF's Title field: "FactSheet3"), else on the
    first page; ``guidance`` when none is."""
    titles = [("in the title", title), ("in the PDF's Title field", meta_title)]
    page1 = [(f"on page {i + 1}", t) for i, t in enumerate(pages[:1])]
    found = _first((*DOC_TYPES, *TITLE_TYPES), titles, "doc_type") or _first(DOC_TYPES, page1, "doc_type")
    return found or Guess("doc_type", "guidance", "no type named (default)")


def guess_topic(title: str, pages: Sequence[str]) -> Guess:
    """The topic named in the title, else on the first pages; ``general`` when none is."""
    sources = [("in the title", title)] + [(f"on page {i + 1}", t) for i, t in enumerate(pages)]
    return _first(TOPICS, sources, "topic") or Guess("topic", "general", "no topic named (default)")


def guess_role(authority: Guess | None, doc_type: Guess) -> Guess:
    """``primary`` for a recognised authority's regulation, code or guidance, else ``supporting``."""
    if authority is not None and doc_type.value != "training":
        return Guess("role", "primary", f"issued by {authority.value}")
    return Guess(
        "role", "supporting", "no recognised authority" if authority is None else "training material"
    )
