"""The small public API that the CLI and the web service are thin shells over: a façade
over the one search pipeline (``sourcepage.pipeline``), the evaluation and the store.

``search`` is ``pipeline.SearchService.respond`` on the cached service of a store and
version (``service``), then the reviewer's desk: a ``review`` decision is referred and a
reviewed answer attached (``labels.referrals``)."""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from sourcepage.corpus.fields import ASSET_URL_KEY, check_asset_url
from sourcepage.pipeline import DECISION_DEPTH, FEATURE_DEPTH, InvalidSearch, SearchService, one_blas_thread
from sourcepage.response import SearchResponse
from sourcepage.retrieval.filters import Filters
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.search import Searcher
from sourcepage.store.db import Store
from sourcepage.store.lock import editing
from sourcepage.support.policy import load_policy

__all__ = [
    "DECISION_DEPTH",
    "DEFAULT_VERSION",
    "FEATURE_DEPTH",
    "InvalidSearch",
    "SearchService",
    "documents",
    "evaluate",
    "filters_from_pairs",
    "index_plan",
    "one_blas_thread",
    "one_question_process",
    "search",
    "searcher",
    "sentence_plan",
    "service",
    "set_asset_url",
    "step_lines",
]

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
            if svc.current() or (not build and editing(store)):
                # while the library changes (an add, a withdrawal: its ingest, then its index
                # builds) a search keeps the indexes it loaded: the service answers throughout
                return svc
            # The old service is only dropped, never closed: a search in another thread may
            # still hold it (closing its connection there failed that search, and closing a
            # connection in use crashed libsqlite3). Its connection closes when the last
            # holder lets go of it (sqlite3 closes a connection when it is freed).
        svc = _services[key] = SearchService(store, version, build)
        return svc


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
) -> SearchResponse:
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

    out = service(store, version, build).respond(question, method, k, filters, answer, log, notify, progress)
    return cast(SearchResponse, attach(store, dict(out))) if refer else out


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
    """``["topic=loto", "jurisdiction=US,UK"]`` → {"topic": ["loto"], "jurisdiction": ["US", "UK"]}.
    A comma inside a value is written ``\\,`` (``title=Lifting\\, slinging``), a backslash ``\\\\``."""
    out: dict[str, list[str]] = {}
    for p in pairs or []:
        key, eq, value = p.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"filter {p!r} must look like field=value")
        parts = re.split(r"(?<!\\)((?:\\\\)*),", value)  # commas not escaped by a backslash
        values = ["".join(parts[i : i + 2]) for i in range(0, len(parts), 2)]
        values = [re.sub(r"\\([\\,])", r"\1", v).strip() for v in values]
        out.setdefault(key.strip(), []).extend(v for v in values if v)
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
