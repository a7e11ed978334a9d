"""The search response, declared once (spec §5): what ``sourcepage search --json``
prints, ``POST /search`` answers (its ``response_model``, so ``/docs`` shows this schema),
the web page and the CLI read, and eval's per_question.jsonl outlines
(``pipeline.outline``).

TypedDicts, not classes: the pipeline builds plain dicts at the edge (JSON as it is, no
re-encoding per request), and a type checker and pydantic (the API's schema) read these
declarations. A hit carries every field of its document (``HitDocument``, made from
``records.Document``: a field added there reaches hits, their schema and ``/docs``); a
field of the page is added in ``query.PageHit.as_dict`` and in ``Result`` here; the CLI and
the web page show it where they choose.
"""

from typing import Annotated, Any, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from sourcepage.records import document_fields

__all__ = [
    "Answer",
    "Cited",
    "Duplicate",
    "FirstQuote",
    "HitDocument",
    "Quote",
    "Referral",
    "Result",
    "Routing",
    "SearchResponse",
    "Support",
    "Timings",
]


class Duplicate(TypedDict):
    """A near-duplicate page grouped under a result."""

    page: str
    doc_id: str
    page_number: int
    rank: int
    score: float
    similarity: float
    title: str
    jurisdiction: str


#: every field of a hit's document, typed and described as ``records.Document`` declares
#: them (``/docs`` shows each description)
HitDocument = TypedDict(  # type: ignore[misc]  # made from records.Document's fields
    "HitDocument", {name: Annotated[kind, Field(description=text)] for name, kind, text in document_fields()}
)


class Result(HitDocument):
    """One ranked page with its provenance: its document's fields (``HitDocument``), then
    the page's (``query.PageHit.as_dict``) and the extra columns as lists with their asset
    links (``pipeline``)."""

    rank: int
    page: str
    page_number: int
    page_label: str
    citation: str
    ocr_confidence: float | None
    score: float
    chunk_id: str
    passage: str
    highlights: list[list[int]]
    guessed: list[str]
    section: str
    page_kind: str
    duplicates: list[Duplicate]
    fields: dict[str, list[str]]
    asset_links: list[dict[str, str]]


class Support(TypedDict):
    """The answer policy's verdict inputs: P(supported), the thresholds in force
    (``support.decide.Decider``), the policy and the feature values."""

    probability: float
    t_refuse: float
    t_answer: float | None
    policy: str
    origin: str
    features: dict[str, float]


class Routing(TypedDict):
    """The jurisdictions the question names (``retrieval.parsed.Route``) and whether the
    ranking was routed to them."""

    jurisdictions: list[str]
    matched: list[str]
    uncovered: list[str]
    compares: bool
    groups: list[list[str]]
    applied: bool


class Cited(TypedDict):
    """A provision the question cites and the returned pages under it."""

    citation: str
    pages: list[str]


class Timings(TypedDict):
    load: float
    rank: float
    decide: float


class Quote(TypedDict):
    """A quoted passage (``support.answer``): whole sentences under one heading, its chosen
    units and their spans, the span of the sentence judged to state the answer
    (``stating``, [start, end) in ``text``; in one quote only, the one that ``answers``), the
    spans of the "[…]" marks standing for page text left out (``elided``), its citation."""

    text: str
    sentences: list[str]
    spans: list[list[int]]
    stating: NotRequired[list[list[int]]]
    elided: NotRequired[list[list[int]]]
    page: str
    chunk_id: str
    citation: str
    jurisdiction: str
    score: float
    answers: bool
    layout_risk: bool
    section: str


class FirstQuote(TypedDict):
    """Why the first quote is not from the top page (present only then)."""

    page: str
    rank: int
    top: str
    p_states: float
    top_p_states: float | None
    why: str


class Answer(TypedDict):
    """The extractive answer (``support.answer.extract_answer``, checked by the gate)."""

    status: str
    asked: str
    fact_found: bool
    quotes: list[Quote]
    text: str
    reason: NotRequired[str]
    check: NotRequired[dict[str, Any]]
    other_party: NotRequired[dict[str, list[str]]]
    first_quote: NotRequired[FirstQuote]


class Referral(TypedDict):
    """The reviewer's desk case a ``review`` decision was referred to."""

    id: int
    url: str


class SearchResponse(TypedDict):
    """The whole response of one search (spec §5)."""

    question: str
    method: str
    text_version: str
    k: int
    filters: dict[str, Any]
    decision: Literal["answer", "review", "refuse"]
    reasons: list[str]
    support: Support | None
    jurisdictions: list[str]
    routing: Routing
    cited: list[Cited]
    query_ms: float
    timings_ms: Timings
    results: list[Result]
    answer: NotRequired[Answer]
    referral: NotRequired[Referral]
    reviewed: NotRequired[dict[str, Any]]
    refer: NotRequired[bool]
