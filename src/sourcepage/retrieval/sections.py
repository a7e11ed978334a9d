"""Section-aware second stage ``sect:<method>``: a page's rank informed by its headings,
its neighbours and its kind (corpus.structure, stored at ingest).

Over the base method's top ``DEPTH`` pages (any method, routing included, so its filters
hold), each page scores

    base score + heading_weight · 1/(k + heading rank) + section_weight · 1/(k + section
    rank) + neighbour · max over the adjacent pages p±1 of the same document of
    1/(k + their base rank)

with k = 60 as in RRF. The section rank orders the candidates' sections in a BM25 index of
whole sections (the pages sharing a heading path, joined: a rule that starts on one page and
ends on the next is one unit). The heading rank orders the candidates by the idf-weighted share of
the question's content words found in the page's headings (every heading of every section
path covering the page), stemmed, stop words off; a page without any is not ranked there.
Then pages whose kind is in ``demote`` (contents, index, amendment lists, change tables,
glossaries) follow the others unless the question asks for that kind ("which amendments",
"glossary", "index"). Weights were chosen on the dev splits
(``benchmarks/section_variants.py``; README, "Section-aware ranking"): the section index at
0.25 with every kind demoted won on both dev splits; heading-only weights lost on both and
neighbour weights on one, so both are 0 by default.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sourcepage.corpus.structure import SEP
from sourcepage.records import Hit, page_id, renumber
from sourcepage.retrieval.bm25 import idf as bm25_idf
from sourcepage.retrieval.fusion import RRF_K
from sourcepage.retrieval.tokenize import TokenizerConfig, tokenize

if TYPE_CHECKING:
    from sourcepage.retrieval.methods import Method
    from sourcepage.retrieval.search import Searcher

#: candidate pages taken from the base ranking
DEPTH = 50
_TOKENS = TokenizerConfig(stopwords=True, stem=True)
#: what a question says when it asks for a page of a demoted kind
_ASKS = {
    "contents": re.compile(
        r"\b(?:table of contents|contents pages?|which (?:chapter|section|part)s?)\b", re.IGNORECASE
    ),
    "index": re.compile(r"\bindex\b", re.I),
    "amendments": re.compile(r"\bamend(?:s|ed|ing|ments?)?\b|\brepeal", re.I),
    "change_table": re.compile(r"\bcorrelation\b|\bamend(?:s|ed|ments?)?\b|\bhistory\b|\bchanges?\b", re.I),
    "recitals": re.compile(r"\brecitals?\b|\bwhy\b|\breasons?\b|\bpurpose\b", re.IGNORECASE),
    "glossary": re.compile(r"\bglossary\b|\bdefin(?:e|es|ed|ition|itions)\b|\bmeans?\b|\bmeaning\b", re.I),
}


@dataclass(frozen=True)
class SectionSettings:
    """The stage's weights (chosen on dev; see the module docstring)."""

    heading_weight: float = 0.0
    neighbour: float = 0.0
    demote: tuple[str, ...] = ("contents", "index", "amendments", "change_table", "glossary")
    #: weight of the page's section in a BM25 ranking of whole sections (pages joined)
    section_weight: float = 0.25


SETTINGS = SectionSettings()


def _heading_terms(searcher: Searcher) -> dict[str, frozenset[str]]:
    """page id → stemmed content words of its headings, built once per searcher."""
    cached = searcher.__dict__.get("_heading_terms")
    if cached is None:
        cached = {}
        for pid, (_, secs, _kind) in searcher.structure().items():
            titles = {t for path in json.loads(secs or "[]") for t in path.split(SEP)}
            cached[pid] = frozenset(tokenize(" ".join(titles), _TOKENS))
        searcher.__dict__["_heading_terms"] = cached
    return cached


def _idf(searcher: Searcher) -> dict[str, float]:
    """Stemmed term → idf over the pages' heading texts (a heading word found under many
    sections says little about which one)."""
    cached = searcher.__dict__.get("_heading_idf")
    if cached is None:
        terms = _heading_terms(searcher)
        df: dict[str, int] = {}
        for ts in terms.values():
            for t in ts:
                df[t] = df.get(t, 0) + 1
        n = max(len(terms), 1)
        cached = {t: bm25_idf(d, n) for t, d in df.items()}
        searcher.__dict__["_heading_idf"] = cached
    return cached


def heading_scores(searcher: Searcher, query: str, pages: Sequence[str]) -> dict[str, float]:
    """Idf-weighted share of the question's content words present in each page's headings."""
    idf = _idf(searcher)
    q = [t for t in dict.fromkeys(tokenize(query, _TOKENS)) if t in idf]
    total = sum(idf[t] for t in q)
    if not total:
        return {}
    terms = _heading_terms(searcher)
    out = {}
    for p in pages:
        s = sum(idf[t] for t in q if t in terms.get(p, ()))
        if s > 0:
            out[p] = s / total
    return out


class _SectionIndex:
    """BM25 (bm25s, Lucene variant) over whole sections: the raw text of the pages that share
    a dominant heading path in one document, joined; a page without a path is its own."""

    def __init__(self, searcher: Searcher):
        import bm25s

        groups: dict[tuple[str, str], list[str]] = {}
        for pid, (sec, _, _) in sorted(searcher.structure().items()):
            doc, _, n = pid.rpartition("#p")
            groups.setdefault((doc, sec or f"#p{n}"), []).append(pid)
        self.keys = list(groups)
        self.section_of = {p: i for i, k in enumerate(self.keys) for p in groups[k]}
        texts = []
        for doc, _sec in self.keys:
            pages = searcher.store.page_texts(doc, "raw")
            members = groups[(doc, _sec)]
            texts.append("\n".join(pages[int(p.rpartition("#p")[2]) - 1] for p in members))
        self.model = bm25s.BM25()
        self.model.index([tokenize(t, _TOKENS) or ["\u2205"] for t in texts], show_progress=False)

    def ranks(self, query: str, pages: Sequence[str]) -> dict[str, int]:
        """Rank (1 = best) of each page's section among the sections of ``pages``."""
        q = [t for t in tokenize(query, _TOKENS) if t in self.model.vocab_dict]
        if not q:
            return {}
        scores = self.model.get_scores(q)
        secs = sorted(
            {self.section_of[p] for p in pages if p in self.section_of}, key=lambda i: (-scores[i], i)
        )
        rank = {i: r for r, i in enumerate(secs, 1) if scores[i] > 0}
        return {p: rank[self.section_of[p]] for p in pages if self.section_of.get(p) in rank}


def section_index(searcher: Searcher) -> _SectionIndex:
    """The searcher's section index, built on first use (a second for corpus-intl)."""
    idx = searcher.__dict__.get("_section_index")
    if idx is None:
        idx = searcher.__dict__["_section_index"] = _SectionIndex(searcher)
    return idx


def _neighbours(pid: str) -> tuple[str, str]:
    doc, _, n = pid.rpartition("#p")
    k = int(n)
    return page_id(doc, k - 1), page_id(doc, k + 1)


def section_rank(
    searcher: Searcher, query: str, base: Sequence[Hit], settings: SectionSettings = SETTINGS
) -> list[Hit]:
    """The base ranking's first ``DEPTH`` pages reordered (module docstring), the rest after."""
    top, rest = list(base[:DEPTH]), list(base[DEPTH:])
    base_rr = {h.page_id: 1.0 / (RRF_K + h.rank) for h in top}
    heads = heading_scores(searcher, query, [h.page_id for h in top]) if settings.heading_weight else {}
    head_rank = {p: r for r, p in enumerate(sorted(heads, key=lambda p: (-heads[p], p)), 1)}
    secs = section_index(searcher).ranks(query, list(base_rr)) if settings.section_weight else {}
    score: dict[str, float] = {}
    for h in top:
        s = h.score
        if h.page_id in head_rank:
            s += settings.heading_weight / (RRF_K + head_rank[h.page_id])
        if h.page_id in secs:
            s += settings.section_weight / (RRF_K + secs[h.page_id])
        if settings.neighbour:
            s += settings.neighbour * max((base_rr.get(n, 0.0) for n in _neighbours(h.page_id)), default=0.0)
        score[h.page_id] = s
    structure = searcher.structure()
    demoted = {k for k in settings.demote if not (_ASKS.get(k) and _ASKS[k].search(query))}

    def low(h: Hit) -> bool:
        return structure.get(h.page_id, ("", "", ""))[2] in demoted

    order = sorted(top, key=lambda h: (low(h), -round(score[h.page_id], 12), h.rank))
    order += rest
    return renumber(Hit(h.rank, h.page_id, score.get(h.page_id, h.score), h.chunk_id) for h in order)


class SectionMethod:
    """The registered stage ``sect:<method>`` (any method, routing and fusions included)."""

    kind = "sect"
    grammar = "sect:<method>"
    summary = "section-aware: headings fused with the base ranking, page kinds demoted"
    arity = "one"
    over_stages = True

    def examples(self, bases: Sequence[str]) -> list[str]:
        return ["sect:route:bm25"] + (["sect:route:rrf:bm25+dense"] if "dense" in bases else [])

    def rank(
        self, searcher: Searcher, method: Method, query: str, k: int | None, filters: dict[str, list[str]]
    ) -> list[Hit]:
        base = searcher.ranked(method.parts[0], query, None if k is None else max(k, DEPTH), filters)
        hits = section_rank(searcher, query, base)
        return hits[:k] if k else hits


METHOD = SectionMethod()
