"""Speed is measured, not assumed: extraction, BM25 index build and query latency.

Everything is timed in one run on one machine, each figure the median over
``repeats`` runs, next to the study's reference benchmark (§3.8: 417 pages
extracted by pypdf in 9.70 s, BM25 index 0.074 s, query median 0.671 ms over 54
questions after warm-up, on a different machine, Python 3.13.5).

- ``extraction``: serial ``extract_pdf`` over the corpus PDFs with each engine.
  Our ``pypdf`` engine also opens every page with PDFium to record its layout, so
  its rate is a lower bound for pypdf alone.
- ``index_build``: BM25 over the raw chunks of the store, on the same tokens
  (our tokenizer): ours (``bm25.build``), plain ``bm25s.BM25()`` with its defaults
  and rank_bm25's ``BM25Okapi``.
- ``query``: per-question latency (median over repeats), after one warm-up query.
  ``searcher`` is the full page-level path (tokenize, score, collapse to pages,
  top 20); the three ``*scores`` rows score pre-tokenized queries only.
- ``parity``: our chunk scores against rank_bm25 ``BM25Okapi(epsilon=0)``.

rank_bm25 is a peer from the dev extra, imported only here and only when present:
without it, its rows are ``{"installed": False}``, its ratios None and parity is not
checked (``ok`` None); everything else is still measured.

Each section is a small function returning a plain dict; the CLI prints them.
"""

from __future__ import annotations

import importlib
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.retrieval.bm25 import Bm25Params
from sourcepage.store.schema import now

REFERENCE: dict[str, Any] = {
    "source": "study §3.8 reference benchmark (18 PDFs, 417 pages, 1052 raw chunks, 54 questions; "
    "5 vCPU AMD EPYC 9V74 VM, Python 3.13.5, pypdf 5.9.0)",
    "extract_pages": 417,
    "extract_seconds": 9.70,
    "extract_pages_per_s": round(417 / 9.70, 1),
    "chunk_seconds": 0.023,
    "index_seconds": 0.074,
    "query_ms": {"mean": 0.735, "p50": 0.671, "p95": 1.250, "max": 2.865},
    "questions": 54,
}
PACKAGES = ("sourcepage", "bm25s", "rank-bm25", "pypdf", "pypdfium2", "numpy", "scipy", "PyStemmer")
#: the row of a peer that is not installed (rank_bm25 comes with the dev extra only)
NOT_INSTALLED: dict[str, Any] = {"installed": False}
OURS, BM25S, RANK_BM25 = "ours (bm25.build)", "bm25s (defaults)", "rank_bm25 BM25Okapi"
RANK_BM25_QUERY = "rank_bm25 get_scores"
#: largest |Δscore| against rank_bm25 that still counts as the same BM25
TOLERANCE = 1e-6


def optional_peer(module: str) -> Any | None:
    """An optional peer package, imported now, or None when it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> dict[str, Any]:
    """Python, platform, CPU and the versions of the packages timed here."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_usable": affinity,
        "packages": versions,
        "timestamp": now(),
    }


def bench_extraction(
    corpus: str | Path, repeats: int = 5, engines: tuple[str, ...] = ("pypdfium2", "pypdf")
) -> dict[str, Any]:
    """Serial ``extract_pdf`` over every corpus PDF, per engine: median seconds and pages/s."""
    from sourcepage.corpus.extract import extract_pdf
    from sourcepage.corpus.manifest import read_manifest

    manifest = read_manifest(corpus, allow_checksum_mismatch=True)
    paths = [manifest.pdf_path(d) for d in manifest.documents]
    out: dict[str, Any] = {"documents": len(paths), "engines": {}}
    for engine in engines:
        runs: list[float] = []
        pages = 0
        failed: dict[str, str] = {}
        for _ in range(repeats):
            pages = 0
            t0 = time.perf_counter()
            for p in paths:
                try:
                    pages += len(extract_pdf(p, engine).texts)
                except Exception as e:  # a bad PDF is reported, not fatal
                    failed[p.name] = f"{type(e).__name__}: {e}"
            runs.append(time.perf_counter() - t0)
        sec = _median(runs)
        rate = pages / sec if sec > 0 else float("nan")
        out["engines"][engine] = {
            "pages": pages,
            "seconds": sec,
            "seconds_runs": runs,
            "pages_per_s": rate,
            "x_study": rate / REFERENCE["extract_pages_per_s"],
            "failed": failed,
        }
    return out


def load_chunks(corpus: str | Path, store: str | Path, version: str = "raw") -> dict[str, Any]:
    """The store's chunks (ingesting the corpus first, incrementally) and their tokens."""
    from sourcepage.ingest import ingest
    from sourcepage.retrieval.tokenize import tokenize
    from sourcepage.store.db import Store

    report = ingest(corpus, store, workers=1)
    st = Store(store)
    try:
        chunks = st.chunks(version)
    finally:
        st.close()
    if not chunks:
        raise ValueError(f"store {store} has no {version!r} chunks after ingest")
    tok_sec, tokens = _timed(lambda: [tokenize(c.text) for c in chunks])
    return {
        "chunk_ids": [c.chunk_id for c in chunks],
        "tokens": tokens,
        "tokenize_seconds": tok_sec,
        "pages": len({c.page_id for c in chunks}),
        "ingest": {
            "extracted": len(report.extracted),
            "unchanged": len(report.unchanged),
            "failed": report.failed,
        },
    }


def _builders(
    k1: float = Bm25Params.k1, b: float = Bm25Params.b
) -> dict[str, Callable[[list[list[str]]], Any] | None]:
    """Index builders by row name; None for a peer that is not installed."""
    import bm25s

    from sourcepage.retrieval import bm25

    rank_bm25 = optional_peer("rank_bm25")

    def plain_bm25s(tokens: list[list[str]]) -> Any:
        model = bm25s.BM25()
        model.index(tokens, show_progress=False)
        return model

    return {
        OURS: lambda tokens: bm25.build(tokens, k1, b),
        BM25S: plain_bm25s,
        RANK_BM25: (
            (lambda tokens: rank_bm25.BM25Okapi(tokens, k1=k1, b=b, epsilon=0)) if rank_bm25 else None
        ),
    }


def bench_index(tokens: list[list[str]], repeats: int = 5) -> dict[str, Any]:
    """Median seconds to build each BM25 index on the same tokenized chunks."""
    out: dict[str, Any] = {"chunks": len(tokens), "tokens": sum(map(len, tokens)), "builds": {}}
    for name, build in _builders().items():
        if build is None:
            out["builds"][name] = dict(NOT_INSTALLED)
            continue
        runs = [_timed(lambda build=build: build(tokens))[0] for _ in range(repeats)]
        sec = _median(runs)
        out["builds"][name] = {
            "seconds": sec,
            "seconds_runs": runs,
            "x_study": sec / REFERENCE["index_seconds"],
        }
    return out


def _latency(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms, dtype=np.float64)
    return {
        "mean": float(a.mean()),
        "p50": float(np.percentile(a, 50)),
        "p95": float(np.percentile(a, 95)),
        "max": float(a.max()),
    }


def bench_query(
    store: str | Path, tokens: list[list[str]], queries: list[str], repeats: int = 5
) -> dict[str, Any]:
    """Per-query latency (ms) of six paths in a warm process (indexes and models loaded
    before the timing): our page-level BM25, the default method's ranking, the whole
    search a user gets (ranking, decision, quotes), our raw BM25 scores, bm25s and
    rank_bm25; each query's time is its median over repeats."""
    from sourcepage import api
    from sourcepage.retrieval import bm25
    from sourcepage.retrieval.methods import default_method, parse_method
    from sourcepage.retrieval.search import Searcher
    from sourcepage.retrieval.tokenize import tokenize

    if not queries:
        raise ValueError("no questions to time")
    models = {name: build(tokens) for name, build in _builders().items() if build is not None}
    ours, plain, okapi = models[OURS], models[BM25S], models.get(RANK_BM25)
    searcher = Searcher(store, "raw")
    searcher.index(parse_method("bm25"))  # load (or build) the stored index outside the timing
    default = default_method()
    for need in parse_method(default).needs():
        searcher.index(need)
    api.service(store, "raw").prepare(parse_method(default))  # the policy's indexes and models
    qtokens = [tokenize(q) for q in queries]
    plain_vocab = plain.vocab_dict

    def plain_scores(qt: list[str]) -> np.ndarray:
        known = [t for t in qt if t in plain_vocab]
        return plain.get_scores(known) if known else np.zeros(len(tokens), dtype=np.float32)

    paths: dict[str, Callable[[int], Any] | None] = {
        "ours Searcher.rank (page-level, k=20)": lambda i: searcher.rank(queries[i], "bm25", k=20),
        f"ours Searcher.rank ({default}, k=20)": lambda i: searcher.rank(queries[i], default, k=20),
        f"ours api.search ({default}: rank, decide, quote)": lambda i: api.search(
            queries[i], store, default, refer=False
        ),
        "ours bm25.scores": lambda i: bm25.scores(ours, qtokens[i]),
        "bm25s get_scores (defaults)": lambda i: plain_scores(qtokens[i]),
        RANK_BM25_QUERY: (lambda i: okapi.get_scores(qtokens[i])) if okapi is not None else None,
    }
    out: dict[str, Any] = {"questions": len(queries), "repeats": repeats, "paths": {}}
    for name, fn in paths.items():
        if fn is None:
            out["paths"][name] = dict(NOT_INSTALLED)
            continue
        fn(0)  # warm-up
        per_query = []
        for i in range(len(queries)):
            runs = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn(i)
                runs.append((time.perf_counter() - t0) * 1000)
            per_query.append(_median(runs))
        out["paths"][name] = _latency(per_query)
    base = out["paths"][RANK_BM25_QUERY].get("p50")
    for stats in out["paths"].values():
        if "p50" in stats:
            stats["x_rank_bm25_p50"] = stats["p50"] / base if base else None
            stats["x_study_p50"] = stats["p50"] / REFERENCE["query_ms"]["p50"]
    return out


def bench_parity(
    tokens: list[list[str]], queries: list[str], k1: float = Bm25Params.k1, b: float = Bm25Params.b
) -> dict:
    """Max |ours − rank_bm25 BM25Okapi(epsilon=0)| over every chunk score of every query
    (``ok`` None when rank_bm25 is not installed)."""
    from sourcepage.retrieval import bm25
    from sourcepage.retrieval.tokenize import tokenize

    rank_bm25 = optional_peer("rank_bm25")
    if rank_bm25 is None:
        return {
            "questions": len(queries),
            **NOT_INSTALLED,
            "max_abs_diff": None,
            "tolerance": TOLERANCE,
            "ok": None,
        }
    ours = bm25.build(tokens, k1, b)
    okapi = rank_bm25.BM25Okapi(tokens, k1=k1, b=b, epsilon=0)
    worst = 0.0
    for q in queries:
        qt = tokenize(q)
        diff = np.abs(bm25.scores(ours, qt) - np.asarray(okapi.get_scores(qt), dtype=np.float64))
        worst = max(worst, float(diff.max()) if diff.size else 0.0)
    return {"questions": len(queries), "max_abs_diff": worst, "tolerance": TOLERANCE, "ok": worst < TOLERANCE}


def run_bench(
    corpus: str | Path,
    questions: str | Path,
    store: str | Path,
    repeats: int = 5,
    progress: Callable[[str], None] | None = None,
    with_service: bool = True,
) -> dict[str, Any]:
    """Every section, in one run: machine, extraction, chunks, index build, query, parity,
    and (``with_service``) the cold one-shot search and the web API (``bench.startup``)."""
    from sourcepage.evaluation.questions import read_questions

    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    say = progress or (lambda _msg: None)
    queries = [q.question for q in read_questions(questions)]
    say("extraction")
    extraction = bench_extraction(corpus, repeats)
    say("chunks")
    chunks = load_chunks(corpus, store)
    tokens = chunks.pop("tokens")
    say("index build")
    index = bench_index(tokens, repeats)
    say("queries")
    query = bench_query(store, tokens, queries, repeats)
    say("parity")
    parity = bench_parity(tokens, queries)
    startup = None
    if with_service:
        from sourcepage.bench.startup import run_startup

        say("cold one-shot search and the web API")
        startup = run_startup(store, queries, runs=min(repeats, 3), requests=min(1000, 50 * len(queries)))
    return {
        "machine": machine_info(),
        "settings": {
            "corpus": str(corpus),
            "questions": str(questions),
            "store": str(store),
            "repeats": repeats,
            "text_version": "raw",
            "statistic": "median over repeats",
        },
        "reference": REFERENCE,
        "extraction": extraction,
        "chunks": {
            "chunks": len(chunks["chunk_ids"]),
            "pages": chunks["pages"],
            "tokenize_seconds": chunks["tokenize_seconds"],
            "ingest": chunks["ingest"],
        },
        "index_build": index,
        "query": query,
        "parity": parity,
        "startup": startup,
    }
