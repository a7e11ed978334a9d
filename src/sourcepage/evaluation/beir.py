"""Evaluate retrieval methods on a BEIR folder, scored as BEIR (pytrec_eval) scores it.

``run_beir`` ingests the folder (corpus.beir, streamed and incremental), ranks every
query of the split that has at least one relevant document with every (text version,
method), and writes into ``out``:

- ``metrics.json``: per run ``ndcg_cut_10`` (graded, linear gains: trec_eval's
  ``ndcg_cut.10``, BEIR's NDCG@10), ``mrr@10`` (reciprocal rank within the first 10),
  ``recall@100`` (trec_eval ``recall_100``), and our page metrics (hit@k, recall@k,
  mrr, binary ndcg@10, ndcg_graded@10), all over the first ``depth`` = 100 ranks;
  ``skipped_queries`` counts the split's queries without any document of score > 0,
  which are not ranked or averaged (pytrec_eval would give them 0);
- ``ranked.jsonl``: benchmark-format.md §4 rows (``page`` = ``<doc_id>#p1``) plus
  ``beir_id``, the first 100 documents of every evaluated query;
- ``trec/qrels.txt`` (the split's qrels rows of the evaluated queries, grade-0 rows
  included) and ``trec/<version>__<method>.run``, with the ORIGINAL BEIR ids (whitespace
  inside an id percent-encoded, see corpus.beir.trec_id), for trec_eval, pytrec_eval,
  ir_measures or ranx. trec_eval and pytrec_eval against the original
  ``qrels/<split>.tsv`` give the same means (they average over the queries of the run);
  ir_measures and ranx average over the qrels' queries, so give them ``trec/qrels.txt``;
- ``per_question.jsonl``, ``stats.json`` (bootstrap CIs; paired comparisons when a
  family has two or more runs), ``report.md`` and ``run.json``.

Ranks follow trec_eval's order (score descending, tied scores by docno descending), so
pytrec_eval on the written files gives the same numbers to the last digit. As BEIR does
by default, a document whose id equals the query id is dropped from that query's ranking
(``ignore_identical_ids``; matters for ArguAna and Quora).

:class:`BeirBenchmark` is the runner's adapter for a BEIR folder (evaluation.runner
ranks, times, scores and writes); :func:`run_beir` runs it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sourcepage.corpus.beir import (
    BEIR_SETTINGS,
    dataset_name,
    id_map,
    read_qrels,
    read_queries,
    trec_id,
)
from sourcepage.evaluation import stats as S
from sourcepage.evaluation.provenance import Provenance
from sourcepage.evaluation.relevance import Qrels, Run, RunHit
from sourcepage.evaluation.runner import (
    Benchmark,
    Prepared,
    Progress,
    RunResult,
    run_benchmark,
    run_means,
    score_query,
)
from sourcepage.evaluation.runs import trec_eval_order
from sourcepage.ingest import ingest_beir
from sourcepage.records import Ranking, check_text_version
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.settings import IndexSettings
from sourcepage.store.db import Store
from sourcepage.text.versions import TextSettings
from sourcepage.vocabulary import PAGE_METRICS

__all__ = [
    "BEIR_METRICS",
    "DEPTH",
    "PAGE_METRICS",
    "BeirBenchmark",
    "beir_scores",
    "metrics_from_ranked",
    "run_beir",
]

DEPTH = 100
#: BEIR's headline measures, as pytrec_eval computes them: name → evaluation.metrics name
BEIR_REPORTED: dict[str, str] = {
    "ndcg_cut_10": "ndcg_graded@10",
    "mrr@10": "mrr@10",
    "recall@100": "recall@100",
}
BEIR_METRICS: tuple[str, ...] = tuple(BEIR_REPORTED)
#: every reported metric: BEIR's, then our page metrics over the same depth
REPORTED: dict[str, str] = {**BEIR_REPORTED, **{m: m for m in PAGE_METRICS}}
#: metric compared pairwise (Wilcoxon, bootstrap ΔnDCG) and the hit used for McNemar
PAIRED_METRIC, PAIRED_HIT = "ndcg_cut_10", "hit@10"


def beir_scores(ranked: Sequence[str], judged: Mapping[str, int], depth: int = DEPTH) -> dict[str, float]:
    """Every reported metric of one query. ``ranked``: BEIR ids in trec_eval order;
    ``judged``: the query's qrels (BEIR id → score; score >= 1 is relevant)."""
    return score_query(ranked, judged, REPORTED, depth)


def metrics_from_ranked(
    rows: Sequence[Mapping[str, Any]], qrels: Mapping[str, Mapping[str, int]], depth: int = DEPTH
) -> list[dict[str, Any]]:
    """The ``runs`` list of metrics.json (without latency) from ranked.jsonl rows and the
    split's qrels: means over the queries with a relevant document."""
    q = Qrels({k: dict(v) for k, v in qrels.items()})
    qids = q.relevant_ids()
    return [run_means(run, q, qids, REPORTED, depth) for run in Run.from_rows(rows, docno="beir_id").values()]


class BeirBenchmark(Benchmark):
    """A BEIR folder: each document is one page; the queries of the split with a
    relevant document (and a text) are ranked and scored against the original ids."""

    metrics = REPORTED
    paired = (PAIRED_METRIC, PAIRED_METRIC, PAIRED_HIT)
    docno_field = "beir_id"

    def __init__(
        self,
        beir_dir: str | Path,
        methods: Sequence[str] = ("bm25",),
        versions: Sequence[str] = ("raw",),
        split: str = "test",
        *,
        depth: int = DEPTH,
        settings: TextSettings | None = None,
        index_settings: IndexSettings | None = None,
        title_in_text: bool = False,
        ignore_identical_ids: bool = True,
        bootstrap: int = S.DEFAULT_RESAMPLES,
        seed: int = S.DEFAULT_SEED,
    ) -> None:
        if depth < 10:
            raise ValueError(f"depth must be at least 10 (nDCG@10, MRR@10), got {depth}")
        for v in versions:
            check_text_version(v)
        method_names = list(dict.fromkeys(parse_method(m).name for m in methods))
        if not method_names:
            raise ValueError("no methods given")
        self.runs = [(v, m) for v in dict.fromkeys(versions) for m in method_names]
        self.beir_dir, self.split, self.depth = Path(beir_dir), split, depth
        self.settings = settings or BEIR_SETTINGS
        self.index_settings = index_settings or IndexSettings()
        self.title_in_text, self.ignore_identical_ids = title_in_text, ignore_identical_ids
        self.bootstrap, self.seed = bootstrap, seed
        self.to_beir: dict[str, str] = {}

    @property
    def k(self) -> int:
        return self.depth + 1 if self.ignore_identical_ids else self.depth

    def prepare(self, store: Path, progress: Progress | None) -> Prepared:
        # queries and judgements first: a bad split fails before the (long) ingest
        qrels = Qrels(read_qrels(self.beir_dir, self.split))
        with_rel = qrels.relevant_ids()
        queries = read_queries(self.beir_dir, set(with_rel))
        evaluated = [q for q in with_rel if q in queries]
        if not evaluated:
            raise ValueError(
                f"{self.beir_dir}: split {self.split!r} has no query with a relevant document and a text"
            )
        self.counts = {
            "in_qrels": len(qrels),
            "evaluated": len(evaluated),
            "skipped_no_relevant": len(qrels) - len(with_rel),
            "skipped_no_text": len(with_rel) - len(evaluated),
        }
        ing_cb = (lambda d, n, label: progress(f"ingest ({label})", d, n)) if progress else None
        t0 = time.perf_counter()
        self.ingest_report = ingest_beir(
            self.beir_dir, store, settings=self.settings, title_in_text=self.title_in_text, progress=ing_cb
        )
        ingest_s = time.perf_counter() - t0
        st = Store(store)
        try:
            self.to_beir = id_map(st)
        except BaseException:
            st.close()
            raise
        return Prepared(st, {q: queries[q] for q in evaluated}, qrels.only(evaluated), ingest_s)

    def hits(self, qid: str, ranking: Ranking) -> list[RunHit]:
        """BEIR ids, the query's own id dropped (``ignore_identical_ids``), the first
        ``depth`` in trec_eval's order (score descending, tied scores by docno descending)."""
        hits = []
        for h in ranking.hits:
            doc_id = h.page_id.split("#", 1)[0]
            bid = self.to_beir.get(doc_id, doc_id)
            if self.ignore_identical_ids and bid == qid:
                continue
            hits.append(RunHit(bid, h.score, h.page_id, h.chunk_id))
        return trec_eval_order(hits[: self.depth], encode=trec_id)

    def encode(self, docno: str) -> str:
        return trec_id(docno)

    def stats_fields(self, result: RunResult) -> dict[str, Any]:
        return {"n_queries": len(result.evaluated)}

    def question_row(
        self,
        base: dict[str, Any],
        hits: Sequence[RunHit],
        scores: Mapping[str, float] | None,
        first: int | None,
    ) -> dict[str, Any]:
        return {
            **base,
            **(scores or {}),
            "first_relevant_rank": first,
            "top_score": hits[0].score if hits else None,
            "top_page": hits[0].page if hits else None,
        }

    def metrics_header(self, result: RunResult) -> dict[str, Any]:
        return {
            "schema": 1,
            "benchmark": "beir",
            "dataset": dataset_name(self.beir_dir),
            "split": self.split,
            "depth": self.depth,
            "ignore_identical_ids": self.ignore_identical_ids,
            "queries": self.counts,
            "skipped_queries": self.counts["skipped_no_relevant"] + self.counts["skipped_no_text"],
        }

    def provenance(self, result: RunResult) -> Provenance:
        split, beir_dir = self.split, self.beir_dir
        return Provenance(
            text_settings=self.settings.as_dict(),
            index_settings=self.index_settings,
            inputs={p: beir_dir / p for p in ("corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv")},
            ingest={k: val for k, val in self.ingest_report.as_dict().items() if k != "warnings"},
            fields={
                "benchmark": "beir",
                "beir_dir": str(beir_dir),
                "split": split,
                "title_in_text": self.title_in_text,
                "ignore_identical_ids": self.ignore_identical_ids,
            },
        )

    def report(self, result: RunResult) -> None:
        from sourcepage.evaluation.report import write_beir_report

        write_beir_report(result, self.ingest_report.warnings)


def run_beir(
    beir_dir: str | Path,
    out: str | Path,
    methods: Sequence[str] = ("bm25",),
    versions: Sequence[str] = ("raw",),
    split: str = "test",
    store: str | Path | None = None,
    progress: Progress | None = None,
    *,
    depth: int = DEPTH,
    settings: TextSettings | None = None,
    index_settings: IndexSettings | None = None,
    title_in_text: bool = False,
    ignore_identical_ids: bool = True,
    bootstrap: int = S.DEFAULT_RESAMPLES,
    seed: int = S.DEFAULT_SEED,
) -> dict[str, Any]:
    """Evaluate ``methods`` × ``versions`` on the ``split`` of a BEIR folder; write the
    outputs (module docstring) into ``out`` and return metrics.json's data.

    ``store`` defaults to ``out/store``; it is ingested (incrementally) first.
    ``progress(label, done, total)`` reports ingest and ranking.
    """
    bench = BeirBenchmark(
        beir_dir,
        methods,
        versions,
        split,
        depth=depth,
        settings=settings,
        index_settings=index_settings,
        title_in_text=title_in_text,
        ignore_identical_ids=ignore_identical_ids,
        bootstrap=bootstrap,
        seed=seed,
    )
    return run_benchmark(bench, out, store, progress).metrics
