"""The question, parsed once (``Query``), and the typed page hits that travel with it
through rank → decide → quote (``PageHit``).

Before this module the search path re-derived the question in every stage (content terms
in api.py, features, check and answer; the asked value three times; the route twice). A
``Query`` holds all of it: the text, its content terms with idf weights (and their
Snowball stems, a stem weighing as its heaviest word), the BM25 tokens, the facts it asks
for (``text.facts``) and the jurisdictions it names (``retrieval.routing``). It sits
between retrieval and support: it reads both above it, and support/ reads it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from sourcepage.corpus.pagelabels import citation
from sourcepage.corpus.structure import cited_sections
from sourcepage.records import Document, Hit, parse_page_id
from sourcepage.retrieval.bm25 import idf
from sourcepage.retrieval.parsed import Parsed, Route
from sourcepage.retrieval.tokenize import TokenizerConfig, content_terms, stem_terms, tokenize
from sourcepage.text.facts import Asked, asked_facts, asked_value
from sourcepage.text.roles import roles_in

if TYPE_CHECKING:
    from sourcepage.retrieval.search import Searcher

__all__ = ["PageHit", "Query", "question_parts", "term_weights", "weighted_terms"]

_WORDS = TokenizerConfig(stopwords=True)
_STEMMED = TokenizerConfig(stopwords=True, stem=True)


def weighted_terms(text: str, weights: Mapping[str, float] | None) -> dict[str, float]:
    """Stemmed content words of ``text`` → weight (the largest idf of a word with that stem)."""
    out: dict[str, float] = {}
    # stemming maps token to token, so the two lists align
    for w, s in zip(tokenize(text, _WORDS), tokenize(text, _STEMMED), strict=True):
        if w not in ("a", "i"):
            out[s] = max(out.get(s, 0.0), (weights or {}).get(w, 1.0))
    return out


_SPLIT = re.compile(r"\s*(?:[,;:?]|\s—\s|\s-\s|\band\b|\bor\b)\s*", re.IGNORECASE)


#: a capitalised word just before "and"/"or", and one just after: a name ("Health and
#: Safety at Work Act", "OSHA and HSE") that is not cut in two
_NAME_BEFORE = re.compile(r"\b[A-Z][\w'’-]*$")
_NAME_AFTER = re.compile(r"[A-Z]")


def _pieces(question: str) -> list[tuple[int, int]]:
    """(start, end) of the pieces of ``question`` between ``_SPLIT``'s separators, except an
    "and"/"or" inside a name."""
    out, start = [], 0
    for m in _SPLIT.finditer(question):
        word = m.group().strip().lower() in ("and", "or")
        if word and _NAME_BEFORE.search(question[: m.start()]) and _NAME_AFTER.match(question[m.end() :]):
            continue
        out.append((start, m.start()))
        start = m.end()
    return [*out, (start, len(question))]


def question_parts(question: str) -> list[str]:
    """The parts of a question: pieces between commas, semicolons, colons, dashes and
    "and"/"or" (not inside a name: "Health and Safety"), each with at least two content words;
    a shorter piece joins the part before it as the question says it ("first aid and
    training", not "first aid training")."""
    spans: list[list[int]] = []
    for a, b in _pieces(question):
        piece = question[a:b].strip()
        if not piece:
            continue
        if spans and len(weighted_terms(piece, None)) < 2:
            spans[-1][1] = b
        else:
            spans.append([a, b])
    parts = [question[a:b].strip() for a, b in spans]
    return [p for p in parts if weighted_terms(p, None)] or [question.strip()]


def term_weights(terms: Sequence[str], df: Mapping[str, int], n_docs: int) -> dict[str, float]:
    """Lucene-style idf, ln(1 + (N − df + 0.5)/(df + 0.5)): ≥ 0, largest for unseen terms."""
    return {t: idf(df.get(t, 0), n_docs) for t in terms}


@dataclass(frozen=True)
class Query:
    """One question, parsed once. ``weights``: content term → idf (1.0 each without
    corpus statistics); ``stems``: Snowball stem → the largest weight of its terms;
    ``tokens``: the BM25 tokens (the index's tokenizer); ``asked``: the kinds of fact asked,
    in question order, ``value`` the one value among them; ``route``: the jurisdictions
    named (None when no router was given); ``cited``: the provisions it cites, as
    (kind, number) ("Article 10": ``corpus.structure.cited_sections``); ``roles``: the
    parties it names, in order (``text.roles.roles_in``: whose duty it asks about);
    ``parts``: its parts as the answer check covers them (``question_parts``), and
    ``part_terms`` each part's stemmed content words → weight (``weighted_terms``), what
    the check looks for in the quotes."""

    text: str
    terms: frozenset[str]
    weights: Mapping[str, float]
    stems: Mapping[str, float]
    tokens: tuple[str, ...]
    asked: tuple[Asked, ...]
    value: Asked | None
    route: Route | None = None
    stem_of: Mapping[str, str] = field(default_factory=dict)
    cited: tuple[tuple[str, str], ...] = ()
    roles: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()
    part_terms: tuple[Mapping[str, float], ...] = ()

    @classmethod
    def parse(
        cls,
        text: str,
        df: Mapping[str, int] | None = None,
        n_docs: int = 0,
        route: Route | None = None,
        tokens: Sequence[str] | None = None,
    ) -> Query:
        """Parse ``text``; ``df``/``n_docs`` (the BM25 index's chunk frequencies) give idf
        weights, else every term weighs 1."""
        terms = content_terms(text)
        weights = term_weights(sorted(terms), df, n_docs) if df is not None else {t: 1.0 for t in terms}
        stem_of = stem_terms(terms)
        parts = tuple(question_parts(text))
        stems: dict[str, float] = {}
        for t in sorted(terms):
            stems[stem_of[t]] = max(stems.get(stem_of[t], 0.0), weights[t])
        return cls(
            text=text,
            terms=frozenset(terms),
            weights=weights,
            stems=stems,
            tokens=tuple(tokenize(text) if tokens is None else tokens),
            asked=tuple(asked_facts(text)),
            value=asked_value(text),
            route=route,
            stem_of=stem_of,
            cited=tuple(cited_sections(text)),
            roles=tuple(roles_in(text)),
            parts=parts,
            part_terms=tuple(weighted_terms(p, weights) for p in parts),
        )

    @classmethod
    def of(cls, searcher: Searcher, text: str) -> Query:
        """Parse ``text`` with the searcher's statistics, tokenizer and router."""
        from sourcepage.retrieval.routing import router

        df, n = searcher.term_df()
        return cls.parse(
            text, df, n, router(searcher).route(text), tokenize(text, searcher.settings.tokenizer)
        )

    @property
    def parsed(self) -> Parsed:
        """The route and cited provisions as the ranking stages read them (``route:``,
        ``sect:``): handed to ``Searcher.ranked``, so that no stage parses the question again."""
        return Parsed(self.route, self.cited)

    @property
    def jurisdictions(self) -> tuple[str, ...]:
        """The covered jurisdictions the question names (empty when none or unknown)."""
        return self.route.jurisdictions if self.route else ()

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds of fact asked, in question order."""
        return tuple(a.kind for a in self.asked)

    def describe_asked(self) -> str:
        """What the question asks for, in words ("a frequency (how often)", or "a statement")."""
        return ", ".join(a.describe() for a in self.asked) or "a statement"


@dataclass(frozen=True)
class PageHit:
    """One ranked page with its document, best passage and highlighted spans (spec §5), and
    the near-duplicate pages grouped under it ((hit, similarity) pairs)."""

    hit: Hit
    document: Document
    passage: str = ""
    highlights: tuple[tuple[int, int], ...] = ()
    duplicates: tuple[tuple[Hit, float, Document], ...] = ()
    #: the heading path of the passage (the stretch of the page its chunk overlaps most;
    #: ``Searcher.page_section``) and the page's kind (corpus.structure; '' where unknown)
    section: str = ""
    page_kind: str = ""
    #: the printed page number read from the page (corpus.pagelabels; '' unknown) and the
    #: mean OCR confidence where the text was read by OCR (None: the PDF's text layer)
    page_label: str = ""
    ocr_confidence: float | None = None
    #: every heading path covering part of the page, in page order (where its quotes stand)
    sections: tuple[str, ...] = ()

    @property
    def page(self) -> str:
        return self.hit.page_id

    @property
    def page_number(self) -> int:
        return parse_page_id(self.hit.page_id)[1]

    @property
    def citation(self) -> str:
        """``[doc_id p. 8 (PDF p. 14)]`` with a printed label, else ``[doc_id p.N]``: as
        quotes and results cite their page."""
        return f"[{citation(self.document.doc_id, self.page_number, self.page_label)}]"

    def as_dict(self) -> dict[str, Any]:
        """The result's dict (spec §5), built at the edge (api, CLI, service)."""
        d = self.document
        return {
            "rank": self.hit.rank,
            "page": self.page,
            **asdict(d),  # every field of the document (``response.HitDocument``)
            "page_number": self.page_number,
            "page_label": self.page_label,
            "citation": self.citation,
            "ocr_confidence": self.ocr_confidence,
            "score": self.hit.score,
            "chunk_id": self.hit.chunk_id,
            "passage": self.passage,
            "highlights": list(self.highlights),
            "guessed": list(d.guessed),
            "section": self.section,
            "page_kind": self.page_kind,
            "duplicates": [
                {
                    "page": h.page_id,
                    "doc_id": doc.doc_id,
                    "page_number": parse_page_id(h.page_id)[1],
                    "rank": h.rank,
                    "score": h.score,
                    "similarity": sim,
                    "title": doc.title,
                    "jurisdiction": doc.jurisdiction,
                }
                for h, sim, doc in self.duplicates
            ],
        }
