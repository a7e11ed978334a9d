"""Answerability features of one question (study §4.4: "combine method-specific top
scores; score margins; agreement between sparse and semantic retrieval; required
evidence coverage; support from more than one passage").

Features come from two page rankings — a sparse one (``a``, BM25) and a semantic one
(``b``, dense or LSA) — and from the sentences of the top passages. Every feature is on
a scale that means the same on any corpus, so one policy fitted on the project's
benchmarks can serve a fresh store: cosines of a fixed model, shares in [0, 1], ranks,
and BM25 only as a share of the question's own BM25 ceiling (never a raw BM25 score,
whose scale grows with the corpus and the question's length).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from sourcepage.query import Query, term_weights
from sourcepage.records import Hit
from sourcepage.retrieval.bm25 import Bm25Params
from sourcepage.retrieval.sentvec import SENTENCE_MODEL  # the sentence encoder of the sent_* features
from sourcepage.retrieval.tokenize import tokenize
from sourcepage.support.check import coverage, weighted_terms
from sourcepage.text.facts import states

if TYPE_CHECKING:
    from sourcepage.retrieval.search import Searcher

#: feature → what it measures, in words a reviewer reads (decision reasons use these)
FEATURE_WORDS: dict[str, str] = {
    "sparse_share": "share of the question's keyword weight matched by the best BM25 passage",
    "sparse_gap": "how far the best BM25 page stands out from the second (relative gap)",
    "dense_top": "meaning similarity of the best semantic passage to the question",
    "dense_gap": "how far the best semantic page stands out from the second",
    "agree_top5": "agreement of keyword and semantic retrieval on the top 5 pages",
    "rr_a_in_b": "rank, in semantic retrieval, of the best keyword page",
    "rr_b_in_a": "rank, in keyword retrieval, of the best semantic page",
    "coverage": "share of the question's words (rare words weigh more) found in the top passages",
    "missing_idf": "rarity of the rarest question word missing from the top passages",
    "sent_max": "meaning similarity of the single closest sentence to the question",
    "sent_top3": "mean meaning similarity of the three closest sentences",
    "sent_coverage": "share of the question's words found in its three closest sentences",
    "value_missing": "the question asks for a value (number, duration, frequency …) that none "
    "of the three sentences closest in meaning to it states (the quotes are chosen from more)",
    "xenc_max": "cross-encoder relevance (logit) of the closest sentence of the top passages",
    "xenc_mean3": "mean cross-encoder relevance (logit) of its three best sentences",
}
#: the cross-encoder's features (``xenc_features``): computed only when a policy in force
#: reads them (``policy.reads_xenc``), so that a store without the dense extra is unaffected
XENC_FEATURES: tuple[str, ...] = ("xenc_max", "xenc_mean3")
#: the features every row has
FEATURES: tuple[str, ...] = tuple(f for f in FEATURE_WORDS if f not in XENC_FEATURES)
#: the sentences (closest by e5 first) the cross-encoder reads, and their pairs' word pieces
XENC_SENTENCES, XENC_TOKENS = 6, 128
#: the features the classifier combines: the others (relative gaps, cross ranks) added
#: nothing on the development questions (benchmarks/fit_policy.py) and stay for reports
#: and for the sparse/semantic conflict rule
CLASSIFIER_FEATURES: tuple[str, ...] = (
    "sparse_share",
    "dense_top",
    "agree_top5",
    "coverage",
    "missing_idf",
    "sent_max",
    "sent_top3",
    "sent_coverage",
    "value_missing",
)
#: the top passages of each ranking whose words and sentences the features read
TOP_PASSAGES = 3
#: the closest sentences that ``sent_coverage`` and ``value_missing`` read
TOP_SENTENCES = 3


__all__ = ["FEATURES", "feature_row", "features", "sentence_vectors", "term_weights"]


def bm25_ceiling(tokens: Sequence[str], df: Mapping[str, int], n_docs: int, k1: float) -> float:
    """The most a BM25 (Robertson idf, floored at 0) chunk score can approach for these
    query tokens: Σ idf(t)·(k1 + 1), a word unknown to the index counting as unseen."""
    return sum(
        max(0.0, math.log((n_docs - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5))) * (k1 + 1) for t in tokens
    )


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
    query: Query | str,
    a: Sequence[Hit],
    b: Sequence[Hit],
    passages: Mapping[str, str],
    df: Mapping[str, int],
    n_docs: int,
    sentences: Sequence[tuple[str, float]] = (),
    tokens: Sequence[str] | None = None,
    k1: float = Bm25Params.k1,
) -> dict[str, float]:
    """The feature vector (as a dict in ``FEATURES`` order) of one question (a ``Query``,
    or its text).

    ``passages`` maps chunk id → text for (at least) the top ``TOP_PASSAGES`` hits of
    ``a`` and ``b``; ``df`` gives each term's chunk frequency in the BM25 index, ``n_docs``
    its size; ``sentences`` are (sentence, cosine with the question) for the sentences of
    those passages (a supported question tends to have one sentence that says the answer;
    a near-domain unsupported one only topical sentences); ``tokens`` are the question's
    BM25 tokens (the default tokenizer when None); ``k1`` the BM25 index's.
    """
    q = Query.parse(query) if isinstance(query, str) else query
    question = q.text
    top_ids = [h.chunk_id for h in list(a[:TOP_PASSAGES]) + list(b[:TOP_PASSAGES])]
    text = " ".join(passages.get(c, "") for c in dict.fromkeys(top_ids))
    # the policy was fitted with the idf of the question's BM25 tokens (default tokenizer),
    # not of its content terms: kept, so the shipped policy means what it meant
    weights = term_weights(sorted(set(tokenize(question))), df, n_docs)
    cov, missing = _coverage_and_missing(question, text, weights, n_docs)
    ranked = sorted(sentences, key=lambda s: (-s[1], s[0]))
    best = [s for s, _ in ranked[:TOP_SENTENCES]]
    sims = [c for _, c in ranked]
    sent_cov, _ = coverage(question, " ".join(best), weights)
    asked = q.value
    a_top, a_gap = _top(a)
    b_top, b_gap = _top(b)
    ceiling = bm25_ceiling(q.tokens if tokens is None else tokens, df, n_docs, k1)
    return {
        "sparse_share": min(1.0, a_top / ceiling) if ceiling > 0 else 0.0,
        "sparse_gap": a_gap / a_top if a_top > 0 else 0.0,
        "dense_top": b_top,
        "dense_gap": b_gap,
        "agree_top5": len({h.page_id for h in a[:5]} & {h.page_id for h in b[:5]}) / 5.0,
        "rr_a_in_b": _rr(a[0].page_id if a else None, b),
        "rr_b_in_a": _rr(b[0].page_id if b else None, a),
        "coverage": cov,
        "missing_idf": missing,
        "sent_max": sims[0] if sims else 0.0,
        "sent_top3": float(np.mean(sims[:3])) if sims else 0.0,
        "sent_coverage": sent_cov if best else 0.0,
        "value_missing": float(asked is not None and not states(" ".join(best), asked.kind)),
    }


def _coverage_and_missing(
    question: str, text: str, weights: Mapping[str, float], n_docs: int
) -> tuple[float, float]:
    """(idf-weighted stemmed coverage of the question by ``text``, the largest idf of a
    missing word as a share of an unseen word's idf — so both lie in [0, 1] on any corpus)."""
    share, missing = coverage(question, text, weights)
    unseen = math.log(1 + (n_docs + 0.5) / 0.5)
    stems = weighted_terms(question, weights)
    worst = max((stems.get(m, 0.0) for m in missing), default=0.0)
    return share, worst / unseen if unseen > 0 else 0.0


def feature_row(
    searcher: Searcher, query: Query | str, a: Sequence[Hit], b: Sequence[Hit], xenc: bool = False
) -> dict[str, float]:
    """Features from two given rankings (the chunk texts and term statistics come from
    the searcher's store and its BM25 index; sentence cosines from e5-small, cached), and
    the cross-encoder's (``xenc_features``) when ``xenc`` (``policy.reads_xenc``: when the
    policy in force reads them)."""
    q = Query.of(searcher, query) if isinstance(query, str) else query
    df, n = searcher.term_df()
    ids = [h.chunk_id for h in list(a[:TOP_PASSAGES]) + list(b[:TOP_PASSAGES])]
    passages = {c: searcher.passage(c) for c in dict.fromkeys(ids)}
    sims = sentence_similarities(searcher, q.text, passages)
    row = features(q, a, b, passages, df, n, sims, q.tokens, searcher.settings.of("bm25").k1)
    if xenc:
        row.update(xenc_features(q.text, sims))
    return row


def xenc_features(question: str, sentences: Sequence[tuple[str, float]]) -> dict[str, float]:
    """``xenc_max`` and ``xenc_mean3``: the cross-encoder's logits (``support.crossenc``) of
    the question with the ``XENC_SENTENCES`` sentences closest by e5 (``sentences``: (text,
    cosine)), cut to ``XENC_TOKENS`` word pieces. Why: a near-miss question has topical
    sentences close in meaning, but none the cross-encoder reads as answering it."""
    from sourcepage.support.crossenc import logits

    ranked = [t for t, _ in sorted(sentences, key=lambda s: (-s[1], s[0]))[:XENC_SENTENCES]]
    if not ranked:
        return dict.fromkeys(XENC_FEATURES, 0.0)
    x = np.sort(logits(question, ranked, XENC_TOKENS))[::-1]
    return {"xenc_max": float(x[0]), "xenc_mean3": float(x[:3].mean())}


def warm_sentence_model() -> None:
    """Load the sentence encoder of the sent_* features now (once per process)."""
    from sourcepage.retrieval.dense import MODELS

    MODELS[SENTENCE_MODEL].warm()


def sentence_vectors(searcher: Searcher, sentences: Sequence[str], model: str = SENTENCE_MODEL) -> np.ndarray:
    """Vectors (n, dim, float32, normalised) of ``sentences`` under ``model``; e5-small's from the table
    that ``sourcepage index`` stores with the index (``retrieval.sentvec``, memory-mapped;
    every sentence of every chunk of the searched version), so a question encodes only
    itself; a sentence the table lacks (a stale table, other text) is encoded, through the
    store's embedding cache (other models: always so). The one way the decision and the
    quotes obtain sentence vectors."""
    from sourcepage.retrieval import rerank

    table = searcher.sentence_table() if model == SENTENCE_MODEL and sentences else None
    return rerank.sentence_vectors(searcher.store, sentences, model, table)


def sentence_similarities(
    searcher: Searcher, question: str, passages: Mapping[str, str]
) -> list[tuple[str, float]]:
    """(sentence, cosine with the question) for every sentence of ``passages``."""
    from sourcepage.text.sentences import split_sentences

    sents = sorted({s for text in passages.values() for s in split_sentences(text)})
    if not sents:
        return []
    cos = sentence_cosines(searcher, question, sents).tolist()
    return list(zip(sents, cos, strict=True))


def sentence_cosines(
    searcher: Searcher, question: str, sentences: Sequence[str], model: str = SENTENCE_MODEL
) -> np.ndarray:
    """Cosine of each sentence with the question under ``model`` (a ``retrieval.dense``
    encoder name): the one access to sentence vectors (``sentence_vectors``)."""
    if not sentences:
        return np.zeros(0)
    vecs = sentence_vectors(searcher, sentences, model)
    return vecs.astype(np.float64) @ question_vector(model, question)


@lru_cache(maxsize=4)
def question_vector(model: str, question: str) -> np.ndarray:
    """The question's vector under ``model`` (the prefetch, the policy's features and the
    quote selector ask for it in the same search: encoded once). Small, as the encoders'
    own caches (``dense.QUERY_CACHE``): with 64 entries a load run cycling through osha6's
    32 dev questions met every e5 vector in the cache after its first pass."""
    from sourcepage.retrieval.dense import MODELS

    return MODELS[model].query(question).astype(np.float64)


def matrix(rows: Sequence[Mapping[str, float]], names: Sequence[str] = FEATURES) -> np.ndarray:
    """Rows of feature dicts → an (n, len(names)) float array."""
    return np.array([[float(r[f]) for f in names] for r in rows], dtype=np.float64)
