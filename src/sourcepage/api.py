"""The small public API that the CLI and the web service are thin shells over."""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sourcepage.corpus.fields import ASSET_URL_KEY, asset_links, check_asset_url, document_fields
from sourcepage.records import Document, Hit, parse_page_id
from sourcepage.retrieval import duplicates
from sourcepage.retrieval.filters import Filters, check_filters
from sourcepage.retrieval.index import IndexMissing
from sourcepage.retrieval.methods import Method, default_method, parse_method
from sourcepage.retrieval.routing import router
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.tokenize import content_terms
from sourcepage.store.db import Store
from sourcepage.support.answer import extract_answer, log_answer
from sourcepage.support.decide import Calibration, decide, drivers, gate
from sourcepage.support.features import SENTENCE_MODEL, feature_row, term_weights, warm_sentence_model
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
    or a new calibration. With ``build=False`` (the web service) a missing or stale index
    raises IndexMissing instead of being built."""

    def __init__(self, store: str | Path, version: str = "raw", build: bool = True):
        self.path = Path(store)
        self.version = version
        self.searcher = Searcher(Store(store), version, auto_build=build)
        self.stamp = self.searcher.store.content_stamp()
        self.policy_stamp = policy_stamp(self.path, version)
        self.policy, self.policy_note = store_policy(
            load_policy(self.path, self.version), self.searcher.fingerprint
        )
        self._texts: dict[str, str] = {}
        self._sentence_model_ready = False

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
        method: str | None = None,
        k: int = 10,
        filters: Filters | None = None,
        answer: bool = True,
        log: bool = False,
        notify: Callable[[str], None] | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> dict[str, Any]:
        """See ``search``."""
        if not question.strip():
            raise ValueError("the question is empty")
        s = self.searcher
        m = parse_method(method or default_method())
        f = check_filters(filters, list(s.documents.values()))
        t0 = time.perf_counter()
        load_ms, unusable = self.prepare(m, notify, progress)
        pol = None if unusable else self.policy
        t1 = time.perf_counter()
        # twice k pages, so that k remain after near-duplicate pages are grouped
        depth = max(2 * k, FEATURE_DEPTH) if pol and m.name in (pol.sparse, pol.semantic) else 2 * k
        ranked: dict[str, list[Hit]] = {m.name: s.ranked(m, question, depth, f)}
        rank_ms = (time.perf_counter() - t1) * 1000
        t2 = time.perf_counter()
        groups = duplicates.group(ranked[m.name][: 2 * k], self._page_text)[:k]
        terms = content_terms(question)
        results = []
        for h, dups in groups:
            r = self._result(h, terms)
            r["duplicates"] = [self._duplicate(d, sim) for d, sim in dups]
            results.append(r)
        top = results[:DECISION_DEPTH]
        cal = None
        if pol is not None and results:
            for name in (pol.sparse, pol.semantic):
                if name not in ranked:  # each method is ranked once per question
                    ranked[name] = s.ranked(parse_method(name), question, FEATURE_DEPTH, f)
            a, b = (ranked[n][:FEATURE_DEPTH] for n in (pol.sparse, pol.semantic))
            cal = self.calibration(question, a, b)
        overlap = any(r["highlights"] for r in top)
        route = router(s).route(question)
        uncovered = route.uncovered if not route.jurisdictions else ()
        decision = decide(
            m.name,
            [s.documents[r["doc_id"]] for r in top],
            overlap,
            cal[0] if cal else None,
            uncovered=uncovered,
            covered=router(s).codes,
            no_policy=unusable or self.policy_note,
        )
        ans = None
        if answer or decision.decision == "answer":  # an answer is only given once its quotes are checked
            df, n = s.term_df()
            weights = term_weights(sorted(terms), df, n)
            ans = extract_answer(
                question,
                results,
                decision.decision,
                weights,
                texts=s.store.raw_pages([r["page"] for r in results[:3]]),
            )
            ans, decision = gate(question, ans, decision, weights)
        decide_ms = (time.perf_counter() - t2) * 1000
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
            "routing": {
                **route.as_dict(),
                "applied": bool(route.jurisdictions) and "route" in _kinds(m) and "jurisdiction" not in f,
            },
            "query_ms": round((time.perf_counter() - t0) * 1000, 3),
            "timings_ms": {
                "load": round(load_ms, 3),
                "rank": round(rank_ms, 3),
                "decide": round(decide_ms, 3),
            },
            "results": results,
        }
        if answer and ans is not None:
            if log:
                log_answer(self.path, question, m.name, decision.decision, ans)
            out["answer"] = ans
        return out

    def _page_text(self, page: str) -> str:
        """Raw text of a page (cached: grouping compares the same top pages again)."""
        if page not in self._texts:
            doc_id, n = parse_page_id(page)
            row = self.searcher.store.page(doc_id, n)
            self._texts[page] = row["raw"] if row else ""
        return self._texts[page]

    def _duplicate(self, h: Hit, similarity: float) -> dict[str, Any]:
        doc_id, n = parse_page_id(h.page_id)
        d = self.searcher.documents[doc_id]
        return {
            "page": h.page_id,
            "doc_id": doc_id,
            "page_number": n,
            "rank": h.rank,
            "score": h.score,
            "similarity": similarity,
            "title": d.title,
            "jurisdiction": d.jurisdiction,
        }

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
        extra = [
            b
            for name in ([pol.sparse, pol.semantic] if pol else [])
            for b in parse_method(name).needs()
            if b not in own
        ]
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
            **self._fields(d),
        }

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


_services: dict[tuple[str, str, bool], SearchService] = {}
_services_lock = threading.Lock()


def service(store: str | Path, version: str = "raw", build: bool = True) -> SearchService:
    """The cached SearchService of (store, version), rebuilt when the store's content or
    its policy changed since it was made. ``build=False``: never build an index (raise
    IndexMissing, whose message names the ``sourcepage index`` command)."""
    key = (str(Path(store).resolve()), version, build)
    with _services_lock:
        svc = _services.get(key)
        if svc is not None:
            if svc.searcher.store.content_stamp() == svc.stamp and policy_stamp(svc.path, version) == (
                svc.policy_stamp
            ):
                return svc
            svc.searcher.store.close()
        svc = _services[key] = SearchService(store, version, build)
        return svc


def searcher(store: str | Path, version: str = "raw", build: bool = True) -> Searcher:
    """The current Searcher of (store, version), so indexes load once per content state."""
    return service(store, version, build).searcher


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
    method: str | None = None,
    k: int = 10,
    version: str = "raw",
    filters: Filters | None = None,
    answer: bool = True,
    log: bool = False,
    build: bool = True,
    notify: Callable[[str], None] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Ranked source pages with provenance (``method`` None: ``default_method()``, measured
    on the dev splits), a support decision (spec §5) and, unless
    the decision is refuse, quoted supporting sentences with citations (appended to
    ``<store>/answers.jsonl``, apart from retrieval, when ``log`` is set). ``build``:
    build a missing or stale index first (else IndexMissing). ``query_ms`` is the whole call;
    ``timings_ms`` splits it into ``load`` (indexes and models, built on first use — ``notify``
    hears about it, ``progress(label, done, total)`` follows such a build), ``rank`` and
    ``decide`` (features, decision and quotes)."""
    return service(store, version, build).search(question, method, k, filters, answer, log, notify, progress)


def step_lines(stream: Any = None) -> Callable[[str, int, int], None]:
    """A ``progress(label, done, total)`` callback that writes one line when a step starts
    and one when it ends, with its time (for Python callers: a long evaluation is never
    silent; the CLI draws rich bars instead)."""
    started: dict[str, float] = {}

    def tick(label: str, done: int, total: int) -> None:
        out = stream or sys.stderr
        if label not in started:
            started[label] = time.perf_counter()
            print(f"{label} …", file=out, flush=True)
        if total and done >= total and started[label] >= 0:
            print(f"{label}: done in {time.perf_counter() - started[label]:.1f} s", file=out, flush=True)
            started[label] = -1.0

    return tick


def evaluate(
    corpus: str | Path,
    questions: str | Path,
    out: str | Path,
    *,
    versions: list[str] | None = None,
    methods: list[str] | None = None,
    config: str | Path | None = None,
    bootstrap: int | None = None,
    store: str | Path | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """What ``sourcepage eval`` does: run a design (``config``, an experiment.yaml, else the
    study's three text versions × bm25, lsa, rrf:bm25+lsa; ``versions`` / ``methods``
    replace its first block) over ``questions`` and write metrics.json, report.md and the
    rest into ``out``; returns metrics.json's data. ``store`` defaults to ``out/store``,
    ingested and indexed on first use (minutes for a corpus of hundreds of pages).

    It says what it does on stderr — the plan, then a line when each step starts and ends
    — unless ``quiet``; ``progress(label, done, total)`` replaces those step lines."""
    from sourcepage.evaluation.experiment import Design, run_experiment

    design = Design.from_yaml(config) if config else Design()
    design.override(versions, methods, bootstrap)
    where = Path(store) if store else Path(out) / "store"
    if not quiet:
        runs = design.runs()
        plan = f"{len(runs)} run{'' if len(runs) == 1 else 's'} ({', '.join(f'{v} {m}' for v, m in runs)})"
        print(
            f"evaluating {plan} on {questions}; "
            f"store {where} (built on first use), report {Path(out) / 'report.md'}",
            file=sys.stderr,
            flush=True,
        )
    tick = progress or (None if quiet else step_lines())
    return run_experiment(corpus, questions, out, design=design, store=store, progress=tick)


def documents(store: str | Path) -> list[dict[str, Any]]:
    st = Store(store)
    try:
        return [d.as_dict() for d in st.documents()]
    finally:
        st.close()


def set_asset_url(store: str | Path, template: str) -> str:
    """Keep ``template`` (an http(s) URL with ``{asset_id}``, e.g.
    ``https://bim.example.com/viewer?guid={asset_id}``) in the store: every hit with an
    ``asset_id`` then links to it; '' removes the links. Returns the template kept."""
    template = check_asset_url(template)
    st = Store(store)
    try:
        with st.transaction() as conn:
            st.set_meta(ASSET_URL_KEY, template, conn)
    finally:
        st.close()
    return template


def filters_from_pairs(pairs: list[str] | None) -> Mapping[str, list[str]]:
    """``["topic=loto", "jurisdiction=US,UK"]`` → {"topic": ["loto"], "jurisdiction": ["US", "UK"]}."""
    out: dict[str, list[str]] = {}
    for p in pairs or []:
        key, eq, value = p.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"filter {p!r} must look like field=value")
        out.setdefault(key.strip(), []).extend(v.strip() for v in value.split(",") if v.strip())
    return out


#: the text version ``search`` reads unless told otherwise
DEFAULT_VERSION = "raw"


def index_plan(store: str | Path, versions: list[str]) -> list[tuple[str, str]]:
    """(text version, base method) pairs that ``search`` with its defaults and the README's
    examples needs on ``versions``: bm25 and lsa on each, dense on the default version when
    its packages are installed, and the two methods of each version's stored answer policy."""
    from sourcepage.retrieval.methods import available_methods

    plan: list[tuple[str, str]] = [(v, m) for v in versions for m in ("bm25", "lsa")]
    if DEFAULT_VERSION in versions and "dense" in available_methods():
        plan.append((DEFAULT_VERSION, "dense"))
    for v in versions:
        pol = load_policy(Path(store), v)
        if pol is not None:
            plan += [(v, b.name) for name in (pol.sparse, pol.semantic) for b in parse_method(name).needs()]
    return list(dict.fromkeys(plan))
