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
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.corpus.beir import (
    BEIR_SETTINGS,
    dataset_name,
    id_map,
    ingest_beir,
    read_qrels,
    read_queries,
    trec_id,
)
from sourcepage.corpus.manifest import sha256_file
from sourcepage.evaluation import metrics as M
from sourcepage.evaluation import stats as S
from sourcepage.evaluation.experiment import package_versions
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.settings import IndexSettings
from sourcepage.store.db import Store
from sourcepage.store.files import atomic_open, write_json, write_jsonl, write_text
from sourcepage.text.versions import TextSettings
from sourcepage.vocabulary import PAGE_METRICS, TEXT_VERSIONS

__all__ = ["BEIR_METRICS", "DEPTH", "PAGE_METRICS", "beir_scores", "metrics_from_ranked", "run_beir"]

DEPTH = 100
#: BEIR's headline measures, as pytrec_eval computes them
BEIR_METRICS: tuple[str, ...] = ("ndcg_cut_10", "mrr@10", "recall@100")
#: metric compared pairwise (Wilcoxon, bootstrap ΔnDCG) and the hit used for McNemar
PAIRED_METRIC, PAIRED_HIT = "ndcg_cut_10", "hit@10"
Progress = Callable[[str, int, int], None]


def beir_scores(ranked: Sequence[str], judged: Mapping[str, int], depth: int = DEPTH) -> dict[str, float]:
    """Every reported metric of one query. ``ranked``: BEIR ids in trec_eval order;
    ``judged``: the query's qrels (BEIR id → score; score >= 1 is relevant)."""
    out = {
        "ndcg_cut_10": M.score("ndcg_graded@10", ranked, judged, depth),
        "mrr@10": M.score("mrr@10", ranked, judged, depth),
        "recall@100": M.score("recall@100", ranked, judged, depth),
    }
    out.update({m: M.score(m, ranked, judged, depth) for m in PAGE_METRICS})
    return out


def _means(per_q: Mapping[str, Mapping[str, float]], names: Sequence[str]) -> dict[str, float]:
    return {m: round(float(np.mean([v[m] for v in per_q.values()])), 6) if per_q else math.nan for m in names}


def metrics_from_ranked(
    rows: Sequence[Mapping[str, Any]], qrels: Mapping[str, Mapping[str, int]], depth: int = DEPTH
) -> list[dict[str, Any]]:
    """The ``runs`` list of metrics.json (without latency) from ranked.jsonl rows and the
    split's qrels: means over the queries with a relevant document."""
    by_run: dict[tuple[str, str], dict[str, list[tuple[int, str]]]] = {}
    for r in rows:
        by_run.setdefault((r["text_version"], r["method"]), {}).setdefault(r["question_id"], []).append(
            (r["rank"], r["beir_id"])
        )
    evaluated = [q for q, j in qrels.items() if any(s >= 1 for s in j.values())]
    out = []
    for (version, method), runs in by_run.items():
        per_q = {q: beir_scores([b for _, b in sorted(runs.get(q, []))], qrels[q], depth) for q in evaluated}
        means = _means(per_q, (*BEIR_METRICS, *PAGE_METRICS))
        out.append({"text_version": version, "method": method, **means})
    return out


def _run_name(version: str, method: str) -> str:
    return f"{version}__{method.replace(':', '-').replace('+', '_')}"


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
    t_start = time.perf_counter()
    beir_dir, out = Path(beir_dir), Path(out)
    store = Path(store) if store else out / "store"
    if depth < 10:
        raise ValueError(f"depth must be at least 10 (nDCG@10, MRR@10), got {depth}")
    for v in versions:
        if v not in TEXT_VERSIONS:
            raise ValueError(f"unknown text version {v!r}; choose from {TEXT_VERSIONS}")
    method_names = list(dict.fromkeys(parse_method(m).name for m in methods))
    if not method_names:
        raise ValueError("no methods given")
    runs = [(v, m) for v in dict.fromkeys(versions) for m in method_names]
    settings = settings or BEIR_SETTINGS
    index_settings = index_settings or IndexSettings()

    # queries and judgements first: a bad split fails before the (long) ingest
    qrels = read_qrels(beir_dir, split)
    with_rel = [q for q, j in qrels.items() if any(s >= 1 for s in j.values())]
    queries = read_queries(beir_dir, set(with_rel))
    missing = [q for q in with_rel if q not in queries]
    evaluated = [q for q in with_rel if q in queries]
    if not evaluated:
        raise ValueError(f"{beir_dir}: split {split!r} has no query with a relevant document and a text")

    ing_cb = (lambda d, n, label: progress(f"ingest ({label})", d, n)) if progress else None
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    ing = ingest_beir(beir_dir, store, settings=settings, title_in_text=title_in_text, progress=ing_cb)
    timings["ingest_s"] = round(time.perf_counter() - t0, 3)

    st = Store(store)
    try:
        to_beir = id_map(st)
        ranked: dict[tuple[str, str], dict[str, list[tuple[str, float, str, str]]]] = {}
        latency: dict[tuple[str, str], list[float]] = {}
        for v in dict.fromkeys(versions):
            cb = (lambda m, d, n, v=v: progress(f"embedding {v} {m}", d, n)) if progress else None
            s = Searcher(st, v, index_settings, progress=cb)
            for m in method_names:
                t0 = time.perf_counter()
                s.rank(queries[evaluated[0]], m, k=1)  # builds or loads the indexes; not timed below
                timings[f"index_{v}_{m}_s"] = round(time.perf_counter() - t0, 3)
                lat = latency.setdefault((v, m), [])
                per_run = ranked.setdefault((v, m), {})
                k = depth + 1 if ignore_identical_ids else depth
                for i, qid in enumerate(evaluated, 1):
                    t0 = time.perf_counter()
                    ranking = s.rank(queries[qid], m, k=k)
                    lat.append((time.perf_counter() - t0) * 1000)
                    hits = []
                    for h in ranking.hits:
                        doc_id = h.page_id.split("#", 1)[0]
                        bid = to_beir.get(doc_id, doc_id)
                        if ignore_identical_ids and bid == qid:
                            continue
                        hits.append((bid, h.score, h.page_id, h.chunk_id))
                    hits = hits[:depth]
                    # trec_eval's order: score descending, tied scores by docno descending
                    hits.sort(key=lambda t: trec_id(t[0]), reverse=True)
                    hits.sort(key=lambda t: -t[1])
                    per_run[qid] = hits
                    if progress:
                        progress(f"rank {v} {m}", i, len(evaluated))
    finally:
        st.close()

    # ------------------------------------------------------------------ metrics
    names = (*BEIR_METRICS, *PAGE_METRICS)
    per_q: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    run_rows = []
    for v, m in runs:
        table = {q: beir_scores([h[0] for h in ranked[(v, m)][q]], qrels[q], depth) for q in evaluated}
        per_q[(v, m)] = table
        ms = np.array(latency[(v, m)])
        run_rows.append(
            {
                "text_version": v,
                "method": m,
                **_means(table, names),
                "query_ms": {
                    "mean": round(float(ms.mean()), 3),
                    "p50": round(float(np.median(ms)), 3),
                    "p95": round(float(np.percentile(ms, 95)), 3),
                    "max": round(float(ms.max()), 3),
                },
            }
        )
    counts = {
        "in_qrels": len(qrels),
        "evaluated": len(evaluated),
        "skipped_no_relevant": len(qrels) - len(with_rel),
        "skipped_no_text": len(missing),
    }
    metrics: dict[str, Any] = {
        "schema": 1,
        "benchmark": "beir",
        "dataset": dataset_name(beir_dir),
        "split": split,
        "depth": depth,
        "ignore_identical_ids": ignore_identical_ids,
        "queries": counts,
        "skipped_queries": counts["skipped_no_relevant"] + counts["skipped_no_text"],
        "runs": run_rows,
    }
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "metrics.json", metrics)

    # ------------------------------------------------------------------ ranked, per question, TREC
    with atomic_open(out / "ranked.jsonl") as f:
        for v, m in runs:
            for q in evaluated:
                judged = qrels[q]
                for rank, (bid, score, page, chunk) in enumerate(ranked[(v, m)][q], 1):
                    row = {
                        "question_id": q,
                        "text_version": v,
                        "method": m,
                        "rank": rank,
                        "page": page,
                        "score": score,
                        "chunk_id": chunk,
                        "grade": judged.get(bid, 0),
                        "beir_id": bid,
                    }
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
    pq_rows = []
    for v, m in runs:
        for q in evaluated:
            hits = ranked[(v, m)][q]
            ids = [h[0] for h in hits]
            pq_rows.append(
                {
                    "question_id": q,
                    "text_version": v,
                    "method": m,
                    **per_q[(v, m)][q],
                    "first_relevant_rank": M.first_relevant_rank(ids, qrels[q], depth),
                    "top_score": hits[0][1] if hits else None,
                    "top_page": hits[0][2] if hits else None,
                }
            )
    write_jsonl(out / "per_question.jsonl", pq_rows)
    trec = out / "trec"
    lines = [
        f"{trec_id(q)} 0 {trec_id(d)} {s}\n" for q in sorted(evaluated) for d, s in sorted(qrels[q].items())
    ]
    write_text(trec / "qrels.txt", "".join(lines))
    for v, m in runs:
        name = _run_name(v, m)
        with atomic_open(trec / f"{name}.run") as f:
            for q in evaluated:
                for rank, (bid, score, _, _) in enumerate(ranked[(v, m)][q], 1):
                    f.write(f"{trec_id(q)} Q0 {trec_id(bid)} {rank} {float(score)!r} {name}\n")

    # ------------------------------------------------------------------ statistics
    t0 = time.perf_counter()
    stats = _statistics(per_q, runs, evaluated, names, bootstrap, seed)
    timings["statistics_s"] = round(time.perf_counter() - t0, 3)
    write_json(out / "stats.json", stats)
    timings["total_s"] = round(time.perf_counter() - t_start, 3)
    run_info = {
        "schema": 1,
        "benchmark": "beir",
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "beir_dir": str(beir_dir),
        "split": split,
        "depth": depth,
        "runs": runs,
        "text_settings": settings.as_dict(),
        "title_in_text": title_in_text,
        "ignore_identical_ids": ignore_identical_ids,
        "index_settings": {
            b.name: index_settings.for_method(b) for _, m in runs for b in parse_method(m).bases()
        },
        "bootstrap_resamples": bootstrap,
        "seed": seed,
        "store": str(store),
        "ingest": {k: val for k, val in ing.as_dict().items() if k != "warnings"},
        "packages": package_versions(),
        "inputs": {
            p: {"path": str(beir_dir / p), "sha256": sha256_file(beir_dir / p)}
            for p in ("corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv")
        },
        "timings": timings,
    }
    _report(out, metrics, stats, run_info, ing.warnings)
    run_info["outputs"] = {
        p.name: sha256_file(p) for p in sorted(out.iterdir()) if p.is_file() and p.name != "run.json"
    }
    write_json(out / "run.json", run_info)
    return metrics


def _statistics(
    per_q: Mapping[tuple[str, str], Mapping[str, Mapping[str, float]]],
    runs: Sequence[tuple[str, str]],
    evaluated: Sequence[str],
    names: Sequence[str],
    bootstrap: int,
    seed: int,
) -> dict[str, Any]:
    def col(v: str, m: str, metric: str) -> list[float]:
        return [per_q[(v, m)][q][metric] for q in evaluated]

    ci = {
        f"{v} {m}": {name: list(S.bootstrap_ci(col(v, m, name), bootstrap, seed)) for name in names}
        for v, m in runs
    }
    versions = list(dict.fromkeys(v for v, _ in runs))
    methods = list(dict.fromkeys(m for _, m in runs))
    groups = [(f"methods within {v}", [(m, (v, m)) for m in methods]) for v in versions]
    groups += [(f"text versions within {m}", [(v, (v, m)) for v in versions]) for m in methods]
    pairwise, friedman = [], []
    for family, members in groups:
        if len(members) < 2:
            continue
        scores = {label: col(*vm, PAIRED_METRIC) for label, vm in members}
        hits = {label: [x >= 1 for x in col(*vm, PAIRED_HIT)] for label, vm in members}
        pairs = [(a, b) for i, (a, _) in enumerate(members) for b, _ in members[i + 1 :]]
        comps = S.compare_family(scores, hits, pairs=pairs, n_resamples=bootstrap, seed=seed)
        pairwise.append(
            {"family": family, "metric": PAIRED_METRIC, "mcnemar_on": PAIRED_HIT, "comparisons": comps}
        )
        if len(members) >= 3:
            friedman.append({"family": family, "metric": PAIRED_METRIC, **S.friedman(scores)})
    return {
        "schema": 1,
        "bootstrap_resamples": bootstrap,
        "seed": seed,
        "n_queries": len(evaluated),
        "confidence": 0.95,
        "ci": ci,
        "friedman": friedman,
        "pairwise": pairwise,
    }


def _f(x: Any) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _report(
    out: Path,
    metrics: Mapping[str, Any],
    stats: Mapping[str, Any],
    run_info: Mapping[str, Any],
    warnings: Sequence[str],
) -> None:
    q = metrics["queries"]
    parts = [
        f"# BEIR evaluation — {metrics['dataset']} ({metrics['split']})\n",
        f"{q['evaluated']} queries evaluated; {metrics['skipped_queries']} of the {q['in_qrels']} "
        f"queries in the qrels skipped ({q['skipped_no_relevant']} without a relevant document, "
        f"{q['skipped_no_text']} without a text in queries.jsonl). Each BEIR document is one page. "
        f"Metrics over the first {metrics['depth']} ranks in trec_eval order; nDCG@10 is graded "
        "(linear gains, trec_eval `ndcg_cut.10` = BEIR NDCG@10). 95% bootstrap CIs "
        f"({stats['bootstrap_resamples']} query resamples, seed {stats['seed']}).\n",
        "| version | method | nDCG@10 | 95% CI | MRR@10 | R@100 | Hit@10 | ms p50 |",
        "|---|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in metrics["runs"]:
        lo, hi = stats["ci"][f"{r['text_version']} {r['method']}"]["ndcg_cut_10"][1:]
        parts.append(
            f"| {r['text_version']} | {r['method']} | {_f(r['ndcg_cut_10'])} | [{_f(lo)}, {_f(hi)}] | "
            f"{_f(r['mrr@10'])} | {_f(r['recall@100'])} | {_f(r['hit@10'])} | {r['query_ms']['p50']:.2f} |"
        )
    parts.append("")
    for fam in stats["pairwise"]:
        parts += [
            f"## Paired comparison: {fam['family']} (ΔnDCG@10; McNemar on Hit@10)\n",
            "| a | b | Δ | 95% CI | Wilcoxon p (Holm) | rank-biserial | McNemar p (Holm) |",
            "|---|---|---:|---|---:|---:|---:|",
        ]
        for c in fam["comparisons"]:
            parts.append(
                f"| {c['a']} | {c['b']} | {_f(c['mean_diff'])} | [{_f(c['ci_low'])}, {_f(c['ci_high'])}] | "
                f"{_f(c['p_holm'])} | {_f(c['rank_biserial'])} | {_f(c.get('mcnemar_p_holm'))} |"
            )
        parts.append("")
    ing = run_info["ingest"]
    parts.append(
        f"Store `{run_info['store']}`: {ing['documents']} documents ({ing['written']} written, "
        f"{ing['unchanged']} unchanged, {ing['duplicates']} duplicate ids, {ing['empty']} empty). "
        "TREC files in `trec/` use the original BEIR ids (whitespace percent-encoded)."
    )
    if warnings:
        parts += ["", "Ingest warnings:", *(f"- {w}" for w in warnings)]
    write_text(out / "report.md", "\n".join(parts) + "\n")
