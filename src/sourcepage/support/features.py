"""Answerability features of one question (study §4.4: "combine method-specific top
scores; score margins; agreement between sparse and semantic retrieval; required
evidence coverage; support from more than one passage").

Features come from two page rankings — a sparse one (``a``, BM25) and a semantic one
(``b``, dense or LSA) — and from the text of the top passages. None is compared
across methods on a raw scale: each score feature belongs to one method, and the
classifier that combines them is fitted per method pair.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from sourcepage.records import Hit, doc_of
from sourcepage.retrieval.tokenize import content_terms

#: feature → what it measures (a = the sparse ranking, b = the semantic one); the report
#: prints these definitions
FEATURE_DEFINITIONS: dict[str, str] = {
    "a_top": "top page score of the sparse method (a, BM25)",
    "a_margin": "a's top-1 minus top-2 page score",
    "b_top": "top page score of the semantic method (b: dense or LSA)",
    "b_margin": "b's top-1 minus top-2 page score",
    "overlap5": "pages in both methods' top 5, divided by 5",
    "rr_a_in_b": "1 / rank of a's top page in b's ranking (0 when absent)",
    "rr_b_in_a": "1 / rank of b's top page in a's ranking (0 when absent)",
    "docs_top5": "distinct documents among the first 5 pages of a and b together",
    "coverage": "idf-weighted share of the question's content words found in the top-3 passages of a and b",
    "missing_idf": "largest idf of a question content word absent from those passages",
    "sent_max": "best cosine (e5-small) between the question and one sentence of those passages",
    "sent_top3": "mean of the three best sentence cosines",
}
FEATURES: tuple[str, ...] = tuple(FEATURE_DEFINITIONS)


def term_weights(terms: Sequence[str], df: Mapping[str, int], n_docs: int) -> dict[str, float]:
    """Lucene-style idf, ln(1 + (N − df + 0.5)/(df + 0.5)): ≥ 0, largest for unseen terms."""
    return {t: math.log(1 + (n_docs - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t in terms}


def _rr(page: str | None, ranking: Sequence[Hit]) -> float:
    if page is None:
        return 0.0
    for h in ranking:
        if h.page_id == page:
            return 1.0 / h.rank
    return 0.0


def _top(ranking: Sequence[Hit]) -> tuple[float, float]:
    if not ranking:
        return 0.0, 0.0
    s1 = ranking[0].score
    return s1, s1 - (ranking[1].score if len(ranking) > 1 else s1)


def features(
    question: str,
    a: Sequence[Hit],
    b: Sequence[Hit],
    passages: Mapping[str, str],
    df: Mapping[str, int],
    n_docs: int,
    sentence_sims: Sequence[float] = (),
) -> dict[str, float]:
    """The feature vector (as a dict in ``FEATURES`` order) of one question.

    ``passages`` maps chunk id → text for (at least) the top-3 hits of ``a`` and ``b``;
    ``df`` gives each term's document (chunk) frequency in the index, ``n_docs`` its size;
    ``sentence_sims`` are the cosines between the question and each sentence of those
    passages (a supported question tends to have one sentence that says the answer; a
    near-domain unsupported one only topical sentences).
    """
    sims = sorted(sentence_sims, reverse=True)
    terms = sorted(content_terms(question))
    weights = term_weights(terms, df, n_docs)
    seen: set[str] = set()
    for h in list(a[:3]) + list(b[:3]):
        seen.update(content_terms(passages.get(h.chunk_id, "")))
    total = sum(weights.values())
    covered = sum(w for t, w in weights.items() if t in seen)
    missing = [w for t, w in weights.items() if t not in seen]
    a_top, a_margin = _top(a)
    b_top, b_margin = _top(b)
    top5 = [h.page_id for h in list(a[:5]) + list(b[:5])]
    return {
        "a_top": a_top,
        "a_margin": a_margin,
        "b_top": b_top,
        "b_margin": b_margin,
        "overlap5": len({h.page_id for h in a[:5]} & {h.page_id for h in b[:5]}) / 5.0,
        "rr_a_in_b": _rr(a[0].page_id if a else None, b),
        "rr_b_in_a": _rr(b[0].page_id if b else None, a),
        "docs_top5": float(len({doc_of(p) for p in top5})),
        "coverage": covered / total if total else 0.0,
        "missing_idf": max(missing) if missing else 0.0,
        "sent_max": sims[0] if sims else 0.0,
        "sent_top3": float(np.mean(sims[:3])) if sims else 0.0,
    }


def matrix(rows: Sequence[Mapping[str, float]]) -> np.ndarray:
    """Rows of feature dicts → an (n, len(FEATURES)) float array."""
    return np.array([[float(r[f]) for f in FEATURES] for r in rows], dtype=np.float64)
