"""Run a whole experiment design on a question set in one call: ingest (cached), index,
rank every question with every (text version, method), score, test, and write the
outputs of benchmark-format.md §4 (metrics.json, ranked.jsonl, report.md) plus
stats.json, run.json, per-question tables, TREC run/qrels files, the held-out
answerability evaluation and figures.

:class:`QuestionsBenchmark` is the runner's adapter for a questions.jsonl and a PDF or
plain-text corpus (evaluation.runner does the ranking, timing, scoring and writing); its
steps after the runner take the runner's result: the answerability study
(answerability.json), the figures, then report.md (evaluation.report) and run.json
(evaluation.provenance). :func:`run_experiment` runs it.

Every number in metrics.json is recomputed by ``metrics_from_ranked`` from the rows
of ranked.jsonl and the question set; a test checks that this is so.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sourcepage.corpus.fields import split_values
from sourcepage.corpus.manifest import sha256_file
from sourcepage.evaluation import metrics as M
from sourcepage.evaluation import stats as S
from sourcepage.evaluation.answerability import evaluate_support
from sourcepage.evaluation.answerability import figure as support_figure
from sourcepage.evaluation.by_field import question_fields
from sourcepage.evaluation.provenance import Provenance
from sourcepage.evaluation.questions import read_questions, require_answerable
from sourcepage.evaluation.relevance import Qrels, Run, RunHit
from sourcepage.evaluation.runner import (
    Benchmark,
    Prepared,
    Progress,
    RunResult,
    Step,
    run_benchmark,
    run_means,
)
from sourcepage.ingest import ingest
from sourcepage.records import Question, check_text_version
from sourcepage.retrieval.methods import kinds, parse_method
from sourcepage.retrieval.settings import IndexSettings, section_dict, section_settings
from sourcepage.retrieval.tokenize import TokenizerConfig
from sourcepage.store.db import Store
from sourcepage.store.files import write_json, write_jsonl
from sourcepage.text.chunk import ChunkConfig
from sourcepage.text.clean import CleanConfig
from sourcepage.text.versions import DEFAULT_ENRICH_FIELDS, TextSettings
from sourcepage.vocabulary import ANSWERABILITIES, HEADLINE_METRICS, NEGATIVE_CLASSES, TEXT_VERSIONS

__all__ = [
    "DEPTH",
    "Design",
    "QuestionsBenchmark",
    "answer_scores",
    "metrics_from_ranked",
    "run_experiment",
]

#: ranks kept per question and looked at by every metric (the metrics' default depth)
DEPTH = M.DEFAULT_DEPTH
#: the warm-up query that builds or loads a run's indexes (not timed)
WARMUP = "warm-up query: lockout"


@dataclass
class Design:
    """What to run: blocks of versions × methods, and the settings that shape them: the
    text's, and in ``index`` the tokenizer, the seed and {method kind: its settings}."""

    blocks: list[tuple[list[str], list[str]]] = field(
        default_factory=lambda: [(list(TEXT_VERSIONS), ["bm25", "lsa", "rrf:bm25+lsa"])]
    )
    text: TextSettings = field(default_factory=TextSettings)
    index: IndexSettings = field(default_factory=IndexSettings)
    engine: str = "pypdfium2"
    seed: int = S.DEFAULT_SEED
    bootstrap: int = S.DEFAULT_RESAMPLES

    def runs(self) -> list[tuple[str, str]]:
        """Unique (version, canonical method) pairs in design order."""
        out: list[tuple[str, str]] = []
        for versions, methods in self.blocks:
            for v in versions:
                check_text_version(v)
                for m in methods:
                    pair = (v, parse_method(m).name)
                    if pair not in out:
                        out.append(pair)
        return out

    def override(
        self,
        versions: list[str] | None = None,
        methods: list[str] | None = None,
        bootstrap: int | None = None,
    ) -> Design:
        """Apply command-line options: ``versions`` / ``methods`` replace those of the
        first block (and drop the other blocks), ``bootstrap`` the resample count; then
        validate the runs (ValueError). Returns the design itself."""
        if versions or methods:
            v0, m0 = self.blocks[0]
            self.blocks = [(versions or v0, methods or m0)]
        if bootstrap is not None:
            self.bootstrap = bootstrap
        self.runs()
        return self

    def as_dict(self) -> dict[str, Any]:
        """The design as experiment.yaml keys (``from_dict`` reads it back)."""
        return {
            "design": [{"versions": list(v), "methods": list(m)} for v, m in self.blocks],
            "chunk": self.text.chunk.as_dict(),
            "clean": self.text.clean.as_dict(),
            "enrich_fields": list(self.text.enrich_fields),
            **{kind: section_dict(self.index.of(kind)) for kind in kinds()},
            "tokenizer": self.index.tokenizer.as_dict(),
            "engine": self.engine,
            "seed": self.seed,
            "bootstrap": self.bootstrap,
        }

    @classmethod
    def from_yaml(cls, path: str | Path) -> Design:
        """Read an experiment.yaml (keys: design, chunk, clean, enrich_fields, tokenizer,
        engine, seed, bootstrap, and one section per method kind: bm25, lsa, dense, rrf, …);
        an unknown key is an error naming the file and the key."""
        import yaml

        return cls.from_dict(yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}, str(path))

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], where: str = "experiment") -> Design:
        """A design from experiment.yaml keys (missing keys keep their defaults); ValueError
        names ``where`` and the unknown or bad key."""
        known = {*_SECTIONS, *kinds()}
        bad = sorted(set(raw) - known)
        if bad:
            raise ValueError(f"{where}: unknown keys {bad}; known: {sorted(known)}")
        for key, allowed in _SECTIONS.items():
            if allowed and key in raw:
                if not isinstance(raw[key], Mapping):
                    raise ValueError(f"{where}: {key} must be a mapping of {sorted(allowed)}")
                extra = sorted(set(raw[key]) - allowed)
                if extra:
                    raise ValueError(f"{where}: unknown keys {extra} in {key}; known: {sorted(allowed)}")
        d = cls()
        try:
            if "design" in raw:
                d.blocks = [(_list(b["versions"]), _list(b["methods"])) for b in raw["design"]]
            d.text = TextSettings(
                CleanConfig(**raw.get("clean", {})),
                ChunkConfig(**raw.get("chunk", {})),
                tuple(raw.get("enrich_fields", DEFAULT_ENRICH_FIELDS)),
            )
            d.seed = int(raw.get("seed", d.seed))
            methods = {kind: section_settings(kind, raw[kind], where) for kind in kinds() if kind in raw}
            d.index = IndexSettings(TokenizerConfig(**raw.get("tokenizer", {})), d.seed, methods)
            d.engine = raw.get("engine", d.engine)
            d.bootstrap = int(raw.get("bootstrap", d.bootstrap))
        except (KeyError, TypeError) as e:
            raise ValueError(f"{where}: {type(e).__name__}: {e}") from None
        return d


#: experiment.yaml keys besides the methods' sections → the keys allowed inside them (empty:
#: not a mapping); a method's section allows its settings dataclass's fields
_SECTIONS: dict[str, set[str]] = {
    "design": set(),
    "chunk": {"size", "overlap", "mode", "scope"},
    "clean": {"headers_footers", "dehyphenate", "whitespace", "glyphs", "page_numbers"},
    "enrich_fields": set(),
    "tokenizer": {"stopwords", "stem"},
    "engine": set(),
    "seed": set(),
    "bootstrap": set(),
}


def _list(v: str | Sequence[str]) -> list[str]:
    return [s.strip() for s in v.split(",")] if isinstance(v, str) else list(v)


# --------------------------------------------------------------------------- scoring


def answer_scores(hits: Sequence[RunHit] | Sequence[Mapping[str, Any]]) -> tuple[float, float]:
    """(top page score, top-1 minus top-2 margin); an empty ranking scores −inf / 0.
    ``hits``: a ranking's RunHits or its ranked.jsonl rows, best first."""
    if not hits:
        return -math.inf, 0.0
    scores = [float(h.score if isinstance(h, RunHit) else h["score"]) for h in hits[:2]]
    s1 = scores[0]
    s2 = scores[1] if len(scores) > 1 else s1
    return s1, s1 - s2


def _classes(values: Mapping[str, float], qs: Sequence[Question]) -> dict[str, tuple[list, list]]:
    """negative class → (answerable values, that class's values), in question order."""
    pos = [values[q.id] for q in qs if q.answerability == "answerable"]
    return {
        name: (pos, [values[q.id] for q in qs if q.answerability in neg])
        for name, neg in NEGATIVE_CLASSES.items()
    }


def _auroc_fields(run: Run, qs: Sequence[Question]) -> dict[str, Any]:
    """metrics.json's ``auroc`` / ``auroc_margin``: how well the top page score (or the
    top-1 − top-2 margin) separates answerable questions from each negative class."""
    tops = {q.id: answer_scores(run.get(q.id, [])) for q in qs}
    out: dict[str, Any] = {}
    for key, idx in (("auroc", 0), ("auroc_margin", 1)):
        out[key] = {}
        for name, (pos, neg) in _classes({q: t[idx] for q, t in tops.items()}, qs).items():
            v = M.auroc(pos, neg)
            out[key][name] = None if math.isnan(v) else round(v, 6)
    return out


def metrics_from_ranked(
    rows: Sequence[Mapping[str, Any]], questions: Sequence[Question]
) -> list[dict[str, Any]]:
    """The ``runs`` list of metrics.json (without latency), from ranked.jsonl rows only."""
    qrels = Qrels.from_questions(questions)
    qids = qrels.relevant_ids()
    return [
        {**run_means(run, qrels, qids, QuestionsBenchmark.metrics, DEPTH), **_auroc_fields(run, questions)}
        for run in Run.from_rows(rows).values()
    ]


# --------------------------------------------------------------------------- the adapter


class QuestionsBenchmark(Benchmark):
    """questions.jsonl + a corpus folder (manifest.csv and pdf/ or text files): every
    question is ranked; the answerable ones are scored; unsupported and out-of-domain
    questions are the negatives of the answerability AUROCs and the held-out
    support evaluation (answerability.json)."""

    depth = DEPTH
    metrics: Mapping[str, str] = {m: m for m in HEADLINE_METRICS}
    paired = ("mrr", "reciprocal rank", "hit@3")
    warmup = WARMUP
    progress_label = "run {n}/{total} {version} {method}"
    keep_searchers = True

    def __init__(self, corpus: str | Path, questions: str | Path, design: Design | None = None) -> None:
        self.design = design or Design()
        self.corpus, self.questions_path = Path(corpus), Path(questions)
        self.runs = self.design.runs()
        self.index_settings = self.design.index
        self.bootstrap, self.seed = self.design.bootstrap, self.design.seed
        self.questions: list[Question] = []
        self.by_id: dict[str, Question] = {}

    def prepare(self, store: Path, progress: Progress | None) -> Prepared:
        require_answerable(read_questions(self.questions_path), self.questions_path)  # before any write
        new = [p for p in (store.parent, store) if not p.exists()]
        tick = (lambda done, total, _doc: progress("extract the PDFs", done, total)) if progress else None
        self.ingest_report = ingest(
            self.corpus, store, engine=self.design.engine, settings=self.design.text, progress=tick
        )
        st = Store(store)
        try:
            self.questions = read_questions(self.questions_path, known_pages=st.page_ids())
        except BaseException:
            st.close()
            for p in reversed(new):  # an evidence page the corpus lacks: leave nothing behind
                shutil.rmtree(p, ignore_errors=True)
            raise
        self.by_id = {q.id: q for q in self.questions}
        queries = {q.id: q.question for q in self.questions}
        return Prepared(st, queries, Qrels.from_questions(self.questions), self.ingest_report.wall_seconds)

    def run_fields(self, result: RunResult, run: Run) -> dict[str, Any]:
        return _auroc_fields(run, self.questions)

    def ci_fields(self, result: RunResult, run: Run) -> dict[str, Any]:
        tops = {q.id: answer_scores(run.get(q.id, []))[0] for q in self.questions}
        tops = {q: -math.inf if math.isinf(t) else t for q, t in tops.items()}  # as per_question.jsonl
        return {
            "auroc": {
                name: list(S.auroc_bootstrap_ci(pos, neg, self.bootstrap, self.seed))
                for name, (pos, neg) in _classes(tops, self.questions).items()
            }
        }

    def stats_fields(self, result: RunResult) -> dict[str, Any]:
        return {
            "n_answerable": len(result.evaluated),
            "note": "Exploratory: a silver-standard benchmark; read CIs and effect sizes first.",
        }

    def question_row(
        self,
        base: dict[str, Any],
        hits: Sequence[RunHit],
        scores: Mapping[str, float] | None,
        first: int | None,
    ) -> dict[str, Any]:
        q = self.by_id[base["question_id"]]
        top, margin = answer_scores(hits)
        row = {
            **base,
            "topic": q.topic,
            "type": q.type,
            "answerability": q.answerability,
            # the jurisdictions the question names (intl20's names_jurisdiction), for the
            # per-jurisdiction tables; "none named" otherwise
            "named_jurisdiction": "+".join(_listed(q.extra.get("names_jurisdiction"))) or "none named",
            **question_fields(q),  # phase, work_package, project_type (construction sets), as lists
            "top_score": None if math.isinf(top) else top,
            "margin": margin,
            "top_page": hits[0].page if hits else None,
        }
        if scores is not None:
            row.update(scores)
            row["first_relevant_rank"] = first
            row["miss_kind"] = M.miss_kind([h.page for h in hits], q.evidence)
        return row

    def metrics_header(self, result: RunResult) -> dict[str, Any]:
        counts = {a: sum(q.answerability == a for q in self.questions) for a in ANSWERABILITIES}
        return {"schema": 1, "questions": counts}

    def steps(self) -> Sequence[Step]:
        return (self.answerability, self.figures)

    def answerability(self, result: RunResult, progress: Progress | None) -> None:
        """What the search decides for every question of every run (``evaluation.decisions``:
        the one pipeline, from the run's own ranking; per_question.jsonl gains its outline)
        and answerability.json: the held-out support study beside those decisions
        (searchers reopened on the store: the runs' indexes load; the answer policy's are
        built on first use where the design did not run them, as a search builds them)."""
        from sourcepage.evaluation.decisions import annotate, search_runs, summarise
        from sourcepage.retrieval.search import Searcher

        t0 = time.perf_counter()
        searchers = {
            v: Searcher(result.store, v, self.index_settings)
            for v in dict.fromkeys(v for v, _ in result.runs)
        }
        try:
            searched = search_runs(result.store, result.results, self.questions, searchers, progress)
            result.timings["decisions_s"] = round(time.perf_counter() - t0, 3)
            result.support = evaluate_support(
                result.results,
                self.questions,
                result.runs,
                searchers,
                seed=self.seed,
                n_boot=self.bootstrap,
                progress=progress,
            )
        finally:
            for s in searchers.values():
                s.store.close()
        annotate(result.per_question, searched)
        write_jsonl(result.out / "per_question.jsonl", result.per_question)
        runs = {f"{v} {m}": summarise(rows, self.questions) for (v, m), rows in searched.items()}
        result.support["search"] = runs
        result.support["answer_points"] = {run: s["answer_points"] for run, s in runs.items()}
        result.timings["answerability_s"] = round(time.perf_counter() - t0, 3)
        write_json(result.out / "answerability.json", result.support)

    def figures(self, result: RunResult, progress: Progress | None) -> None:
        """The figures of the report (matplotlib), the risk–coverage one last."""
        from sourcepage.evaluation.figures import figures

        result.figures = figures(result.out, result.per_question, result.rows, self.questions, result.runs)
        rc = support_figure(result.out, result.support) if result.support is not None else None
        if rc:
            result.figures.append(rc)

    def provenance(self, result: RunResult) -> Provenance:
        d, corpus, rep = self.design, self.corpus, self.ingest_report
        return Provenance(
            text_settings=d.text.as_dict(),
            index_settings=d.index,
            inputs={
                "questions": self.questions_path,
                "manifest": corpus / "manifest.csv",
                "corpus_files": {
                    p.name: sha256_file(p) for p in sorted((corpus / "pdf").glob("*")) if p.is_file()
                },
            },
            ingest={
                "extracted": rep.extracted,
                "unchanged": rep.unchanged,
                "failed": rep.failed,
                "chunks": rep.chunks,
            },
            fields={
                "design": [{"versions": v, "methods": m} for v, m in d.blocks],
                "experiment": d.as_dict(),
                "chunk_fingerprints": _fingerprints(result),
                "engine": d.engine,
            },
        )

    def report(self, result: RunResult) -> None:
        from sourcepage.evaluation.report import write_report

        write_report(result, self.questions)


def _listed(value: Any) -> list[str]:
    """A question's list field: a JSON list (intl20) or a ``;``-list string (construction)."""
    return split_values(value) if isinstance(value, str) else [str(v) for v in value or []]


def _fingerprints(result: RunResult) -> dict[str, str]:
    """text version → the fingerprint of the chunks the run ranked (export checks the store
    still holds them)."""
    st = Store(result.store)
    try:
        return {v: st.chunk_fingerprint(v) for v in dict.fromkeys(v for v, _ in result.runs)}
    finally:
        st.close()


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
    return run_benchmark(QuestionsBenchmark(corpus, questions, design), out, store, progress).metrics
