"""The small public API that the CLI and the web service are thin shells over."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sourcepage.records import parse_page_id
from sourcepage.retrieval.filters import Filters
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.tokenize import TokenizerConfig, tokenize
from sourcepage.store.db import Store
from sourcepage.support.answer import extract_answer, log_answer
from sourcepage.support.calibrate import Policy, index_df, load_policy, question_features
from sourcepage.support.decide import Calibration, decide
from sourcepage.support.features import term_weights

#: how many top pages the decision and the jurisdiction notice look at
DECISION_DEPTH = 5

_searchers: dict[tuple[str, str], Searcher] = {}
_policies: dict[tuple[str, str], Policy | None] = {}
# Searches run concurrently (the web service has no search lock): these caches are
# filled once under a lock so two threads never build two Searchers for one key.
# A Searcher serialises its own index loading and building.
_cache_lock = threading.RLock()


def searcher(store: str | Path, version: str = "raw") -> Searcher:
    """A cached Searcher per (store, version), so indexes load once per process."""
    key = (str(Path(store).resolve()), version)
    found = _searchers.get(key)
    if found is None:
        with _cache_lock:
            if key not in _searchers:
                _searchers[key] = Searcher(Store(store), version)
            found = _searchers[key]
    return found


def policy(store: str | Path, version: str) -> Policy | None:
    """The calibrated policy stored with the version's indexes, if it matches the chunks."""
    key = (str(Path(store).resolve()), version)
    if key not in _policies:
        with _cache_lock:
            if key not in _policies:
                p = load_policy(Path(store), version)
                if p is not None and p.chunk_fingerprint:
                    if p.chunk_fingerprint != searcher(store, version).store.chunk_fingerprint(version):
                        p = None  # calibrated on other chunks: stale
                _policies[key] = p
    return _policies[key]


def calibration_for(
    store: str | Path, version: str, question: str, filters: Filters | None = None
) -> tuple[Calibration, dict[str, float]] | None:
    """The calibrated verdict inputs for a question, or None without a policy."""
    pol = policy(store, version)
    if pol is None:
        return None
    feats, _, _ = question_features(
        searcher(store, version), question, pol.sparse, pol.semantic, filters=filters
    )
    from sourcepage.support.features import matrix

    prob = float(pol.classifier.proba(matrix([feats]))[0])
    cal = Calibration(
        prob,
        pol.t_refuse,
        pol.t_answer,
        pol.target_recall,
        pol.n_questions["answerable"],
        f"{pol.sparse} + {pol.semantic} on {version}",
        conflicting=feats["rr_a_in_b"] == 0 and feats["rr_b_in_a"] == 0,
    )
    return cal, feats


def query_terms(question: str) -> set[str]:
    """Content words of a question (stop words removed), for highlighting and overlap."""
    return set(tokenize(question, TokenizerConfig(stopwords=True))) - {"a", "i"}


def highlight_spans(passage: str, terms: set[str]) -> list[tuple[int, int]]:
    """Character spans of ``passage`` whose word is a query term (case-insensitive)."""
    return [
        (m.start(), m.end())
        for m in re.finditer(r"[^\W_]+(?:['’][^\W_]+)?", passage)
        if m.group(0).lower().replace("’", "'") in terms
    ]


def search(
    question: str,
    store: str | Path,
    method: str = "bm25",
    k: int = 10,
    version: str = "raw",
    filters: Filters | None = None,
    answer: bool = True,
    log: bool = False,
) -> dict[str, Any]:
    """Ranked source pages with provenance, a support decision (spec §5) and, unless
    the decision is refuse, quoted supporting sentences with citations (appended to
    ``<store>/answers.jsonl``, apart from retrieval, when ``log`` is set)."""
    if not question.strip():
        raise ValueError("the question is empty")
    s = searcher(store, version)
    t0 = time.perf_counter()
    ranking = s.rank(question, method, k=k, filters=filters)
    ms = (time.perf_counter() - t0) * 1000
    terms = query_terms(question)
    results = []
    for h in ranking.hits:
        doc_id, n = parse_page_id(h.page_id)
        d = s.documents[doc_id]
        passage = s.passage(h.chunk_id)
        results.append(
            {
                "rank": h.rank,
                "page": h.page_id,
                "doc_id": doc_id,
                "page_number": n,
                "score": h.score,
                "chunk_id": h.chunk_id,
                "passage": passage,
                "highlights": highlight_spans(passage, terms),
                "title": d.title,
                "authority": d.authority,
                "jurisdiction": d.jurisdiction,
                "year": d.year,
                "doc_type": d.doc_type,
                "role": d.role,
                "source_url": d.source_url,
                "topic": d.topic,
                "extra": dict(d.extra),
            }
        )
    top = results[:DECISION_DEPTH]
    overlap = any(r["highlights"] for r in top)
    cal = calibration_for(store, version, question, filters) if results else None
    decision = decide(
        ranking.method, [s.documents[r["doc_id"]] for r in top], overlap, cal[0] if cal else None
    )
    support = None
    if cal:
        c, feats = cal
        support = {
            "probability": round(c.probability, 6),
            "t_refuse": c.t_refuse,
            "t_answer": None if c.t_answer == float("inf") else c.t_answer,
            "policy": c.pair,
            "features": feats,
        }
    out: dict[str, Any] = {
        "question": question,
        "method": ranking.method,
        "text_version": version,
        "k": k,
        "filters": dict(filters or {}),
        "decision": decision.decision,
        "reasons": list(decision.reasons),
        "support": support,
        "jurisdictions": sorted({r["jurisdiction"] for r in top}),
        "query_ms": round(ms, 3),
        "results": results,
    }
    if answer:
        df, n = index_df(s)
        ans = extract_answer(question, results, decision.decision, term_weights(sorted(terms), df, n))
        if log:
            log_answer(s.store.path, question, ranking.method, decision.decision, ans)
        out["answer"] = ans
    return out


def documents(store: str | Path) -> list[dict[str, Any]]:
    st = Store(store)
    try:
        return [d.as_dict() for d in st.documents()]
    finally:
        st.close()


def filters_from_pairs(pairs: list[str] | None) -> Mapping[str, list[str]]:
    """``["topic=loto", "jurisdiction=US,UK"]`` → {"topic": ["loto"], "jurisdiction": ["US", "UK"]}."""
    out: dict[str, list[str]] = {}
    for p in pairs or []:
        key, eq, value = p.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"filter {p!r} must look like field=value")
        out.setdefault(key.strip(), []).extend(v.strip() for v in value.split(",") if v.strip())
    return out
