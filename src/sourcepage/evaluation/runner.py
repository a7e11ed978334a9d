"""One experiment runner over benchmark adapters.

A :class:`Benchmark` adapter says how to get the store (it ingests and opens it), the
queries, the qrels and the runs ((text version, method) pairs), how a ranking becomes
:class:`RunHit` s, which metrics it reports and what it adds around them.
:func:`evaluate` is the one code path that ranks every query with every run, times
each query, scores and tests, and writes into ``out``:

- ``metrics.json``: per run the mean of every reported metric over the evaluated
  queries (those whose qrels hold a relevant docno), the adapter's extra fields and the
  query latency (mean, p50, p95, max in ms, after one untimed warm-up query);
- ``ranked.jsonl``: one row a ranked page (benchmark-format.md §4);
- ``per_question.jsonl``: the per-query values behind every mean;
- ``stats.json``: bootstrap CIs of every metric; in each family of runs (the methods
  within a text version, the text versions within a method) paired Wilcoxon tests with
  Holm correction, bootstrap CIs of the difference, rank-biserial effect sizes, exact
  McNemar on a hit metric, and a Friedman test for three or more runs;
- ``trec/qrels.txt`` and ``trec/<version>__<method>.run`` (one writer, evaluation.runs);

and returns all of it as a typed :class:`RunResult`. :func:`run_benchmark` runs it and
then the steps after it, which take that result:
the adapter's own (``Benchmark.steps``: the answerability study and the figures of a
questions benchmark), then ``report.md`` (``Benchmark.report``) and ``run.json``, the
provenance record (``evaluation.provenance``, one writer for every adapter).

The adapters: ``evaluation.experiment.QuestionsBenchmark`` (questions.jsonl and a PDF
or plain-text corpus), ``evaluation.beir.BeirBenchmark`` (a BEIR folder) and the sweep's
``sweep.cell.CellBenchmark``.
"""

from __future__ import annotations

import json
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.evaluation import metrics as M
from sourcepage.evaluation import stats as S
from sourcepage.evaluation.provenance import Provenance, provenance_record, write_provenance
from sourcepage.evaluation.relevance import Qrels, Run, RunHit
from sourcepage.evaluation.runs import write_trec_qrels, write_trec_run
from sourcepage.jsonl import jsonl_lines
from sourcepage.records import Ranking
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.settings import IndexSettings
from sourcepage.store.db import Store
from sourcepage.store.files import write_json, write_jsonl

__all__ = [
    "Benchmark",
    "Prepared",
    "Progress",
    "RunResult",
    "Step",
    "evaluate",
    "latency_summary",
    "run_benchmark",
    "run_means",
    "score_query",
]

Progress = Callable[[str, int, int], None]
Key = tuple[str, str]  # (text version, method)


@dataclass
class Prepared:
    """What an adapter's :meth:`Benchmark.prepare` hands the runner."""

    store: Store  # open; the runner closes it
    queries: dict[str, str]  # question id → text, in ranking order
    qrels: Qrels  # the judgements: grades of ranked.jsonl, trec/qrels.txt, metrics
    ingest_s: float


@dataclass
class RunResult:
    """What one run of :func:`run_benchmark` made: the rankings, the scores, the tables
    written, the timings, and what the steps after the runner add (the answerability
    study, the figures, the provenance record). The adapter hooks read it as it fills."""

    out: Path
    store: Path
    runs: list[Key]
    queries: dict[str, str]
    qrels: Qrels
    evaluated: list[str]  # question ids averaged over: those with a relevant docno
    timings: dict[str, float]
    results: dict[Key, Run] = field(default_factory=dict)
    latency: dict[Key, list[float]] = field(default_factory=dict)
    scores: dict[Key, dict[str, dict[str, float]]] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)  # ranked.jsonl
    per_question: list[dict[str, Any]] = field(default_factory=list)  # per_question.jsonl
    metrics: dict[str, Any] = field(default_factory=dict)  # metrics.json
    stats: dict[str, Any] = field(default_factory=dict)  # stats.json
    support: dict[str, Any] | None = None  # answerability.json (a questions benchmark's step)
    figures: list[str] = field(default_factory=list)  # figure files in ``out``, report order
    provenance: dict[str, Any] = field(default_factory=dict)  # run.json

    @classmethod
    def load(cls, out: str | Path, qrels: Qrels | None = None) -> RunResult:
        """A finished run read back from its folder (metrics.json, stats.json, ranked.jsonl,
        per_question.jsonl, run.json, answerability.json when there is one); ``qrels``:
        the judgements (default: the grades of ranked.jsonl's rows). The query texts and
        the latencies are not in the files: ``queries`` and ``latency`` stay empty."""
        out = Path(out)
        info = _read_json(out / "run.json")
        rows = _read_jsonl(out / "ranked.jsonl")
        docno = "beir_id" if rows and "beir_id" in rows[0] else "page"
        results = Run.from_rows(rows, docno=docno)
        if qrels is None:
            judged: dict[str, dict[str, int]] = {}
            for r in rows:
                judged.setdefault(r["question_id"], {})[r[docno]] = r["grade"]
            qrels = Qrels(judged)
        support = out / "answerability.json"
        return cls(
            out=out,
            store=Path(info["store"]),
            runs=[tuple(r) for r in info["runs"]],  # type: ignore[misc]
            queries={},
            qrels=qrels,
            evaluated=qrels.relevant_ids(),
            timings=info["timings"],
            results=results,
            rows=rows,
            per_question=_read_jsonl(out / "per_question.jsonl"),
            metrics=_read_json(out / "metrics.json"),
            stats=_read_json(out / "stats.json"),
            support=_read_json(support) if support.exists() else None,
            figures=info.get("figures", []),
            provenance=info,
        )


#: a step after the runner: reads the result (and may add to it and write into ``out``)
Step = Callable[[RunResult, "Progress | None"], None]


class Benchmark(ABC):
    """A benchmark adapter: what differs between benchmarks. Subclasses set the
    attributes in ``__init__`` (so a bad design fails before any ingest)."""

    runs: list[Key]
    #: ranks kept per query, and the ranks every metric looks at
    depth: int = M.DEFAULT_DEPTH
    #: reported metric name → evaluation.metrics name, in report order
    metrics: Mapping[str, str]
    #: (metric compared pairwise, its name in stats.json, the hit metric McNemar tests)
    paired: tuple[str, str, str]
    index_settings: IndexSettings
    bootstrap: int
    seed: int
    #: the untimed query that builds or loads the indexes of a run (None: the first query)
    warmup: str | None = None
    #: label of the ranking progress ({n}, {total}, {version}, {method})
    progress_label: str = "rank {version} {method}"
    #: ranked.jsonl field that holds the judged docno when it is not the page id
    docno_field: str | None = None
    #: keep every text version's Searcher while ranking (a later run of a version reuses
    #: its loaded indexes)
    keep_searchers: bool = False

    @property
    def k(self) -> int:
        """Pages asked of the searcher per query."""
        return self.depth

    @abstractmethod
    def prepare(self, store: Path, progress: Progress | None) -> Prepared:
        """Read the queries and qrels, ingest into ``store`` and open it."""

    def hits(self, qid: str, ranking: Ranking) -> list[RunHit]:
        """The ranked hits kept for ``qid``; by default every page, docno = page id."""
        return [RunHit(h.page_id, h.score, h.page_id, h.chunk_id) for h in ranking.hits]

    def encode(self, docno: str) -> str:
        """The TREC token of a question id or docno."""
        return docno

    def run_fields(self, result: RunResult, run: Run) -> dict[str, Any]:
        """Extra fields of the run's metrics.json entry."""
        return {}

    def ci_fields(self, result: RunResult, run: Run) -> dict[str, Any]:
        """Extra entries of the run's CIs in stats.json."""
        return {}

    def stats_fields(self, result: RunResult) -> dict[str, Any]:
        """Extra top-level fields of stats.json."""
        return {}

    @abstractmethod
    def question_row(
        self,
        base: dict[str, Any],
        hits: Sequence[RunHit],
        scores: Mapping[str, float] | None,
        first: int | None,
    ) -> dict[str, Any] | None:
        """The per_question.jsonl row of one (run, query), from ``base`` (question_id,
        text_version, method), the hits, and for an evaluated query its metric values
        and first relevant rank; None writes no row."""

    @abstractmethod
    def metrics_header(self, result: RunResult) -> dict[str, Any]:
        """metrics.json's fields besides ``runs``."""

    def steps(self) -> Sequence[Step]:
        """The adapter's steps after the runner, in order (before the report)."""
        return ()

    @abstractmethod
    def provenance(self, result: RunResult) -> Provenance:
        """What run.json records of this benchmark besides what every run records."""

    @abstractmethod
    def report(self, result: RunResult) -> None:
        """Write report.md from the result (its ``provenance`` included)."""


# --------------------------------------------------------------------------- scoring


def score_query(
    ranked: Sequence[str], judged: Mapping[str, int], metrics: Mapping[str, str], depth: int
) -> dict[str, float]:
    """Reported name → value for one query (``ranked``: docnos in rank order)."""
    return {name: M.score(spec, ranked, judged, depth) for name, spec in metrics.items()}


def score_run(
    run: Run, qrels: Qrels, qids: Sequence[str], metrics: Mapping[str, str], depth: int
) -> dict[str, dict[str, float]]:
    """question id → reported name → value, over ``qids`` (an unranked query scores 0)."""
    return {q: score_query(run.ranked(q), qrels[q], metrics, depth) for q in qids}


def _means(table: Mapping[str, Mapping[str, float]], names: Sequence[str]) -> dict[str, float]:
    return {m: round(float(np.mean([v[m] for v in table.values()])), 6) if table else math.nan for m in names}


def run_means(
    run: Run, qrels: Qrels, qids: Sequence[str], metrics: Mapping[str, str], depth: int
) -> dict[str, Any]:
    """A run's metrics.json entry without extra fields and latency."""
    table = score_run(run, qrels, qids, metrics, depth)
    return {"text_version": run.text_version, "method": run.method, **_means(table, list(metrics))}


def latency_summary(ms: Sequence[float]) -> dict[str, float]:
    a = np.array(ms)
    return {
        "mean": round(float(a.mean()), 3),
        "p50": round(float(np.median(a)), 3),
        "p95": round(float(np.percentile(a, 95)), 3),
        "max": round(float(a.max()), 3),
    }


# --------------------------------------------------------------------------- the runner


def run_benchmark(
    bench: Benchmark, out: str | Path, store: str | Path | None = None, progress: Progress | None = None
) -> RunResult:
    """Run ``bench`` (rank, score, test: ``evaluate``), then its steps, its report and
    run.json; every output in ``out``. ``store`` defaults to ``out/store``."""
    t_start = time.perf_counter()
    result = evaluate(bench, out, store, progress)
    for step in bench.steps():
        step(result, progress)
    result.timings["total_s"] = round(time.perf_counter() - t_start, 3)
    result.provenance = provenance_record(bench, result, bench.provenance(result))
    bench.report(result)
    write_provenance(result)
    return result


def evaluate(
    bench: Benchmark, out: str | Path, store: str | Path | None = None, progress: Progress | None = None
) -> RunResult:
    """Rank every query with every run, score and test; write metrics.json, ranked.jsonl,
    per_question.jsonl, stats.json and trec/ into ``out``; the store is closed after."""
    out = Path(out)
    store = Path(store) if store else out / "store"
    prep = bench.prepare(store, progress)
    result = RunResult(
        out=out,
        store=store,
        runs=list(bench.runs),
        queries=prep.queries,
        qrels=prep.qrels,
        evaluated=prep.qrels.relevant_ids(),
        timings={"ingest_s": round(prep.ingest_s, 3)},
    )
    try:
        _rank(bench, prep.store, result, progress)
    finally:
        prep.store.close()
    _score(bench, result)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "metrics.json", result.metrics)
    write_jsonl(out / "ranked.jsonl", result.rows)
    write_jsonl(out / "per_question.jsonl", result.per_question)
    t0 = time.perf_counter()
    result.stats = statistics(bench, result)
    result.timings["statistics_s"] = round(time.perf_counter() - t0, 3)
    write_json(out / "stats.json", result.stats)
    write_trec_qrels(out / "trec" / "qrels.txt", result.qrels, encode=bench.encode)
    for run in result.results.values():
        write_trec_run(out / "trec" / f"{run.name}.run", run, run.name, encode=bench.encode)
    return result


def _rank(bench: Benchmark, st: Store, result: RunResult, progress: Progress | None) -> None:
    """Rank every query with every run; the warm-up query of a run is not timed."""
    warmup = bench.warmup if bench.warmup is not None else next(iter(result.queries.values()))
    searchers: dict[str, Searcher] = {}
    for n, (version, method) in enumerate(result.runs, 1):
        if version not in searchers:
            if not bench.keep_searchers:
                searchers.clear()
            cb = progress  # index builds report "<method> index (<version>, first use)"
            searchers[version] = Searcher(st, version, bench.index_settings, progress=cb)
        s = searchers[version]
        t0 = time.perf_counter()
        s.rank(warmup, method, k=1)  # builds or loads the indexes
        result.timings[f"index_{version}_{method}_s"] = round(time.perf_counter() - t0, 3)
        lat = result.latency.setdefault((version, method), [])
        run = result.results[(version, method)] = Run(text_version=version, method=method)
        label = bench.progress_label.format(n=n, total=len(result.runs), version=version, method=method)
        for i, (qid, text) in enumerate(result.queries.items(), 1):
            t0 = time.perf_counter()
            ranking = s.rank(text, method, k=bench.k)
            lat.append((time.perf_counter() - t0) * 1000)
            run[qid] = bench.hits(qid, ranking)
            if progress:
                progress(label, i, len(result.queries))


def _score(bench: Benchmark, result: RunResult) -> None:
    """metrics.json's data, ranked.jsonl's rows and per_question.jsonl's rows."""
    names = list(bench.metrics)
    entries = []
    for key, run in result.results.items():
        table = score_run(run, result.qrels, result.evaluated, bench.metrics, bench.depth)
        result.scores[key] = table
        entries.append(
            {
                "text_version": run.text_version,
                "method": run.method,
                **_means(table, names),
                **bench.run_fields(result, run),
                "query_ms": latency_summary(result.latency[key]),
            }
        )
        for qid in result.queries:
            hits = run.get(qid, [])
            for rank, h in enumerate(hits, 1):
                row = {
                    "question_id": qid,
                    "text_version": run.text_version,
                    "method": run.method,
                    "rank": rank,
                    "page": h.page,
                    "score": h.score,
                    "chunk_id": h.chunk_id,
                    "grade": result.qrels.grade(qid, h.docno),
                }
                if bench.docno_field:
                    row[bench.docno_field] = h.docno
                result.rows.append(row)
        for qid in result.queries:
            scores = table.get(qid)
            first = (
                M.first_relevant_rank(run.ranked(qid), result.qrels[qid], bench.depth)
                if scores is not None
                else None
            )
            base = {"question_id": qid, "text_version": run.text_version, "method": run.method}
            row = bench.question_row(base, run.get(qid, []), scores, first)
            if row is not None:
                result.per_question.append(row)
    result.metrics = {**bench.metrics_header(result), "runs": entries}


def statistics(bench: Benchmark, result: RunResult) -> dict[str, Any]:
    """Bootstrap CIs, Friedman, Wilcoxon + Holm, McNemar, rank-biserial (study §3.7)."""
    B, seed = bench.bootstrap, bench.seed

    def col(v: str, m: str, metric: str) -> list[float]:
        return [float(result.scores[(v, m)][q][metric]) for q in result.evaluated]

    ci: dict[str, Any] = {}
    for v, m in result.runs:
        ci[f"{v} {m}"] = {
            name: list(S.bootstrap_ci(col(v, m, name), B, seed)) for name in bench.metrics
        } | bench.ci_fields(result, result.results[(v, m)])
    metric, label, hit = bench.paired
    runs = result.runs
    versions = list(dict.fromkeys(v for v, _ in runs))
    methods = list(dict.fromkeys(m for _, m in runs))
    groups = [(f"methods within {v}", [(m, (v, m)) for m in methods if (v, m) in runs]) for v in versions]
    groups += [
        (f"text versions within {m}", [(v, (v, m)) for v in versions if (v, m) in runs]) for m in methods
    ]
    pairwise: list[dict[str, Any]] = []
    friedman: list[dict[str, Any]] = []
    for family, members in groups:
        if len(members) < 2:
            continue
        scores = {name: col(*vm, metric) for name, vm in members}
        hits = {name: [x >= 1 for x in col(*vm, hit)] for name, vm in members}
        pairs = [(a, b) for i, (a, _) in enumerate(members) for b, _ in members[i + 1 :]]
        comps = S.compare_family(scores, hits, pairs=pairs, n_resamples=B, seed=seed)
        pairwise.append({"family": family, "metric": label, "mcnemar_on": hit, "comparisons": comps})
        if len(members) >= 3:
            friedman.append({"family": family, "metric": label, **S.friedman(scores)})
    return {
        "schema": 1,
        "bootstrap_resamples": B,
        "seed": seed,
        **bench.stats_fields(result),
        "confidence": 0.95,
        "ci": ci,
        "friedman": friedman,
        "pairwise": pairwise,
    }


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for _, _, line in jsonl_lines(path) if line.strip()]
