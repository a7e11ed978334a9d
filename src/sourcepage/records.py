"""Plain typed records passed between the pipeline stages.

Every stage takes and returns these; none carries behaviour beyond naming. A page
is named ``<doc_id>#p<n>`` (n = 1-based physical page index), a chunk
``<doc_id>#p<n>#c<k>`` (k = 1-based index among the chunks credited to that page).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, get_type_hints

TEXT_VERSIONS: tuple[str, ...] = ("raw", "cleaned", "enriched")


def check_text_version(version: str) -> str:
    """``version`` when it is one of ``TEXT_VERSIONS``; else ValueError naming the choices."""
    if version not in TEXT_VERSIONS:
        raise ValueError(f"unknown text version {version!r}; choose from {TEXT_VERSIONS}")
    return version


#: the largest page number a page id may carry (a document has far fewer pages)
MAX_PAGE_NUMBER = 10_000_000
_PAGE_ID = re.compile(r"^(?P<doc>[a-z0-9][a-z0-9_-]*)#p(?P<n>[1-9][0-9]*)\Z")


def page_id(doc_id: str, number: int) -> str:
    """The one spelling of a page id: ``doc#pN``."""
    return f"{doc_id}#p{number}"


def parse_page_id(pid: str) -> tuple[str, int]:
    """Split ``doc#pN`` into (doc_id, N); ValueError naming the bad id otherwise."""
    m = _PAGE_ID.match(pid)
    if not m:
        raise ValueError(f"not a page id (expected '<doc_id>#p<n>'): {pid!r}")
    if len(m.group("n")) > len(str(MAX_PAGE_NUMBER)) or int(m.group("n")) > MAX_PAGE_NUMBER:
        raise ValueError(f"page number out of range (1-{MAX_PAGE_NUMBER}): {pid!r}")
    return m.group("doc"), int(m.group("n"))


def doc_of(pid: str) -> str:
    """The document id part of a page or chunk id."""
    return pid.split("#", 1)[0]


#: the extra manifest column naming the fields guessed from the text (``title;year``)
GUESSED = "guessed"


def _column(description: str) -> Any:
    """A manifest column of ``Document``: required, described once (the API's schemas and
    /docs read the description through ``document_fields``)."""
    return field(metadata={"description": description})


@dataclass(frozen=True)
class Document:
    """One manifest row: provenance of a PDF. ``extra`` keeps non-standard columns.

    The one declaration of a document's fields, their types and what they hold: the
    manifest's columns (``MANIFEST_COLUMNS``), a search hit's document fields
    (``response.Result``) and ``GET /documents`` (``service.documents.LibraryDocument``)
    are made from it (``document_fields``)."""

    doc_id: str = _column("the document's stable id ([a-z0-9][a-z0-9_-]*): the first part of its page ids")
    file: str = _column("the PDF's file name under the corpus's pdf/ folder")
    title: str = _column("the document's title as a person cites it")
    topic: str = _column("a lower-case slug naming the safety topic (filterable)")
    authority: str = _column("the issuing body")
    jurisdiction: str = _column("where it applies: US, UK, EU, NZ, AU, AU-NSW, …")
    year: str = _column("publication or revision year (may be empty)")
    doc_type: str = _column("guidance, regulation, code_of_practice, fact_sheet, …")
    role: str = _column("primary (a recognised authority's regulation or guidance) or supporting")
    source_url: str = _column("the official address of the original (may be empty)")
    sha256: str = _column("SHA-256 of the PDF file (lower-case hex), checked at ingest")
    pages: str = _column("the manifest's page count, as written there")
    license: str = _column("the document's licence or terms of reuse")
    found_in: str = _column("where this copy came from (may be empty)")
    extra: dict[str, str] = field(
        default_factory=dict, metadata={"description": "the manifest's further columns, by name"}
    )

    def get(self, name: str) -> str:
        """A field by manifest column name, standard or extra ('' when absent)."""
        if name in MANIFEST_COLUMNS:
            return str(getattr(self, name))
        return self.extra.get(name, "")

    @property
    def guessed(self) -> tuple[str, ...]:
        """The fields a drafted manifest guessed from the PDF's text (its ``guessed``
        column, ``corpus.draft``): shown as guesses, never as fact."""
        return tuple(f.strip() for f in self.extra.get(GUESSED, "").split(";") if f.strip())

    def as_dict(self) -> dict[str, str]:
        d = {c: str(getattr(self, c)) for c in MANIFEST_COLUMNS}
        d.update(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Document:
        std = {c: str(d.get(c, "") or "") for c in MANIFEST_COLUMNS}
        extra = {k: str(v) for k, v in d.items() if k not in MANIFEST_COLUMNS}
        return cls(**std, extra=extra)


#: The manifest columns that benchmark-format.md §1 requires, in order: ``Document``'s
#: fields but ``extra``.
MANIFEST_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Document) if f.name != "extra")


def document_fields() -> list[tuple[str, Any, str]]:
    """(name, type, description) of every field of ``Document``, in order (``extra``
    last): what the API's schemas of a hit and of ``GET /documents`` are made from."""
    hints = get_type_hints(Document)
    return [(f.name, hints[f.name], f.metadata["description"]) for f in fields(Document)]


@dataclass(frozen=True)
class PageLayout:
    """What extraction sees on a page (``corpus.extract``; read by the audit): image objects,
    text lines, side-by-side lines."""

    images: int
    lines: int
    side_by_side_lines: int
    left_column_rects: int = 0
    right_column_rects: int = 0
    text_lines: int = 0  # PDFium text lines of 20 characters or more
    wide_lines: int = 0  # of those, lines wider than 1.6 × their median width


@dataclass(frozen=True)
class PageAudit:
    """Layout and quality flags of one physical page (study §3.2)."""

    chars: int
    images: int
    low_text_100: bool
    low_text_300: bool
    multi_column_risk: bool
    spacing_artifact: bool
    contents_page: bool = False
    #: the columns run together line by line in the extracted text (a multi-column risk
    #: too; stored as multi_column_risk = 2, so the text of such a page is never trusted
    #: as a quote that answers)
    interleaved_columns: bool = False


@dataclass(frozen=True)
class Chunk:
    """A retrieval unit. ``page`` is the page it is credited to; ``spans`` lists every
    page it covers as (page number, start, end) character offsets into that page's
    text of the chunk's text version (before any metadata header)."""

    chunk_id: str
    doc_id: str
    page: int
    spans: tuple[tuple[int, int, int], ...]
    text: str

    @property
    def page_id(self) -> str:
        return page_id(self.doc_id, self.page)


@dataclass(frozen=True)
class Hit:
    """One ranked page: its best chunk, score and 1-based rank."""

    rank: int
    page_id: str
    score: float
    chunk_id: str


def renumber(hits: Iterable[Hit]) -> list[Hit]:
    """The hits in the order given, ranked 1, 2, … (pages, scores and chunks kept): the one
    renumbering after a stage reorders a ranking (rerankers, ``sect:``, ``ltr:``, contents last)."""
    return [Hit(rank=r, page_id=h.page_id, score=h.score, chunk_id=h.chunk_id) for r, h in enumerate(hits, 1)]


@dataclass(frozen=True)
class Ranking:
    """The ranked unique pages one method returned for one query."""

    method: str
    text_version: str
    hits: tuple[Hit, ...]

    def pages(self) -> list[str]:
        return [h.page_id for h in self.hits]


@dataclass(frozen=True)
class Question:
    """One benchmark question (benchmark-format.md §3). ``evidence`` maps page id to
    grade; ``excerpts`` maps page id to the labelled excerpt; ``extra`` keeps unknown
    fields."""

    id: str
    question: str
    topic: str
    type: str
    answerability: str
    evidence: dict[str, int] = field(default_factory=dict)
    excerpts: dict[str, str] = field(default_factory=dict)
    reference_answer: str = ""
    answer_points: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """Whether the documents support an answer: ``answer``, ``refuse`` or ``review``."""

    decision: str
    reasons: tuple[str, ...]
