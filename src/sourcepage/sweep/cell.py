"""One sweep cell, and the jobs a sweep hands its executor (module level, so a process
pool or Ray can pickle them): a text store from a copy of the extracted one, an index
build, a cell run. The cell is one call of the experiment runner with
:class:`CellBenchmark`, the adapter for a prepared store view (sweep.sweep).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sourcepage.evaluation.experiment import Design, QuestionsBenchmark
from sourcepage.evaluation.provenance import Provenance
from sourcepage.evaluation.questions import read_questions
from sourcepage.evaluation.relevance import Qrels
from sourcepage.evaluation.runner import Prepared, Progress, RunResult, Step, run_benchmark
from sourcepage.ingest import IngestReport, ingest
from sourcepage.retrieval.index import build_index, load_index
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.settings import IndexSettings
from sourcepage.store.db import DB_NAME, Store
from sourcepage.store.files import write_json, write_text

__all__ = ["CellBenchmark", "cell_job", "index_job", "text_job"]

Key = tuple[str, str]


# --------------------------------------------------------------------------- the cell adapter


class CellBenchmark(QuestionsBenchmark):
    """The runner's adapter for one sweep cell: the questions on a prepared store view
    (no ingest), the cell's runs only, no answerability study and no figures."""

    keep_searchers = False

    def __init__(self, corpus: Path, questions: Path, cell: dict[str, Any], runs: Sequence[Key]) -> None:
        design = Design.from_dict(cell["settings"], f"cell {cell['id']}")
        design.blocks = [([v], [m]) for v, m in runs]
        super().__init__(corpus, questions, design)
        self.cell = cell

    def prepare(self, store: Path, progress: Progress | None) -> Prepared:
        t0 = time.perf_counter()
        st = Store(store)
        try:
            self.questions = read_questions(self.questions_path, known_pages=st.page_ids())
            self.ingest_report = IngestReport(store=str(store), engine=self.design.engine)
            self.ingest_report.chunks = st.chunk_counts()
        except BaseException:
            st.close()
            raise
        self.by_id = {q.id: q for q in self.questions}
        queries = {q.id: q.question for q in self.questions}
        return Prepared(st, queries, Qrels.from_questions(self.questions), time.perf_counter() - t0)

    def steps(self) -> Sequence[Step]:
        return ()

    def provenance(self, result: RunResult) -> Provenance:
        prov = super().provenance(result)
        cell = {k: self.cell[k] for k in ("id", "factor", "label", "overrides", "key")}
        prov.fields = {**prov.fields, "sweep_cell": cell}
        return prov

    def report(self, result: RunResult) -> None:
        c = self.cell
        names = list(self.metrics)
        lines = [
            f"# Sweep cell `{c['id']}`",
            "",
            f"Factor **{c['factor']}**, level **{c['label']}**; overrides `{json.dumps(c['overrides'])}`.",
            f"{len(result.evaluated)} answerable questions of `{self.questions_path.name}`; "
            "runs this cell does not change are the default cell's.",
            "",
            "| version | method | " + " | ".join(names) + " |",
            "|---|---|" + "---|" * len(names),
        ]
        for r in result.metrics["runs"]:
            lines.append(
                f"| {r['text_version']} | {r['method']} | " + " | ".join(f"{r[n]:.3f}" for n in names) + " |"
            )
        write_text(result.out / "report.md", "\n".join(lines) + "\n")


# --------------------------------------------------------------------------- jobs (module level: picklable)


def text_job(job: tuple[str, str, str, str, dict[str, Any]]) -> dict[str, Any]:
    """Make the store of one text setting from the base store's copy; no extraction."""
    base, target, corpus, engine, settings = job
    from sourcepage.text.versions import TextSettings

    target_p = Path(target)
    if not (target_p / DB_NAME).exists():
        src = Store(base)
        try:
            src.copy_to(target_p)
        finally:
            src.close()
    rep = ingest(corpus, target_p, engine=engine, settings=TextSettings.from_dict(settings), workers=1)
    info = {"extracted": rep.extracted, "rebuilt": len(rep.rebuilt), "chunks": rep.chunks}
    write_json(target_p / "ready.json", {"text_settings": settings, "engine": engine, **info})
    return info


def index_job(job: tuple[str, str, str, IndexSettings]) -> float:
    """Build one index through a view unless a fresh one is there; returns seconds spent."""
    view, version, name, settings = job
    t0 = time.perf_counter()
    st = Store(view)
    try:
        method = parse_method(name)
        if load_index(st, version, method, settings) is None:
            build_index(st, version, method, settings)
    finally:
        st.close()
    return time.perf_counter() - t0


def cell_job(job: tuple[dict[str, Any], str, str, str, str, list[Key]]) -> dict[str, Any]:
    """Run one cell with the experiment runner; its folder is made afresh."""
    cell, corpus, questions, out, view, runs = job
    t0 = time.perf_counter()
    out_p = Path(out)
    if out_p.exists():
        shutil.rmtree(out_p)
    bench = CellBenchmark(Path(corpus), Path(questions), cell, [tuple(r) for r in runs])  # type: ignore[misc]
    result = run_benchmark(bench, out_p, store=view)
    return {"id": cell["id"], "seconds": time.perf_counter() - t0, "runs": result.metrics["runs"]}
