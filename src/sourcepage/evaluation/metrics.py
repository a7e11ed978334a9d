"""Page-level retrieval metrics (benchmark-format spec §4, study §3.6).

A ranking is a sequence of unique page ids (``"osha3120#p12"``), best first.
Judgements map page id -> evidence grade (1 or 2); absent pages are grade 0.
Ranks are 1-based and only the first ``depth`` ranks (default 20, as the study
evaluates) are ever looked at: a question with no labelled page in the top 20
has reciprocal rank 0 and first relevant rank ``None`` (reported as ">20").

All per-question functions return plain floats; :func:`evaluate` averages
them over the questions that have at least one relevant page.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from scipy.stats import rankdata

from sourcepage.evaluation.relevance import Run
from sourcepage.records import doc_of

Ranked = Sequence[str]
Judged = Mapping[str, int]
MetricFn = Callable[[Ranked, Judged, int, int], float]

DEFAULT_DEPTH = 20

__all__ = [
    "DEFAULT_DEPTH",
    "METRICS",
    "Judged",
    "Ranked",
    "auroc",
    "doc_hit_at",
    "doc_of",
    "evaluate",
    "first_relevant_rank",
    "hit_at",
    "miss_kind",
    "ndcg_at",
    "parse_metric",
    "per_question",
    "recall_at",
    "reciprocal_rank",
    "relevant_pages",
    "score",
]


# --------------------------------------------------------------------------- helpers


def relevant_pages(judged: Judged) -> set[str]:
    """Pages with grade >= 1, i.e. the set R_i of labelled supporting pages."""
    return {page for page, grade in judged.items() if grade >= 1}


def _cut(ranked: Ranked, k: int, depth: int) -> Ranked:
    """First ``min(k, depth)`` pages: the evaluated prefix P_{i,k}."""
    if k < 1:
        raise ValueError(f"cutoff k must be >= 1, got {k}")
    return ranked[: min(k, depth)]


# --------------------------------------------------------------------------- per question


def hit_at(ranked: Ranked, judged: Judged, k: int, depth: int = DEFAULT_DEPTH) -> float:
    """Hit@k = I(R ∩ P_k ≠ ∅): 1.0 if any page with grade >= 1 is in the first k.

    The practical question "is supporting evidence shown early enough?".
    """
    rel = relevant_pages(judged)
    return 1.0 if any(page in rel for page in _cut(ranked, k, depth)) else 0.0


def recall_at(ranked: Ranked, judged: Judged, k: int, depth: int = DEFAULT_DEPTH) -> float:
    """Recall@k = |R ∩ P_k| / |R|; stricter than Hit@k for multi-page answers.

    Returns 0.0 when the question has no relevant page (such questions are
    excluded by :func:`evaluate`).
    """
    rel = relevant_pages(judged)
    if not rel:
        return 0.0
    return sum(1 for page in _cut(ranked, k, depth) if page in rel) / len(rel)


def first_relevant_rank(ranked: Ranked, judged: Judged, depth: int = DEFAULT_DEPTH) -> int | None:
    """1-based rank r of the first page with grade >= 1 in the top ``depth``, else None.

    None is what the study's error table prints as ">20".
    """
    rel = relevant_pages(judged)
    for rank, page in enumerate(ranked[:depth], start=1):
        if page in rel:
            return rank
    return None


#: the kinds of a rank-1 miss, nearest first (``miss_kind``)
MISS_KINDS = ("adjacent page", "same document", "other document", "nothing ranked")


def miss_kind(ranked: Ranked, judged: Judged) -> str | None:
    """What the first page is when it is not a labelled one: the page next to a labelled
    page of the same document ("adjacent page", |n − m| = 1), another page of a document
    that holds a labelled page ("same document"), a page of another document, or nothing
    ranked. None on a rank-1 hit (or no labelled page). Page ids are ``doc#pN``."""
    rel = relevant_pages(judged)
    if not rel or (ranked and ranked[0] in rel):
        return None
    if not ranked:
        return MISS_KINDS[3]
    doc, _, n = ranked[0].rpartition("#p")
    same = [p.rpartition("#p")[2] for p in rel if p.rpartition("#p")[0] == doc]
    if not same:
        return MISS_KINDS[2]
    if n.isdigit() and any(m.isdigit() and abs(int(m) - int(n)) == 1 for m in same):
        return MISS_KINDS[0]
    return MISS_KINDS[1]


def reciprocal_rank(ranked: Ranked, judged: Judged, depth: int = DEFAULT_DEPTH) -> float:
    """RR = 1 / r for the first relevant rank r <= depth, else 0 (MRR is its mean).

    ``mrr@k`` is the same with ``depth = min(k, depth)``.
    """
    rank = first_relevant_rank(ranked, judged, depth)
    return 0.0 if rank is None else 1.0 / rank


def ndcg_at(
    ranked: Ranked,
    judged: Judged,
    k: int,
    graded: bool = False,
    depth: int = DEFAULT_DEPTH,
) -> float:
    """nDCG@k = DCG@k / IDCG@k with DCG@k = Σ_{j=1..k} g_j / log2(j + 1).

    Binary gains (g_j = 1 if grade >= 1 else 0) by default, as the study and the
    spec report ``ndcg@10``. ``graded=True`` uses the linear gain g_j = grade, the
    variant of trec_eval ``ndcg_cut`` (ir_measures ``nDCG@k``) and ranx ``ndcg``
    (ranx ``ndcg_burges`` is the 2^g - 1 variant, not used here). IDCG@k is the
    DCG@k of the ideal ordering of all judged pages (grade-descending).
    """

    def gain(grade: int) -> float:
        if grade < 1:
            return 0.0
        return float(grade) if graded else 1.0

    top = _cut(ranked, k, depth)
    dcg = sum(gain(judged.get(page, 0)) / math.log2(j + 1) for j, page in enumerate(top, 1))
    ideal = sorted((gain(g) for g in judged.values()), reverse=True)[: min(k, depth)]
    idcg = sum(g / math.log2(j + 1) for j, g in enumerate(ideal, 1))
    return dcg / idcg if idcg > 0 else 0.0


def doc_hit_at(ranked: Ranked, judged: Judged, k: int, depth: int = DEFAULT_DEPTH) -> float:
    """Doc-Hit@k: 1.0 if a document holding a labelled page is among the first k
    distinct documents of the ranking (pages collapsed to ``doc_of(page)``).

    Only the first ``depth`` pages are collapsed, so fewer than k distinct
    documents may be available. Shows the study's document- vs page-level gap.
    """
    if k < 1:
        raise ValueError(f"cutoff k must be >= 1, got {k}")
    rel_docs = {doc_of(page) for page in relevant_pages(judged)}
    seen: list[str] = []
    for page in ranked[:depth]:
        doc = doc_of(page)
        if doc in seen:
            continue
        if doc in rel_docs:
            return 1.0
        seen.append(doc)
        if len(seen) >= k:
            break
    return 0.0


# --------------------------------------------------------------------------- registry


def _mrr(ranked: Ranked, judged: Judged, k: int, depth: int) -> float:
    return reciprocal_rank(ranked, judged, min(k, depth))


def _ndcg(ranked: Ranked, judged: Judged, k: int, depth: int) -> float:
    return ndcg_at(ranked, judged, k, graded=False, depth=depth)


def _ndcg_graded(ranked: Ranked, judged: Judged, k: int, depth: int) -> float:
    return ndcg_at(ranked, judged, k, graded=True, depth=depth)


#: metric family -> function(ranked, judged, k, depth). Every family but ``mrr``
#: needs an ``@k``; plain ``mrr`` uses k = depth (20), i.e. the study's MRR.
METRICS: dict[str, MetricFn] = {
    "hit": hit_at,
    "recall": recall_at,
    "mrr": _mrr,
    "ndcg": _ndcg,
    "ndcg_graded": _ndcg_graded,
    "doc_hit": doc_hit_at,
}
_OPTIONAL_K = {"mrr"}

_KNOWN_FORMS = "hit@k, recall@k, mrr, mrr@k, ndcg@k, ndcg_graded@k, doc_hit@k (k >= 1)"
_NAME = re.compile(r"^([a-z_]+)(?:@(\d+))?\Z")


def parse_metric(name: str) -> tuple[str, int | None]:
    """Split a metric name like ``"ndcg@10"`` into ``("ndcg", 10)``; ``"mrr"`` -> ``("mrr", None)``.

    Raises ValueError naming the known forms for anything else.
    """
    match = _NAME.match(name.strip())
    if match is None or match.group(1) not in METRICS:
        raise ValueError(f"unknown metric {name!r}; known forms: {_KNOWN_FORMS}")
    family, k_text = match.group(1), match.group(2)
    k = None if k_text is None else int(k_text)
    if (k is None and family not in _OPTIONAL_K) or (k is not None and k < 1):
        raise ValueError(f"metric {name!r} needs a cutoff k >= 1; known forms: {_KNOWN_FORMS}")
    return family, k


def score(name: str, ranked: Ranked, judged: Judged, depth: int = DEFAULT_DEPTH) -> float:
    """Value of the named metric (see :func:`parse_metric`) for one question."""
    family, k = parse_metric(name)
    return METRICS[family](ranked, judged, depth if k is None else k, depth)


# --------------------------------------------------------------------------- over questions


def per_question(
    qrels: Mapping[str, Judged],
    run: Mapping[str, Ranked] | Run,
    metrics: Sequence[str],
    depth: int = DEFAULT_DEPTH,
) -> dict[str, dict[str, float]]:
    """metric -> question id -> value, over the qrels questions with >= 1 relevant page.

    ``qrels`` is a :class:`Qrels` or any such mapping; ``run`` a :class:`Run` or a
    mapping of question id -> ranked page ids. A question absent from ``run`` counts
    as an empty ranking (all metrics 0). Question ids keep the qrels order, so
    columns pair up across runs.
    """
    for name in metrics:
        parse_metric(name)
    if isinstance(run, Run):
        run = run.ids()
    qids = [qid for qid, judged in qrels.items() if relevant_pages(judged)]
    return {name: {qid: score(name, run.get(qid, ()), qrels[qid], depth) for qid in qids} for name in metrics}


def evaluate(
    qrels: Mapping[str, Judged],
    run: Mapping[str, Ranked] | Run,
    metrics: Sequence[str],
    depth: int = DEFAULT_DEPTH,
) -> dict[str, float]:
    """metric -> mean over the answerable questions, e.g. MRR = (1/N) Σ_i 1/r_i.

    NaN for a metric when no question has a relevant page.
    """
    table = per_question(qrels, run, metrics, depth)
    return {
        name: (float(np.mean(list(values.values()))) if values else math.nan)
        for name, values in table.items()
    }


# --------------------------------------------------------------------------- answerability


def auroc(positive_scores: Sequence[float], negative_scores: Sequence[float]) -> float:
    """AUROC in Mann–Whitney form: P(pos > neg) + 0.5 · P(pos = neg).

    AUROC = (R_pos − n_pos(n_pos + 1)/2) / (n_pos · n_neg), with R_pos the sum of
    the positives' average ranks in the pooled sample (ties get 0.5). Used to ask
    how well a top page score separates answerable from unsupported questions.
    NaN if either side is empty.
    """
    pos = np.asarray(positive_scores, dtype=float)
    neg = np.asarray(negative_scores, dtype=float)
    n_pos, n_neg = pos.size, neg.size
    if n_pos == 0 or n_neg == 0:
        return math.nan
    ranks = rankdata(np.concatenate([pos, neg]))
    r_pos = float(ranks[:n_pos].sum())
    return (r_pos - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)
