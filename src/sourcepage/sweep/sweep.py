"""``sourcepage sweep``: a grid of settings (sweep.grid) on one question set, resumable.

Every cell is one call of the experiment runner (evaluation.runner) with the
:class:`~sourcepage.sweep.cell.CellBenchmark` adapter, over the runs the cell
changes. Work is shared:

- **extraction once**: the first store (per extraction engine) is ingested from the
  corpus; every other text setting starts from a copy of its database and is re-chunked
  from the stored raw text (``ingest`` rebuilds, it does not extract);
- **chunks per text setting**: one store per (engine, cleaning, chunking, enrichment);
- **indexes per method**: one index per (text setting, version, base method, the settings
  that method reads), built once and shared by every cell that reads it. A cell sees its
  store and indexes through a *view*: a folder of symbolic links laid out as a store.

Text stores, index builds and cells each run through an executor (sourcepage.executor:
in process, a process pool, or any executor with ``map``), in rounds of ``workers``
jobs so progress can be reported between rounds.

Layout of ``out``::

    sweep.json        grid, cells and input checksums; a resumed sweep must match it
    timings.json      wall time of every session (phases, executor, cells run / reused)
    cache/text/<key>/ the stores; cache/indexes/<version>/<method>@<key>/ the indexes;
    cache/views/<cell key>/ the views
    cells/<cell>/     the runner's outputs; run.json is written last, so a cell with a
                      run.json for the same settings is done and is not run again
    test/<cell>/      the default and the chosen cell on the test questions, run once
    results.json, comparisons.csv, report.md, figures/   (sweep.report)

Killed at any point, the same command continues: a store copy is renamed into place
whole, ingest is transactional and incremental, an index is published atomically, and
a cell without run.json is run again from scratch.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sourcepage.corpus.manifest import sha256_file
from sourcepage.evaluation.experiment import Design
from sourcepage.evaluation.questions import read_questions
from sourcepage.executor import Executor, make_executor
from sourcepage.ingest import ingest
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.settings import IndexSettings
from sourcepage.store.db import DB_NAME
from sourcepage.store.files import write_json
from sourcepage.store.schema import now
from sourcepage.sweep.cell import cell_job, index_job, text_job
from sourcepage.sweep.grid import DEFAULT_ID, Cell, Grid, affected_runs, index_key, study_grid, text_key
from sourcepage.text.versions import TextSettings

__all__ = ["SweepError", "SweepProgress", "run_sweep"]

Key = tuple[str, str]


class SweepError(ValueError):
    """A sweep cannot start or continue (another sweep's folder, overlapping splits)."""


@dataclass
class SweepProgress:
    """One progress report: a phase's jobs done, its time left, the best cell so far."""

    phase: str  # "extract", "text", "indexes", "cells", "chosen and test"
    done: int
    total: int
    elapsed: float
    eta: float | None = None
    best: str | None = None
    reused: int = 0


ProgressFn = Callable[[SweepProgress], None]


@dataclass
class Job:
    """One cell on one question set, written into ``out``."""

    cell: Cell
    questions: Path
    out: Path
    runs: list[Key]


@dataclass
class Session:
    """What this invocation did, for timings.json."""

    executor: str
    workers: int
    started: float = field(default_factory=time.perf_counter)
    phases: dict[str, float] = field(default_factory=dict)
    cells_run: int = 0
    cells_reused: int = 0


# --------------------------------------------------------------------------- the sweep


def corpus_fingerprint(corpus: Path) -> dict[str, str]:
    """manifest.csv and every file under pdf/ → SHA-256."""
    out = {"manifest.csv": sha256_file(corpus / "manifest.csv")}
    for p in sorted((corpus / "pdf").glob("*")):
        if p.is_file():
            out[f"pdf/{p.name}"] = sha256_file(p)
    return out


def _check_splits(dev: Path, test: Path | None) -> None:
    """Both question files are valid (read before anything is written or ingested), and
    dev and test do not share a question (by id or by text)."""
    a = read_questions(dev)
    if test is None:
        return
    b = read_questions(test)
    ids = sorted({q.id for q in a} & {q.id for q in b})
    texts = sorted({q.question for q in a} & {q.question for q in b})
    if ids or texts:
        raise SweepError(
            f"{dev} and {test} share questions ({len(ids)} ids, {len(texts)} texts, e.g. "
            f"{(ids or texts)[0]!r}): settings chosen on dev would be tested on seen questions"
        )


def _begin(out: Path, grid: Grid, corpus: Path, questions: Path, test: Path | None) -> dict[str, Any]:
    """Write sweep.json, or check that the one there describes this sweep."""
    spec = {
        "schema": 1,
        "grid": grid.as_dict(),
        "cells": [
            c.as_dict() | {"runs": affected_runs(c.design, grid.default().design)} for c in grid.cells()
        ],
        "inputs": {
            "corpus": str(corpus),
            "corpus_files": corpus_fingerprint(corpus),
            "questions": {"path": str(questions), "sha256": sha256_file(questions)},
        },
    }
    spec["cells"][0]["runs"] = grid.default().design.runs()
    spec = json.loads(json.dumps(spec))  # tuples → lists, as read back
    path = out / "sweep.json"
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        if old.get("grid") != spec["grid"] or old.get("cells") != spec["cells"]:
            raise SweepError(f"{out} holds a sweep of another grid; choose a new --out or remove it")
        if old["inputs"]["corpus_files"] != spec["inputs"]["corpus_files"]:
            raise SweepError(f"{out}: the corpus changed since this sweep started; use a new --out")
        if old["inputs"]["questions"]["sha256"] != spec["inputs"]["questions"]["sha256"]:
            raise SweepError(f"{out}: the question set changed since this sweep started; use a new --out")
        spec["inputs"]["test"] = old["inputs"].get("test")
    if test is not None:
        t = {"path": str(test), "sha256": sha256_file(test)}
        if spec["inputs"].get("test") and spec["inputs"]["test"]["sha256"] != t["sha256"]:
            raise SweepError(f"{out} already reported another test set; the test split is reported once")
        spec["inputs"]["test"] = t
    spec["inputs"].setdefault("test", None)
    write_json(path, spec)
    return spec


def _link(link: Path, target: Path) -> None:
    """``link`` → ``target`` as a relative symbolic link (replaced if it points elsewhere)."""
    rel = os.path.relpath(target, link.parent)
    if link.is_symlink():
        if os.readlink(link) == rel:
            return
        link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(rel, link)


class Sweep:
    """One invocation of a sweep over ``out`` (see the module doc)."""

    def __init__(self, out: Path, corpus: Path, ex: Executor, progress: ProgressFn | None, session: Session):
        self.out, self.corpus, self.ex, self.progress, self.session = out, corpus, ex, progress, session
        self.cache = out / "cache"
        self.default_means: dict[Key, float] | None = None
        self.best: tuple[float, str] | None = None
        self.metric = "mrr"

    def _rounds(
        self,
        phase: str,
        fn: Callable[[Any], Any],
        jobs: list[Any],
        reused: int = 0,
        kind: Callable[[Any], str] = lambda job: "",
    ) -> list[Any]:
        """``fn`` over ``jobs`` in rounds of ``workers``, reporting progress after each. Time
        left: every remaining job at the mean round time of the jobs of its ``kind`` done so
        far (an LSA build is not a BM25 build), or of all jobs done, over the workers."""
        t0, results = time.perf_counter(), []
        size = max(1, self.ex.workers)
        total = len(jobs) + reused
        seen: dict[str, list[float]] = {}
        self._report(phase, reused, total, 0.0, None, reused)
        for i in range(0, len(jobs), size):
            t1 = time.perf_counter()
            part = self.ex.map(fn, jobs[i : i + size])
            for job in jobs[i : i + size]:
                seen.setdefault(kind(job), []).append(time.perf_counter() - t1)
            results.extend(part)
            if phase == "cells":
                for r in part:
                    self._note(r)
            done = i + len(part)
            every = [t for ts in seen.values() for t in ts]
            left = sum(sum(seen.get(kind(j), every)) / len(seen.get(kind(j), every)) for j in jobs[done:])
            elapsed = time.perf_counter() - t0
            self._report(phase, reused + done, total, elapsed, left / size, reused)
        self.session.phases[phase] = self.session.phases.get(phase, 0.0) + time.perf_counter() - t0
        return results

    def _report(
        self, phase: str, done: int, total: int, elapsed: float, eta: float | None, reused: int
    ) -> None:
        if self.progress:
            best = self.best[1] if self.best else None
            self.progress(SweepProgress(phase, done, total, elapsed, eta, best, reused))

    def _note(self, result: dict[str, Any]) -> None:
        """Track the best cell so far: highest mean metric over the default's runs, a
        cell's unchanged runs counted at the default's values."""
        means = {(r["text_version"], r["method"]): r[self.metric] for r in result["runs"]}
        if result["id"] == DEFAULT_ID:
            self.default_means = means
        if self.default_means is None:
            return
        filled = {**self.default_means, **{k: v for k, v in means.items() if k in self.default_means}}
        score = sum(filled.values()) / len(filled)
        base = sum(self.default_means.values()) / len(self.default_means)
        if self.best is None or score > self.best[0]:
            top = max(means, key=lambda k: means[k] - self.default_means.get(k, means[k]))
            gain = means[top] - self.default_means.get(top, means[top])
            self.best = (
                score,
                f"{result['id']} (mean {self.metric} {score:.3f}, {score - base:+.3f}; "
                f"{top[0]} {top[1]} {means[top]:.3f}, {gain:+.3f})",
            )

    # -- phases -------------------------------------------------------------------
    def stores(self, cells: Sequence[Cell]) -> dict[str, Path]:
        """text key → store path: extraction once per engine (into the store of the first
        text setting seen with it, recorded in cache/bases.json for later phases and
        sessions), every other text setting a re-chunked copy of that store."""
        by_key: dict[str, Design] = {}
        for c in cells:
            by_key.setdefault(text_key(c.design), c.design)
        paths = {k: self.cache / "text" / k for k in by_key}
        record = self.cache / "bases.json"
        bases: dict[str, dict[str, Any]] = json.loads(record.read_text()) if record.exists() else {}
        t0 = time.perf_counter()
        for k, d in by_key.items():
            base = bases.setdefault(d.engine, {"key": k, "text": d.text.as_dict()})
            path = self.cache / "text" / base["key"]
            if not (path / "ready.json").exists():
                write_json(record, bases)
                self._report("extract", 0, 1, 0.0, None, 0)
                text = TextSettings.from_dict(base["text"])
                rep = ingest(self.corpus, path, engine=d.engine, settings=text)
                write_json(
                    path / "ready.json",
                    {"text_settings": base["text"], "engine": d.engine, "extracted": rep.extracted},
                )
                self._report("extract", 1, 1, time.perf_counter() - t0, 0.0, 0)
        self.session.phases["extract"] = self.session.phases.get("extract", 0.0) + time.perf_counter() - t0
        jobs = [
            (
                str(self.cache / "text" / bases[d.engine]["key"]),
                str(paths[k]),
                str(self.corpus),
                d.engine,
                d.text.as_dict(),
            )
            for k, d in by_key.items()
            if not (paths[k] / "ready.json").exists()
        ]
        self._rounds("text", text_job, jobs, reused=len(by_key) - len(jobs))
        return paths

    def views(self, jobs: Sequence[Job], stores: dict[str, Path]) -> dict[str, Path]:
        """cell key → its view; and the index builds the views need, run now."""
        views: dict[str, Path] = {}
        builds: dict[Path, tuple[str, str, str, IndexSettings]] = {}
        for j in jobs:
            d = j.cell.design
            view = self.cache / "views" / j.cell.key
            _link(view / DB_NAME, stores[text_key(d)] / DB_NAME)
            for v, m in j.runs:
                for base in parse_method(m).needs():
                    real = self.cache / "indexes" / v / index_key(d, v, base)
                    real.mkdir(parents=True, exist_ok=True)
                    _link(view / "indexes" / v / base.index_key, real)
                    builds.setdefault(real, (str(view), v, base.name, d.index))
            views[j.cell.key] = view
        # the slowest builds first (LSA and dense before BM25), so rounds stay even
        order = sorted(builds.values(), key=lambda b: (b[2] == "bm25", b[1], b[0]))
        self._rounds("indexes", index_job, order, kind=lambda job: job[2])
        return views

    def cells(
        self, phase: str, todo: Sequence[Job], views: dict[str, Path], reused: int
    ) -> list[dict[str, Any]]:
        """Run the cells of ``todo``; their metrics, in order."""
        args = [
            (
                j.cell.as_dict(),
                str(self.corpus),
                str(j.questions),
                str(j.out),
                str(views[j.cell.key]),
                [list(r) for r in j.runs],
            )
            for j in todo
        ]
        return self._rounds(phase, cell_job, args, reused=reused)

    def run(self, phase: str, jobs: list[Job]) -> None:
        """Run the jobs not finished before; stores, views and indexes only for those."""
        todo = []
        for j in jobs:
            prev = _finished(j)
            if prev is None:
                todo.append(j)
            elif phase == "cells":
                self._note(prev)
        self.session.cells_run += len(todo)
        self.session.cells_reused += len(jobs) - len(todo)
        if not todo:
            self._report(phase, len(jobs), len(jobs), 0.0, 0.0, len(jobs))
            return
        stores = self.stores([j.cell for j in todo])
        views = self.views(todo, stores)
        self.cells(phase, todo, views, len(jobs) - len(todo))


def _finished(j: Job) -> dict[str, Any] | None:
    """A cell's metrics when its folder holds a finished run of the same settings and
    questions, else None."""
    try:
        info = json.loads((j.out / "run.json").read_text(encoding="utf-8"))
        metrics = json.loads((j.out / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if info.get("sweep_cell", {}).get("key") != j.cell.key:
        return None
    if info["inputs"]["questions"]["sha256"] != sha256_file(j.questions):
        return None
    return {"id": j.cell.id, "seconds": 0.0, "runs": metrics["runs"]}


def run_sweep(
    corpus: str | Path,
    questions: str | Path,
    out: str | Path,
    grid: Grid | None = None,
    *,
    test: str | Path | None = None,
    executor: Executor | None = None,
    progress: ProgressFn | None = None,
    keep_indexes: bool = False,
) -> dict[str, Any]:
    """Run (or continue) the sweep of ``grid`` (default: the study's) on ``questions``
    (the dev split) over ``corpus`` into ``out``; choose settings on it; then, with
    ``test``, evaluate the default and the chosen cell on the test split once. Once every
    cell is done the indexes are deleted (a finished cell never reads them again; the LSA
    indexes of a large corpus take gigabytes) unless ``keep_indexes``. Writes the
    report (sweep.report) and returns results.json's data."""
    from sourcepage.sweep import report as sweep_report

    corpus, questions, out = Path(corpus), Path(questions), Path(out)
    test = Path(test) if test is not None else None
    grid = grid or study_grid()
    _check_splits(questions, test)
    out.mkdir(parents=True, exist_ok=True)
    spec = _begin(out, grid, corpus, questions, test)
    ex = executor or make_executor("process")
    session = Session(getattr(ex, "name", type(ex).__name__), ex.workers)
    sweep = Sweep(out, corpus, ex, progress, session)
    sweep.metric = grid.metric
    try:
        default_runs = [tuple(r) for r in spec["cells"][0]["runs"]]
        cells = {c.id: c for c in grid.cells()}
        jobs = [
            Job(cells[c["id"]], questions, out / "cells" / c["id"], [tuple(r) for r in c["runs"]])
            for c in spec["cells"]
            if c["runs"]
        ]
        sweep.run("cells", jobs)
        dev = sweep_report.collect(out / "cells", grid, default_runs)
        chosen = grid.combine(sweep_report.choose(grid, dev))
        final: list[Job] = []
        if chosen.id != DEFAULT_ID:
            final.append(Job(chosen, questions, out / "cells" / "chosen", default_runs))
        if test is not None:
            final.append(Job(grid.default(), test, out / "test" / DEFAULT_ID, default_runs))
            if chosen.id != DEFAULT_ID:
                final.append(Job(chosen, test, out / "test" / "chosen", default_runs))
        if final:
            sweep.run("chosen and test", final)
    finally:
        if executor is None:
            ex.close()
    if not keep_indexes:
        shutil.rmtree(out / "cache" / "indexes", ignore_errors=True)
    session_info = {
        "finished_at": now(),
        "executor": session.executor,
        "workers": session.workers,
        "wall_s": round(time.perf_counter() - session.started, 3),
        "phases_s": {k: round(v, 3) for k, v in session.phases.items()},
        "cells_run": session.cells_run,
        "cells_reused": session.cells_reused,
    }
    timings_path = out / "timings.json"
    sessions = json.loads(timings_path.read_text()) if timings_path.exists() else []
    write_json(timings_path, [*sessions, session_info])
    t0 = time.perf_counter()
    results = sweep_report.write(out, grid, spec, chosen, [*sessions, session_info])
    # the report's own time (bootstrap CIs, figures) is known only once it is written
    session_info["report_s"] = round(time.perf_counter() - t0, 3)
    write_json(timings_path, [*sessions, session_info])
    results["sessions"][-1]["report_s"] = session_info["report_s"]
    return results
