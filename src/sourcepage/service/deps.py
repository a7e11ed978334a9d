"""What every router of the service shares: the per-app settings as FastAPI
dependencies, the templates, and the page and text helpers.

``create_app`` (:mod:`sourcepage.service.app`) puts the settings on ``app.state``:
``store`` (the store folder), ``corpus`` (its corpus folder or None), ``questions``
(the loaded question set or None) and ``db``, the app's one read-only
:class:`~sourcepage.store.db.Store`, shared by the request threads (see
``Store.read_only`` for why that is safe). Routes take them as parameters typed
``StorePath``, ``Corpus``, ``Questions`` and ``DB``.
"""

from __future__ import annotations

import importlib.util
import re
import threading
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from fastapi import Depends, HTTPException, Request
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

from sourcepage.corpus.fields import FIELD_LABELS
from sourcepage.corpus.structure import last_heading
from sourcepage.records import TEXT_VERSIONS, Document, Question, parse_page_id
from sourcepage.service.auth import template_context
from sourcepage.store.db import Store
from sourcepage.text.sentences import quote_pieces

HERE = Path(__file__).parent
FACETS = ("topic", "jurisdiction", "authority", "doc_type")
FACET_LABELS = {
    "topic": "Topic",
    "jurisdiction": "Jurisdiction",
    "authority": "Authority",
    "doc_type": "Document type",
    "section": "Section",
    **FIELD_LABELS,
}
#: a text version as a request field (FastAPI validates it): the names of records.TEXT_VERSIONS
Version = Literal[TEXT_VERSIONS]  # type: ignore[valid-type]

#: the judging pages and endpoints exist when the judge package is installed
JUDGING = importlib.util.find_spec("sourcepage.labels.judgments") is not None


def http_url(url: str) -> str:
    """``url`` when it is an http(s) address, else '' (a ``javascript:`` or ``data:`` URL
    from a manifest is shown as text, never made a link)."""
    return url if urlsplit(url.strip()).scheme.lower() in ("http", "https") else ""


TEMPLATES = Jinja2Templates(directory=HERE / "templates", context_processors=[template_context])
TEMPLATES.env.globals["facet_labels"] = FACET_LABELS
TEMPLATES.env.globals["judging"] = JUDGING
TEMPLATES.env.filters["http_url"] = http_url


#: what a quote's "[…]" stands for, said where it is shown
ELIDED_TITLE = "text of the page left out here (a short cross-reference, a caption): see the page"


def emphasise(
    text: str,
    spans: list[list[int]] | None,
    stating: list[list[int]] | None = None,
    elided: list[list[int]] | None = None,
) -> Markup:
    """``text`` escaped; the sentence judged to state the answer (``stating``) in
    ``<mark class="stating">``, the other chosen sentences (``spans``) in ``<strong>``, and
    each "[…]" where page text is left out (``elided``) titled so."""
    marks = [(a, b, "stating") for a, b in stating or []]
    marks += [(a, b, "chosen") for a, b in spans or [] if [a, b] not in (stating or [])]
    marks += [(a, b, "elided") for a, b in elided or []]
    tags = {
        "stating": (Markup('<mark class="stating">'), Markup("</mark>")),
        "chosen": (Markup('<strong class="chosen">'), Markup("</strong>")),
        "elided": (Markup(f'<span class="elided" title="{escape(ELIDED_TITLE)}">'), Markup("</span>")),
    }
    out, at = [], 0
    for a, b, kind in sorted(marks):
        if a < at:
            continue
        out += [escape(text[at:a]), tags[kind][0], escape(text[a:b]), tags[kind][1]]
        at = b
    out.append(escape(text[at:]))
    return Markup("").join(out)


TEMPLATES.env.filters["emphasise"] = emphasise
TEMPLATES.env.filters["last_heading"] = last_heading  # a quote's section, as the page shows it


# --------------------------------------------------------------------------- dependencies

_open_lock = threading.Lock()


def open_shared_store(path: Path) -> Store:
    """The read-only Store an app shares between its request threads."""
    return Store(path).read_only()


async def store_path(request: Request) -> Path:
    return request.app.state.store


async def corpus_dir(request: Request) -> Path | None:
    return request.app.state.corpus


async def question_set(request: Request) -> list[Question] | None:
    return request.app.state.questions


async def shared_store(request: Request) -> Store:
    """The app's read-only Store (reopened if the app was shut down and is used again)."""
    state = request.app.state
    if state.db is None:
        with _open_lock:
            if state.db is None:
                state.db = open_shared_store(state.store)
    return state.db


StorePath = Annotated[Path, Depends(store_path)]
Corpus = Annotated[Path | None, Depends(corpus_dir)]
Questions = Annotated[list[Question] | None, Depends(question_set)]
DB = Annotated[Store, Depends(shared_store)]


# --------------------------------------------------------------------------- helpers


def readable(errors: list[dict[str, Any]]) -> str:
    """Validation errors as one line: ``field: message; ...``."""
    parts = []
    for e in errors:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x not in ("body", "query", "path"))
        parts.append(f"{loc}: {e.get('msg', 'invalid')}" if loc else str(e.get("msg", "invalid")))
    return "; ".join(parts) or "invalid request"


def documents_by_id(db: Store) -> dict[str, Document]:
    return {d.doc_id: d for d in db.documents()}


def resolve_page(db: Store, page_id: str, withdrawn: bool = False) -> tuple[Document, int, dict[str, Any]]:
    """(document, page number, page row with ``n_pages``) of a page id; 422 malformed,
    404 unknown (a withdrawn document's page too, unless ``withdrawn``: the page views keep
    the citations of reviews resolvable)."""
    try:
        doc_id, n = parse_page_id(page_id)
    except ValueError as e:
        raise HTTPException(422, str(e)) from None
    d = db.document(doc_id, withdrawn=withdrawn)
    if d is None:
        raise HTTPException(404, f"no document {doc_id!r} in this store")
    row = db.page(doc_id, n)
    n_pages = db.page_count(doc_id)
    if row is None:
        raise HTTPException(404, f"document {doc_id!r} has pages 1-{n_pages}, not {n}")
    row["n_pages"] = n_pages
    return d, n, row


def locate(text: str, quote: str) -> tuple[int, int] | None:
    """Character span of ``quote`` in ``text`` comparing letters and digits only, so a
    quote in its cleaned form (hyphenation repaired, whitespace collapsed) is found in the
    raw text too; None when it is not there."""
    where = [i for i, c in enumerate(text) if c.isalnum()]
    hay = "".join(text[i].lower() for i in where)
    needle = "".join(c.lower() for c in quote if c.isalnum())
    at = hay.find(needle) if needle else -1
    return (where[at], where[at + len(needle) - 1] + 1) if at >= 0 else None


def locate_quote(text: str, quote: str) -> list[tuple[int, int]]:
    """Character spans of ``quote`` in ``text`` (``locate``): the whole quote's, else each
    of its sentences' (``quote_pieces``) that is found."""
    whole = locate(text, quote)
    if whole is not None:
        return [whole]
    return [span for piece in quote_pieces(quote) if (span := locate(text, piece)) is not None]


def segments(
    text: str,
    marks: list[tuple[int, int]],
    region: tuple[int, int] | None = None,
    quote: tuple[int, int] | list[tuple[int, int]] | None = None,
) -> list[dict]:
    """``text`` cut into pieces for the templates: each with ``hit`` (a query word),
    ``ev`` (inside the evidence region: the chunk) and ``quote`` (inside a quoted
    sentence: ``quote`` is one span or several)."""
    quotes = [quote] if isinstance(quote, tuple) else list(quote or [])
    cuts = {0, len(text)}
    for a, b in marks:
        cuts |= {max(0, min(a, len(text))), max(0, min(b, len(text)))}
    for span in (region, *quotes):
        if span:
            cuts |= {max(0, min(span[0], len(text))), max(0, min(span[1], len(text)))}
    order = sorted(cuts)
    out = []
    for a, b in zip(order, order[1:], strict=False):
        if a == b:
            continue
        out.append(
            {
                "text": text[a:b].replace("\ufffe", "-"),  # PDFium's soft-hyphen marker
                "hit": any(x <= a and b <= y for x, y in marks),
                "ev": bool(region and region[0] <= a and b <= region[1]),
                "quote": any(x <= a and b <= y for x, y in quotes),
            }
        )
    return out


#: the longest passage a result card shows (its page view shows the whole page)
CARD_CHARS = 600
#: where a card's passage may end: a sentence's end (or a line's: a heading, a list item)
_SENTENCE_END = re.compile(r"[.!?;:](?=[\s\"\u201d\u2019)]|$)|\n")


def excerpt(
    text: str, marks: list[tuple[int, int]], limit: int = CARD_CHARS
) -> tuple[str, list[tuple[int, int]]]:
    """At most ``limit`` characters of a passage, never cut inside a word: from its start,
    or from the sentence of its first marked word when that would fall beyond the cut, to
    the last sentence end (else word end) before the limit, with "…" where text was left
    out; the marks moved to match."""
    if len(text) <= limit:
        return text, marks
    start = 0
    first = min((a for a, _ in marks), default=0)
    if first > limit * 0.6:  # the question's first word would be cut off: start at its sentence
        ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, first)]
        start = ends[-1] if ends else text.rfind(" ", 0, first) + 1
        start += len(text[start:]) - len(text[start:].lstrip())
    stop = start + limit
    cut = len(text)
    if stop < len(text):
        ends = [m.end() for m in _SENTENCE_END.finditer(text, start + limit // 2, stop)]
        cut = ends[-1] if ends else max(text.rfind(" ", start, stop), start + limit // 2)
    head = "\u2026 " if start else ""
    body = text[start:cut].rstrip()
    tail = " \u2026" if cut < len(text) else ""
    shift = len(head) - start
    kept = [
        (a + shift, min(b, start + len(body)) + shift)
        for a, b in marks
        if a >= start and a < start + len(body)
    ]
    return head + body + tail, kept


def card_segments(card: dict[str, Any]) -> list[dict]:
    """A result card's passage (``excerpt``) cut into ``segments`` with its question words."""
    text, marks = excerpt(card["passage"], [(int(a), int(b)) for a, b in card.get("highlights", [])])
    return segments(text, marks)


TEMPLATES.env.filters["card_segments"] = card_segments
