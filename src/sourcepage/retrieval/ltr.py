"""Learned second stage: the method ``ltr:<a>+<b>[+<c>]``.

Candidates are the union of the first stages' top ``CandidateSettings.depth`` pages (30 each). Every
candidate page gets a feature vector built only from quantities that transfer across
corpora (ranks and within-question normalised scores, never a raw score scale):

* per first stage *i*: ``rr_i`` = 1/rank (0 when absent), ``z_i`` = the page score's
  z-score within that stage's top list (the minimum of the list when absent), ``doc_rr_i`` =
  1/rank of the best page of the same document, ``nb_rr_i`` = the best 1/rank of the two
  neighbouring pages (p−1, p+1) of the same document;
* ``rrf`` = the reciprocal-rank-fusion score of the stages (k = ``RRF_K``, 60, the fitted
  model's: not a design's rrf.k), scaled by k;
* ``doc_share`` = share of the candidates from the page's document;
* ``coverage`` = idf-weighted share of the question's content words that occur on the page
  (raw page text), ``missing_idf`` = the largest idf of a content word absent from it;
* ``contents`` = the audit's contents-page flag, ``low_text`` = fewer than 300 characters;
* with ``sections`` (a model whose features name them): ``sect_rr`` = 1/rank of the page's
  section among the candidates' sections in the whole-section BM25 index of ``sect:``,
  ``head`` = the idf-weighted share of the question's words in the page's headings,
  ``listing`` = the page is of a listing kind (contents, index, glossary, amendments,
  change tables: ``LISTING``, the kinds ``sect:`` put last when the shipped model was
  fitted) and the question does not ask for that kind.

A linear model (logistic regression on standardised features, pointwise ``fit`` or on
positive-minus-negative pairs of one query ``fit_pairwise``; fitted on the project's dev
questions and pairs mined from the corpora, with question-level cross-validation,
``evaluation.ltr_fit``) scores the candidates;
pages are ordered by that score (rounded to 1e-9), ties by the RRF order, then page order.
The model is plain JSON (feature names, means, scales, weights; no pickle), shipped in the
package (``models/ltr-<parts>.json``) and replaceable per store
(``<store>/indexes/<version>/ltr-<parts>.json``). Inference is numpy only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sourcepage.records import Hit, page_id, parse_page_id, renumber
from sourcepage.retrieval.bm25 import idf as bm25_idf
from sourcepage.retrieval.fusion import RRF_K, rrf
from sourcepage.retrieval.settings import CandidateSettings
from sourcepage.retrieval.tokenize import content_terms

if TYPE_CHECKING:
    from sourcepage.retrieval.methods import Method
    from sourcepage.retrieval.parsed import Parsed
    from sourcepage.retrieval.search import Searcher

MODEL_FORMAT = 1
MODELS_DIR = Path(__file__).parent / "models"
PER_PART = ("rr", "z", "doc_rr", "nb_rr")
SHARED = ("rrf", "doc_share", "coverage", "missing_idf", "contents", "low_text")
SECTION = ("sect_rr", "head", "listing")
#: the kinds of ``listing``, as the shipped model was fitted (``sect:`` has since put recitals
#: last too; the feature keeps its meaning)
LISTING = ("contents", "index", "amendments", "change_table", "glossary")


def feature_names(n_parts: int, sections: bool = False) -> list[str]:
    per_part = [f"{f}_{i}" for i in range(n_parts) for f in PER_PART]
    return per_part + list(SHARED) + list(SECTION if sections else ())


def _section_columns(searcher: Searcher, query: str, pages: list[str]) -> list[np.ndarray]:
    """``sect_rr``, ``head`` and ``listing`` of the candidate pages (module docstring)."""
    from sourcepage.retrieval.sections import asked_kinds, heading_scores, section_index

    ranks = section_index(searcher, spans=False).ranks(query, pages)  # as the shipped model was fitted
    heads = heading_scores(searcher, query, pages)
    structure = searcher.structure()
    listing = set(LISTING) - asked_kinds(query)
    return [
        np.array([1.0 / ranks[p] if p in ranks else 0.0 for p in pages]),
        np.array([heads.get(p, 0.0) for p in pages]),
        np.array([float(structure.get(p, ("", "", ""))[2] in listing) for p in pages]),
    ]


def _page_info(searcher: Searcher) -> dict[str, tuple[frozenset[str], int, int]]:
    """page id → (content words of its raw text, contents flag, low-text flag), once per
    searcher (``Searcher.memo``)."""

    def make() -> dict[str, tuple[frozenset[str], int, int]]:
        flags = {(r["doc_id"], r["page_no"]): r for r in searcher.store.page_rows()}
        out = {}
        for doc_id in searcher.documents:
            for n, text in enumerate(searcher.store.page_texts(doc_id, "raw"), 1):
                row = flags.get((doc_id, n), {})
                out[page_id(doc_id, n)] = (
                    frozenset(content_terms(text)),
                    int(row.get("contents_page", 0)),
                    int(row.get("low_text_300", 0)),
                )
        return out

    return searcher.memo("ltr_pages", make)


def candidates(
    searcher: Searcher,
    parts: Sequence[Method],
    query: str,
    filters: Mapping[str, list[str]],
    sections: bool = False,
    parsed: Parsed | None = None,
) -> tuple[list[Hit], np.ndarray]:
    """The candidate pages (in RRF order, each with the chunk of its best stage) and their
    feature matrix (rows in the same order, columns ``feature_names(len(parts), sections)``)."""
    depth = searcher.settings.of("ltr").depth
    lists = [searcher.ranked(p, query, depth, dict(filters), parsed) for p in parts]
    order = searcher.index(parts[0]).page_order
    fused = rrf(lists, order, RRF_K)
    if not fused:
        return [], np.zeros((0, len(feature_names(len(parts), sections))))
    info = _page_info(searcher)
    df, n_chunks = searcher.term_df()
    terms = sorted(content_terms(query))
    idf = {t: bm25_idf(df.get(t, 0), n_chunks) for t in terms}
    total = sum(idf.values()) or 1.0
    docs = [parse_page_id(h.page_id)[0] for h in fused]
    doc_count = {d: docs.count(d) for d in set(docs)}
    cols: list[np.ndarray] = []
    for hits in lists:
        rank = {h.page_id: h.rank for h in hits}
        scores = np.array([h.score for h in hits], dtype=np.float64)
        mu, sd = (scores.mean(), scores.std()) if scores.size else (0.0, 0.0)
        sd = sd if sd > 1e-12 else 1.0
        zmin = (scores.min() - mu) / sd if scores.size else 0.0
        score = {h.page_id: (h.score - mu) / sd for h in hits}
        doc_best: dict[str, int] = {}
        for h in hits:
            d = parse_page_id(h.page_id)[0]
            doc_best[d] = min(doc_best.get(d, h.rank), h.rank)
        rr, z, drr, nrr = [], [], [], []
        for h in fused:
            d, p = parse_page_id(h.page_id)
            rr.append(1.0 / rank[h.page_id] if h.page_id in rank else 0.0)
            z.append(score.get(h.page_id, zmin))
            drr.append(1.0 / doc_best[d] if d in doc_best else 0.0)
            nb = [rank[x] for x in (page_id(d, p - 1), page_id(d, p + 1)) if x in rank]
            nrr.append(1.0 / min(nb) if nb else 0.0)
        cols += [np.array(rr), np.array(z), np.array(drr), np.array(nrr)]
    cov, miss, contents, low = [], [], [], []
    for h in fused:
        words, c, lo = info.get(h.page_id, (frozenset(), 0, 1))
        cov.append(sum(v for t, v in idf.items() if t in words) / total)
        miss.append(max((v for t, v in idf.items() if t not in words), default=0.0))
        contents.append(c)
        low.append(lo)
    cols += [
        np.array([h.score * RRF_K for h in fused]),
        np.array([doc_count[d] / len(fused) for d in docs]),
        np.array(cov),
        np.array(miss),
        np.array(contents, dtype=np.float64),
        np.array(low, dtype=np.float64),
    ]
    if sections:
        cols += _section_columns(searcher, query, [h.page_id for h in fused])
    return fused, np.column_stack(cols)


def model_path(parts_name: str, store: Path | None = None, version: str = "raw") -> Path | None:
    """The model for these first stages: the store's own (if fitted) before the shipped one."""
    fname = f"ltr-{parts_name.replace(':', '_').replace('+', '__')}.json"
    for folder in ([store / "indexes" / version] if store else []) + [MODELS_DIR]:
        if (folder / fname).is_file():
            return folder / fname
    return None


def load_model(parts_name: str, store: Path | None = None, version: str = "raw") -> dict[str, Any]:
    path = model_path(parts_name, store, version)
    if path is None:
        raise RuntimeError(
            f"no learned-ranking model for ltr:{parts_name}; shipped models exist for "
            f"{', '.join(sorted(p.stem[4:] for p in MODELS_DIR.glob('ltr-*.json'))) or 'none'}"
        )
    model = json.loads(path.read_text())
    if model.get("format") != MODEL_FORMAT:
        raise RuntimeError(f"{path}: model format {model.get('format')}, expected {MODEL_FORMAT}")
    return model


def uses_sections(model: Mapping[str, Any]) -> bool:
    """True when the model reads the section features (``SECTION``)."""
    return any(f in model["features"] for f in SECTION)


def model_scores(model: Mapping[str, Any], x: np.ndarray) -> np.ndarray:
    """Linear scores of standardised features (numpy only); ``x`` has the model's columns."""
    mean, scale = np.asarray(model["mean"]), np.asarray(model["scale"])
    return ((x - mean) / scale) @ np.asarray(model["coef"]) + float(model["intercept"])


def fit(
    x: np.ndarray,
    y: np.ndarray,
    names: Sequence[str],
    c: float = 1.0,
    seed: int = 42,
    weights: np.ndarray | None = None,
) -> dict[str, Any]:
    """Fit the pointwise logistic model (rows weighted by ``weights``, e.g. mined pairs
    below labelled questions); returns the JSON-ready model (no parts/provenance)."""
    from sklearn.linear_model import LogisticRegression

    mean, scale = _standardisation(x)
    clf = LogisticRegression(C=c, max_iter=5000, random_state=seed)
    clf.fit((x - mean) / scale, y, sample_weight=weights)
    return _model_json(names, mean, scale, clf.coef_[0], float(clf.intercept_[0]), c)


def _standardisation(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and standard deviations (a constant column scaled by 1)."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-12] = 1.0
    return mean, scale


def _model_json(
    names: Sequence[str], mean: np.ndarray, scale: np.ndarray, coef: np.ndarray, intercept: float, c: float
) -> dict[str, Any]:
    """The model file's JSON form (``fit`` and ``fit_pairwise``)."""
    return {
        "format": MODEL_FORMAT,
        "features": list(names),
        "mean": [round(float(v), 10) for v in mean],
        "scale": [round(float(v), 10) for v in scale],
        "coef": [round(float(v), 10) for v in coef],
        "intercept": round(float(intercept), 10),
        "C": c,
    }


def fit_pairwise(
    groups: Sequence[tuple[np.ndarray, np.ndarray, float]],
    names: Sequence[str],
    depth: int = CandidateSettings.depth,
    c: float = 1.0,
    seed: int = 42,
) -> dict[str, Any]:
    """Fit the linear model on pairs: per query (its candidates' features, labels, weight),
    each positive minus each negative among the first ``depth`` candidates (RRF order), both
    signs, logistic loss without intercept; a query's pairs weigh ``weight`` in total, so a
    question with many pages does not outweigh one with few. Same JSON form as ``fit``."""
    from sklearn.linear_model import LogisticRegression

    mean, scale = _standardisation(np.vstack([g[0] for g in groups]))
    diffs, ws = [], []
    for gx, gy, weight in groups:
        z = (gx - mean) / scale
        pos, neg = np.flatnonzero(gy == 1), np.flatnonzero(gy == 0)[:depth]
        if pos.size and neg.size:
            d = (z[pos][:, None, :] - z[neg][None, :, :]).reshape(-1, z.shape[1])
            diffs.append(d)
            ws.append(np.full(len(d), weight / len(d)))
    d, w = np.vstack(diffs), np.concatenate(ws)
    clf = LogisticRegression(C=c, fit_intercept=False, max_iter=5000, random_state=seed)
    clf.fit(np.vstack([d, -d]), np.r_[np.ones(len(d)), np.zeros(len(d))], sample_weight=np.r_[w, w])
    return {
        **_model_json(names, mean, scale, clf.coef_[0], 0.0, c),
        "loss": "pairwise",
    }


def rerank(hits: Sequence[Hit], scores: np.ndarray) -> list[Hit]:
    """Hits (in RRF order) reordered by model score, ties keeping RRF order."""
    order = sorted(range(len(hits)), key=lambda i: (-round(float(scores[i]), 9), i))
    return renumber(Hit(hits[i].rank, hits[i].page_id, float(scores[i]), hits[i].chunk_id) for i in order)


class LtrMethod:
    """The registered stage ``ltr:<a>+<b>[+<c>]`` (see the module docstring)."""

    kind = "ltr"
    grammar = "ltr:<a>+<b>[+<c>]"
    summary = "learned ranking of the first stages' top pages (linear model, shipped JSON)"
    settings_type, learned = CandidateSettings, True
    arity = "many"

    def examples(self, bases: Sequence[str]) -> list[str]:
        out = []
        for path in sorted(MODELS_DIR.glob("ltr-*.json")):
            parts = json.loads(path.read_text()).get("parts", "")
            if parts and all(p in bases for p in parts.split("+")):
                out.append(f"ltr:{parts}")
        return out

    def rank(
        self,
        searcher: Searcher,
        method: Method,
        query: str,
        k: int | None,
        filters: dict[str, list[str]],
        parsed: Parsed | None = None,
    ) -> list[Hit]:
        parts_name = "+".join(p.name for p in method.parts)
        model = searcher.memo(
            f"ltr_model:{parts_name}", lambda: load_model(parts_name, searcher.store.path, searcher.version)
        )
        hits, x = candidates(searcher, method.parts, query, filters, uses_sections(model), parsed)
        if not hits:
            return []
        out = rerank(hits, model_scores(model, x))
        return out[:k] if k else out


METHOD = LtrMethod()
