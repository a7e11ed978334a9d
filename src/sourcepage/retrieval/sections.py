"""Section-aware second stage ``sect:<method>``: a page's rank informed by its headings,
its neighbours and its kind (corpus.structure, stored at ingest).

Over the base method's top ``SectionSettings.depth`` pages (50) (any method, routing included, so its filters
hold), each page scores

    base score + heading_weight · 1/(k + heading rank) + section_weight · 1/(k + section
    rank) + neighbour · max over the adjacent pages p±1 of the same document of
    1/(k + their base rank)

with k = 60 as in RRF. The section rank orders the candidates' sections in a BM25 index of
whole sections (the pages sharing a heading path, joined: a rule that starts on one page and
ends on the next is one unit; with ``units="spans"`` each stretch of a page from a heading to
the next joins its own section instead, a measured option that is not the default). The
heading rank orders the candidates by the idf-weighted share of the question's content words
found in the page's headings (every heading of every section path covering the page),
stemmed, stop words off; a page without any is not ranked there.
Then pages whose kind is in ``demote`` (contents, index, amendment lists, change tables,
glossaries, an act's recitals) follow the others unless the question asks for that kind
("which amendments", "glossary", "index", "why"/"purpose" for recitals; recitals since
2026-12-06: on the three dev splits no question lost at rank 1, intl20 MRR +0.001 and
Recall@10 +0.004). A question that cites a provision ("section 36", "Article 10", "clause
4.3": ``corpus.structure.cited_sections``) gets the pages under it first (``cited_first``).
Weights were chosen on the dev splits
(``benchmarks/section_variants.py``; docs/experiments/sections.md): the section index at
0.25 with every kind demoted won on both dev splits; heading-only weights lost on both and
neighbour weights on one, so both are 0 by default.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from sourcepage.corpus.structure import SEP, cited_sections, page_spans
from sourcepage.records import Hit, page_id, renumber
from sourcepage.retrieval import bm25
from sourcepage.retrieval.bm25 import idf as bm25_idf
from sourcepage.retrieval.fusion import RRF_K
from sourcepage.retrieval.parsed import Parsed
from sourcepage.retrieval.tokenize import TokenizerConfig, tokenize
from sourcepage.store.files import write_json

if TYPE_CHECKING:
    from sourcepage.retrieval.methods import Method
    from sourcepage.retrieval.search import Searcher

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


CREDITS = ("dominant", "share", "max", "any")


@dataclass(frozen=True)
class SectionSettings:
    """The stage's settings (its ``settings_type``, experiment.yaml section ``sect``): the
    weights (chosen on dev; see the module docstring) and the candidate depth."""

    heading_weight: float = 0.0
    neighbour: float = 0.0
    demote: tuple[str, ...] = ("contents", "index", "amendments", "change_table", "glossary", "recitals")
    #: weight of the page's section in a BM25 ranking of whole sections (pages joined)
    section_weight: float = 0.25
    #: candidate pages taken from the base ranking
    depth: int = 50
    #: "pages": a page joins its main section whole; "spans": each stretch of the page (heading
    #: to next heading) joins its own section (2026-12-06: lost 4 construction dev questions
    #: at rank 1, so not the default)
    units: str = "pages"
    #: how the sections a page holds credit it (spans only): "dominant" (its main section's
    #: 1/(k + rank)), "share" (Σ share · 1/(k + rank)), "max" (the best of those holding a
    #: quarter of the page or more), "any" (the best of all)
    credit: str = "dominant"

    def __post_init__(self) -> None:
        if self.units not in ("pages", "spans"):
            raise ValueError(f"units must be pages or spans, got {self.units!r}")
        if self.credit not in CREDITS:
            raise ValueError(f"credit must be one of {', '.join(CREDITS)}, got {self.credit!r}")


SETTINGS = SectionSettings()


def _heading_terms(searcher: Searcher) -> dict[str, frozenset[str]]:
    """page id → stemmed content words of its headings, built once per searcher."""

    def make() -> dict[str, frozenset[str]]:
        out = {}
        for pid, (_, secs, _kind) in searcher.structure().items():
            titles = {t for path in json.loads(secs or "[]") for t in path.split(SEP)}
            out[pid] = frozenset(tokenize(" ".join(titles), _TOKENS))
        return out

    return searcher.memo("heading_terms", make)


def _idf(searcher: Searcher) -> dict[str, float]:
    """Stemmed term → idf over the pages' heading texts (a heading word found under many
    sections says little about which one)."""

    def make() -> dict[str, float]:
        terms = _heading_terms(searcher)
        df: dict[str, int] = {}
        for ts in terms.values():
            for t in ts:
                df[t] = df.get(t, 0) + 1
        n = max(len(terms), 1)
        return {t: bm25_idf(d, n) for t, d in df.items()}

    return searcher.memo("heading_idf", make)


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
    """BM25 (Lucene variant, ``retrieval.bm25``'s index) over whole sections: the raw text of
    the pages that share a dominant heading path in one document, joined; a page without a
    path is its own. Not bm25s itself: importing it (numba, scipy.sparse) cost a one-shot
    search 2.4 s; ``retrieval.bm25`` computes bm25s's formulas (tested equal).

    Built once per store state and kept in ``<store>/indexes/raw/sections/<key>/`` (the
    postings memory-mapped, ``keys.json``), ``key`` a hash of the raw chunks' fingerprint and
    the pages' structure: building it tokenises every page (0.7 s for corpus-intl), which a
    one-shot search would otherwise pay. Written to a temporary folder and renamed; where the
    store cannot be written (a read-only mount) the index lives in memory only."""

    def __init__(self, searcher: Searcher, spans: bool = False):
        structure = sorted(searcher.structure().items())
        texts_of: dict[str, Sequence[str]] = {}

        def page(pid: str) -> str:  # each document's pages read once, and only when needed
            doc, _, n = pid.rpartition("#p")
            if doc not in texts_of:
                texts_of[doc] = searcher.store.page_texts(doc, "raw")
            return texts_of[doc][int(n) - 1]

        #: unit (document, heading path) → [(page id, start, end: None to the page's end)]
        groups: dict[tuple[str, str], list[tuple[str, int, int | None]]] = {}
        #: page id → [(unit key, share of the page's characters)]
        shares: dict[str, list[tuple[tuple[str, str], float]]] = {}
        for pid, (sec, paths, _) in structure:
            doc, _, n = pid.rpartition("#p")
            held: list[tuple[str, int, int | None, float]] = [(sec or f"#p{n}", 0, None, 1.0)]
            if spans and (cuts := page_spans(page(pid), json.loads(paths or "[]"))):
                total = sum(e - b for _, b, e in cuts) or 1
                held = [(path, b, e, (e - b) / total) for path, b, e in cuts]
            for path, b, e, w in held:
                groups.setdefault((doc, path), []).append((pid, b, e))
                shares.setdefault(pid, []).append(((doc, path), w))
        self.keys = list(groups)
        index = {k: i for i, k in enumerate(self.keys)}
        self.spans_of = {p: [(index[k], w) for k, w in v] for p, v in shares.items()}
        self.section_of = {p: max(v, key=lambda x: (x[1], -x[0]))[0] for p, v in self.spans_of.items()}
        key = hashlib.sha256(
            json.dumps(
                [searcher.store.chunk_fingerprint("raw"), structure, *(["spans"] if spans else [])]
            ).encode()
        ).hexdigest()[:20]
        root = searcher.store.path / "indexes" / "raw" / ("spans" if spans else "sections")
        folder = root / key
        params = bm25.Bm25Params(variant="lucene")
        if (folder / "keys.json").is_file() and json.loads((folder / "keys.json").read_text()) == [
            list(k) for k in self.keys
        ]:
            self.model = bm25.load(folder, params)
        else:
            texts = ["\n".join(page(p)[b:e] for p, b, e in groups[k]) for k in self.keys]
            tokens = [tokenize(t, _TOKENS) or ["\u2205"] for t in texts]
            self.model = self._persist(tokens, root, folder, params)
        self.known = self.model.term_df()

    def _persist(
        self, tokens: list[list[str]], root: Path, folder: Path, params: bm25.Bm25Params
    ) -> bm25.Bm25Index:
        tmp = root / f".{folder.name}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            tmp.mkdir(parents=True)
            bm25.build_into(tokens, tmp, params)
            write_json(tmp / "keys.json", [list(k) for k in self.keys])
            os.rename(tmp, folder)  # fails when another process got there first: theirs is equal
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not (folder / "keys.json").is_file():
                return bm25.build(tokens, variant="lucene")
        for old in root.iterdir():  # earlier states of the store
            if old.name != folder.name and not old.name.startswith("."):
                shutil.rmtree(old, ignore_errors=True)
        return bm25.load(folder, params)

    def _order(self, query: str, pages: Sequence[str]) -> dict[int, int]:
        """Rank (1 = best, score > 0) of every section touching ``pages``."""
        q = [t for t in tokenize(query, _TOKENS) if t in self.known]
        if not q:
            return {}
        scores = bm25.scores(self.model, q)
        secs = sorted({i for p in pages for i, _ in self.spans_of.get(p, ())}, key=lambda i: (-scores[i], i))
        return {i: r for r, i in enumerate(secs, 1) if scores[i] > 0}

    def ranks(self, query: str, pages: Sequence[str]) -> dict[str, int]:
        """Rank (1 = best) of each page's main section among the sections of ``pages``."""
        rank = self._order(query, pages)
        return {p: rank[self.section_of[p]] for p in pages if self.section_of.get(p) in rank}

    def credits(self, query: str, pages: Sequence[str], mode: str = "dominant") -> dict[str, float]:
        """Each page's section credit from the ranks of the sections it holds
        (``SectionSettings.credit``; "dominant" is 1/(k + its main section's rank))."""
        rank = self._order(query, pages)
        out: dict[str, float] = {}
        for p in pages:
            spans = self.spans_of.get(p, ())
            if mode == "dominant":
                main = self.section_of.get(p)
                vals = [1.0 / (RRF_K + rank[main])] if main in rank else []
            elif mode in ("max", "any"):
                least = 0.25 if mode == "max" else 0.0
                vals = [
                    max((1.0 / (RRF_K + rank[i]) for i, w in spans if i in rank and w >= least), default=0.0)
                ]
            else:
                vals = [w / (RRF_K + rank[i]) for i, w in spans if i in rank]
            if vals and sum(vals) > 0:
                out[p] = sum(vals)
        return out


def section_index(searcher: Searcher, spans: bool = False) -> _SectionIndex:
    """The searcher's section index (of whole pages, or of spans), loaded or built on first use."""
    name = "section_index_spans" if spans else "section_index"
    return searcher.memo(name, lambda: _SectionIndex(searcher, spans))


def asked_kinds(query: str) -> set[str]:
    """The listing kinds the question asks for ("which amendments …", "glossary"): not demoted."""
    return {k for k, pattern in _ASKS.items() if pattern.search(query)}


def _neighbours(pid: str) -> tuple[str, str]:
    doc, _, n = pid.rpartition("#p")
    k = int(n)
    return page_id(doc, k - 1), page_id(doc, k + 1)


def section_rank(
    searcher: Searcher,
    query: str,
    base: Sequence[Hit],
    settings: SectionSettings = SETTINGS,
    extra: Mapping[str, float] | None = None,
) -> list[Hit]:
    """The base ranking's first ``settings.depth`` pages reordered (module docstring), the rest
    after. ``extra``: a further score term per page (a measured variant's, as
    ``benchmarks/rank_probes.py`` adds them; none by default)."""
    top, rest = list(base[: settings.depth]), list(base[settings.depth :])
    base_rr = {h.page_id: 1.0 / (RRF_K + h.rank) for h in top}
    heads = heading_scores(searcher, query, [h.page_id for h in top]) if settings.heading_weight else {}
    head_rank = {p: r for r, p in enumerate(sorted(heads, key=lambda p: (-heads[p], p)), 1)}
    secs = (
        section_index(searcher, settings.units == "spans").credits(query, list(base_rr), settings.credit)
        if settings.section_weight
        else {}
    )
    score: dict[str, float] = {}
    for h in top:
        s = h.score
        if h.page_id in head_rank:
            s += settings.heading_weight / (RRF_K + head_rank[h.page_id])
        s += settings.section_weight * secs.get(h.page_id, 0.0)
        if settings.neighbour:
            s += settings.neighbour * max((base_rr.get(n, 0.0) for n in _neighbours(h.page_id)), default=0.0)
        score[h.page_id] = s + (extra or {}).get(h.page_id, 0.0)
    structure = searcher.structure()
    demoted = set(settings.demote) - asked_kinds(query)

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
    settings_type = SectionSettings

    def examples(self, bases: Sequence[str]) -> list[str]:
        return ["sect:route:bm25"] + (["sect:route:rrf:bm25+dense"] if "dense" in bases else [])

    def rank(
        self,
        searcher: Searcher,
        method: Method,
        query: str,
        k: int | None,
        filters: dict[str, list[str]],
        parsed: Parsed | None = None,
    ) -> list[Hit]:
        """The base ranking reordered (``section_rank``), the pages of the provisions the
        question cites first: ``parsed.cited`` when the search parsed them (``Query``),
        else those of ``query``; the base ranks their pages with them as parsed."""
        own = searcher.settings.of(self.kind)
        depth = None if k is None else max(k, own.depth)
        base = searcher.ranked(method.parts[0], query, depth, filters, parsed)
        hits = section_rank(searcher, query, base, own)
        if parsed is None:
            parsed = Parsed(None, tuple(cited_sections(query)))
        # the pages of a provision the question cites (not under a section filter, nor inside
        # the ranking of such pages itself)
        if parsed.cited and "section" not in filters and not parsed.under_cited:
            within = replace(parsed, under_cited=True)
            hits = cited_first(hits, searcher.ranked(method.parts[0], query, own.depth, filters, within))
        return hits[:k] if k else hits


def cited_first(hits: Sequence[Hit], cited: Sequence[Hit]) -> list[Hit]:
    """``cited`` (the pages of the provisions a question cites, "What does s 36 require?"; the
    base's first ``SectionSettings.depth`` of them) before every other page: in ``hits``'
    order where it ranks them, then in their own. A
    citation names the page as surely as a jurisdiction names the documents (``route:``); a
    question citing what no heading of the corpus is keeps ``hits`` as they are."""
    held = {h.page_id for h in cited}
    first = [h for h in hits if h.page_id in held]
    seen = {h.page_id for h in first}
    first += [h for h in cited if h.page_id not in seen]
    return renumber([*first, *(h for h in hits if h.page_id not in held)])


METHOD = SectionMethod()
