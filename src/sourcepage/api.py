"""The small public API that the CLI and the web service are thin shells over."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sourcepage.records import Hit, parse_page_id
from sourcepage.retrieval.filters import Filters, check_filters
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.tokenize import content_terms
from sourcepage.store.db import Store
from sourcepage.support.answer import extract_answer, log_answer
from sourcepage.support.check import gate
from sourcepage.support.decide import Calibration, decide, drivers
from sourcepage.support.features import feature_row, term_weights
from sourcepage.support.policy import load_policy, policy_stamp, store_policy

#: how many top pages the decision and the jurisdiction notice look at
DECISION_DEPTH = 5
#: depth of the rankings the support features are computed on
FEATURE_DEPTH = 20


class SearchService:
    """The one search path of the CLI, the Python API and the web service, for one store
    and text version: rank once per method, attach provenance, decide, quote.

    A service is valid for one content state of the store: ``service()`` compares the
    store's ``content_stamp`` (changed by every ingest) and the policy file's stamp on each
    call and builds a new service when either changed, so a running server sees a re-ingest
    or a new calibration."""

    def __init__(self, store: str | Path, version: str = "raw"):
        self.path = Path(store)
        self.version = version
        self.searcher = Searcher(Store(store), version)
        self.stamp = self.searcher.store.content_stamp()
        self.policy_stamp = policy_stamp(self.path, version)
        self.policy, self.policy_note = store_policy(
            load_policy(self.path, self.version), self.searcher.fingerprint
        )

    def calibration(
        self, question: str, a: list[Hit], b: list[Hit]
    ) -> tuple[Calibration, dict[str, float]] | None:
        """The policy's verdict inputs from its sparse (``a``) and semantic (``b``) rankings,
        or None without a policy."""
        pol = self.policy
        if pol is None:
            return None
        feats = feature_row(self.searcher, question, a, b)
        prob = float(pol.classifier.predict([feats])[0])
        pro, con = drivers(pol.classifier.contributions(feats), feats, pol.reference)
        cal = Calibration(
            prob,
            pol.t_refuse,
            pol.t_answer,
            pol.describe(),
            pro,
            con,
            conflicting=feats["rr_a_in_b"] == 0 and feats["rr_b_in_a"] == 0,
            max_answerable_refused=pol.max_answerable_refused,
        )
        return cal, feats

    def search(
        self,
        question: str,
        method: str = "bm25",
        k: int = 10,
        filters: Filters | None = None,
        answer: bool = True,
        log: bool = False,
    ) -> dict[str, Any]:
        """See ``search``."""
        if not question.strip():
            raise ValueError("the question is empty")
        s = self.searcher
        m = parse_method(method)
        f = check_filters(filters, list(s.documents.values()))
        pol = self.policy
        t0 = time.perf_counter()
        depth = max(k, FEATURE_DEPTH) if pol and m.name in (pol.sparse, pol.semantic) else k
        ranked: dict[str, list[Hit]] = {m.name: s.ranked(m, question, depth, f)}
        ms = (time.perf_counter() - t0) * 1000
        hits = ranked[m.name][:k]
        terms = content_terms(question)
        results = [self._result(h, terms) for h in hits]
        top = results[:DECISION_DEPTH]
        cal = None
        if pol is not None and results:
            for name in (pol.sparse, pol.semantic):
                if name not in ranked:  # each method is ranked once per question
                    ranked[name] = s.ranked(parse_method(name), question, FEATURE_DEPTH, f)
            a, b = (ranked[n][:FEATURE_DEPTH] for n in (pol.sparse, pol.semantic))
            cal = self.calibration(question, a, b)
        overlap = any(r["highlights"] for r in top)
        decision = decide(
            m.name,
            [s.documents[r["doc_id"]] for r in top],
            overlap,
            cal[0] if cal else None,
            self.policy_note,
        )
        support = None
        if cal and pol:
            c, feats = cal
            support = {
                "probability": round(c.probability, 6),
                "t_refuse": c.t_refuse,
                "t_answer": None if c.t_answer == float("inf") else c.t_answer,
                "policy": f"{pol.pair} on {self.version}",
                "origin": pol.origin,
                "features": feats,
            }
        ans = None
        if answer or decision.decision == "answer":  # an answer is only given once its quotes are checked
            df, n = s.term_df()
            weights = term_weights(sorted(terms), df, n)
            ans = extract_answer(question, results, decision.decision, weights)
            ans, decision = gate(question, ans, decision, weights)
        out: dict[str, Any] = {
            "question": question,
            "method": m.name,
            "text_version": self.version,
            "k": k,
            "filters": dict(filters or {}),
            "decision": decision.decision,
            "reasons": list(decision.reasons),
            "support": support,
            "jurisdictions": sorted({r["jurisdiction"] for r in top}),
            "query_ms": round(ms, 3),
            "results": results,
        }
        if answer and ans is not None:
            if log:
                log_answer(self.path, question, m.name, decision.decision, ans)
            out["answer"] = ans
        return out

    def _result(self, h: Hit, terms: set[str]) -> dict[str, Any]:
        """One hit with its provenance (spec §5)."""
        doc_id, n = parse_page_id(h.page_id)
        d = self.searcher.documents[doc_id]
        passage = self.searcher.passage(h.chunk_id)
        return {
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


_services: dict[tuple[str, str], SearchService] = {}
_services_lock = threading.Lock()


def service(store: str | Path, version: str = "raw") -> SearchService:
    """The cached SearchService of (store, version), rebuilt when the store's content or
    its policy changed since it was made."""
    key = (str(Path(store).resolve()), version)
    with _services_lock:
        svc = _services.get(key)
        if svc is not None:
            if svc.searcher.store.content_stamp() == svc.stamp and policy_stamp(svc.path, version) == (
                svc.policy_stamp
            ):
                return svc
            svc.searcher.store.close()
        svc = _services[key] = SearchService(store, version)
        return svc


def searcher(store: str | Path, version: str = "raw") -> Searcher:
    """The current Searcher of (store, version), so indexes load once per content state."""
    return service(store, version).searcher


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
    return service(store, version).search(question, method, k, filters, answer, log)


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
