"""What a sweep found: every cell against the default, the conclusions that hold, the
settings chosen on dev and the test split reported once.

Read from the cells' per_question.jsonl (the runner's per-question values), so every
number here can be recomputed from the cell folders. A run a cell does not change takes
the default cell's values. Comparisons are paired over the evaluated (answerable)
questions: the change of the mean with a percentile bootstrap CI (evaluation.stats,
seed 42). Writes ``results.json``, ``comparisons.csv``, ``figures/sweep_*.png`` and
``report.md``.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.evaluation import stats as S
from sourcepage.store.files import write_json, write_text
from sourcepage.sweep.figures import heatmap
from sourcepage.sweep.grid import DEFAULT_ID, Cell, Grid, Level, affected_runs

__all__ = ["Values", "choose", "collect", "write"]

Key = tuple[str, str]
#: the cutoffs a level must lead at to "dominate every cutoff" (study §4.6)
CUTOFFS = ("hit@1", "hit@3", "hit@10", "ndcg@10")
EPS = 1e-12


def _name(run: Key) -> str:
    return f"{run[0]} {run[1]}"


def _read(folder: Path) -> dict[Key, dict[str, dict[str, float]]]:
    """run → question id → metric → value, from a cell's per_question.jsonl (evaluated rows)."""
    out: dict[Key, dict[str, dict[str, float]]] = {}
    with open(folder / "per_question.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if "first_relevant_rank" not in row:
                continue
            skip = {"question_id", "text_version", "method", "topic", "type", "answerability"}
            vals = {k: float(v) for k, v in row.items() if k not in skip and isinstance(v, int | float)}
            vals.pop("first_relevant_rank", None)
            vals.pop("top_score", None)
            vals.pop("margin", None)
            out.setdefault((row["text_version"], row["method"]), {})[row["question_id"]] = vals
    return out


@dataclass
class Values:
    """Per-question values of every cell of one question set, unchanged runs filled in."""

    runs: list[Key]
    qids: list[str]
    cells: dict[str, dict[Key, dict[str, dict[str, float]]]]
    affected: dict[str, list[Key]]

    def column(self, cell: str, run: Key, metric: str) -> list[float]:
        return [self.cells[cell][run][q][metric] for q in self.qids]

    def mean(self, cell: str, run: Key, metric: str) -> float:
        return float(np.mean(self.column(cell, run, metric))) if self.qids else math.nan

    def means(self, cell: str, run: Key) -> dict[str, float]:
        names = self.cells[cell][run][self.qids[0]] if self.qids else {}
        return {m: round(self.mean(cell, run, m), 6) for m in names}


def _load(folders: Mapping[str, Path], runs: Sequence[Key], changed: Mapping[str, list[Key]]) -> Values:
    default = _read(folders[DEFAULT_ID])
    qids = list(next(iter(default.values())).keys()) if default else []
    cells = {}
    for cid, folder in folders.items():
        own = _read(folder) if cid != DEFAULT_ID else default
        cells[cid] = {r: own.get(r, default[r]) if r in changed[cid] else default[r] for r in runs}
    return Values(list(runs), qids, cells, {c: list(v) for c, v in changed.items()})


def collect(cells_dir: Path, grid: Grid, runs: Sequence[Key]) -> Values:
    """The dev values of every grid cell (``cells_dir/<cell id>``)."""
    d0 = grid.default().design
    cells = grid.cells()
    changed = {c.id: (list(runs) if c.id == DEFAULT_ID else affected_runs(c.design, d0)) for c in cells}
    kept = {c: r for c, r in changed.items() if r or c == DEFAULT_ID}
    return _load({c: cells_dir / c for c in kept}, runs, kept)


def _gain(v: Values, cell: Cell, metric: str) -> float:
    """Mean change of ``metric`` over the runs ``cell`` changes (0 for the default)."""
    runs = v.affected.get(cell.id, [])
    if cell.id == DEFAULT_ID or not runs:
        return 0.0
    return float(np.mean([v.mean(cell.id, r, metric) - v.mean(DEFAULT_ID, r, metric) for r in runs]))


def choose(grid: Grid, v: Values) -> list[Level]:
    """Per factor, the level with the largest mean gain of the grid's metric over the
    runs it changes; none (the default stays) when no level gains."""
    chosen = []
    for name in grid.factors:
        scored = [(_gain(v, cell, grid.metric), lv) for lv, cell in grid.levels() if lv.factor == name]
        gain, best = max(scored, key=lambda t: t[0])
        if gain > EPS:
            chosen.append(best)
    return chosen


def _versus_default(v: Values, cell: str, run: Key, metric: str, boot: int, seed: int) -> tuple[float, ...]:
    """(change, CI low, CI high) of ``cell`` against the default on ``run``; zeros where the
    cell does not change the run (its values are the default's)."""
    if cell == DEFAULT_ID or run not in v.affected.get(cell, []):
        return 0.0, 0.0, 0.0
    return S.paired_bootstrap_ci(v.column(cell, run, metric), v.column(DEFAULT_ID, run, metric), boot, seed)


# --------------------------------------------------------------------------- summaries


def _factors(grid: Grid, v: Values, boot: int, seed: int) -> list[dict[str, Any]]:
    metric, out = grid.metric, []
    for name, levels in grid.factors.items():
        pairs = [(lv, cell) for lv, cell in grid.levels() if lv.factor == name]
        runs = [
            r for r in v.runs if any(r in v.affected.get(c.id, []) for _, c in pairs if c.id != DEFAULT_ID)
        ]
        runs = runs or list(v.runs)
        entries = []
        for lv, cell in pairs:
            per_run = {}
            for r in runs:
                d, lo, hi = _versus_default(v, cell.id, r, metric, boot, seed)
                per_run[_name(r)] = {
                    "affected": cell.id != DEFAULT_ID and r in v.affected.get(cell.id, []),
                    "means": v.means(cell.id, r),
                    "delta": round(d, 6),
                    "ci": [round(lo, 6), round(hi, 6)],
                }
            entries.append(
                {
                    "label": lv.label,
                    "cell": cell.id,
                    "is_default": cell.id == DEFAULT_ID,
                    "values": lv.values,
                    "overrides": lv.overrides,
                    "gain": round(_gain(v, cell, metric), 6),
                    "runs": per_run,
                }
            )
        best = {}
        for m in (metric, *CUTOFFS):
            score = [float(np.mean([e["runs"][_name(r)]["means"][m] for r in runs])) for e in entries]
            top = [e for e, x in zip(entries, score, strict=True) if x >= max(score) - EPS]
            # ties: the default level if it is among the best, else the first; "all" when every level ties
            if len(top) == len(entries) and len(entries) > 1:
                best[m] = "all levels tie"
            else:
                best[m] = next((e["label"] for e in top if e["is_default"]), top[0]["label"])
        keys = list(levels[0].values) if levels and levels[0].values else []
        out.append(
            {
                "name": name,
                "slug": "".join(ch if ch.isalnum() else "_" for ch in name.lower()),
                "keys": keys,
                "runs": [_name(r) for r in runs],
                "levels": entries,
                "best": best,
                "range": {
                    _name(r): [
                        min(e["runs"][_name(r)]["means"][metric] for e in entries),
                        max(e["runs"][_name(r)]["means"][metric] for e in entries),
                    ]
                    for r in runs
                },
            }
        )
    return out


def _orderings(grid: Grid, v: Values, boot: int, seed: int) -> list[dict[str, Any]]:
    """Each paired ordering of the default cell (methods within a version, versions within
    a method) and in how many cells it holds, ties or reverses."""
    metric = grid.metric
    versions = list(dict.fromkeys(r[0] for r in v.runs))
    methods = list(dict.fromkeys(r[1] for r in v.runs))
    fams: list[tuple[str, Key, Key]] = []
    for ver in versions:
        ms = [m for m in methods if (ver, m) in v.runs]
        fams += [(f"methods within {ver}", (ver, a), (ver, b)) for a, b in itertools.combinations(ms, 2)]
    for m in methods:
        vs = [x for x in versions if (x, m) in v.runs]
        fams += [(f"text versions within {m}", (a, m), (b, m)) for a, b in itertools.combinations(vs, 2)]
    cells = [c for c in v.cells if c != "chosen"]
    labels = {c.id: f"{c.factor} {c.label}" for _, c in grid.levels()}
    out = []
    for family, a, b in fams:
        d0, lo, hi = S.paired_bootstrap_ci(
            v.column(DEFAULT_ID, a, metric), v.column(DEFAULT_ID, b, metric), boot, seed
        )
        win, lose = (a, b) if d0 >= 0 else (b, a)
        holds, ties, rev = 0, 0, []
        for c in cells:
            d = v.mean(c, win, metric) - v.mean(c, lose, metric)
            if abs(d) <= EPS:
                ties += 1
            elif d > 0:
                holds += 1
            else:
                rev.append(labels.get(c, c))
        out.append(
            {
                "family": family,
                "winner": _name(win),
                "loser": _name(lose),
                "tied_in_default": abs(d0) <= EPS,
                "default": [round(v.mean(DEFAULT_ID, r, metric), 6) for r in (win, lose)],
                "delta": round(abs(d0), 6),
                "ci": [round(lo, 6), round(hi, 6)] if d0 >= 0 else [round(-hi, 6), round(-lo, 6)],
                "cells": len(cells),
                "holds": holds,
                "ties": ties,
                "reverses": len(rev),
                "reversed_in": rev,
            }
        )
    return out


def _paired_runs(va: Values, a: str, vb: Values, b: str, metric: str, boot: int, seed: int) -> dict[str, Any]:
    """Run → means of cell ``a`` and ``b`` (each in its own Values) and the paired change."""
    out = {}
    for r in va.runs:
        x, y = va.column(a, r, metric), vb.column(b, r, metric)
        d, lo, hi = S.paired_bootstrap_ci(x, y, boot, seed) if x else (math.nan,) * 3
        out[_name(r)] = {
            "a": round(float(np.mean(x)), 6) if x else math.nan,
            "b": round(float(np.mean(y)), 6) if y else math.nan,
            "delta": round(d, 6),
            "ci": [round(lo, 6), round(hi, 6)],
        }
    return out


def _single(folder: Path, runs: Sequence[Key]) -> Values:
    data = _read(folder)
    qids = list(next(iter(data.values())).keys()) if data else []
    return Values(list(runs), qids, {"x": {r: data[r] for r in runs}}, {"x": list(runs)})


def _csv(factors: Sequence[Mapping[str, Any]], metric: str) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [
            "factor",
            "level",
            "cell",
            "run",
            "changed",
            metric,
            f"delta_{metric}",
            "ci_low",
            "ci_high",
            *CUTOFFS,
        ]
    )
    for f in factors:
        for lv in f["levels"]:
            for run, e in lv["runs"].items():
                m = e["means"]
                w.writerow(
                    [f["name"], lv["label"], lv["cell"], run, e["affected"], m[metric], e["delta"], *e["ci"]]
                    + [m[c] for c in CUTOFFS]
                )
    return buf.getvalue()


def write(out: Path, grid: Grid, spec: Mapping[str, Any], chosen: Cell, sessions: Sequence[Mapping]) -> dict:
    """Summarise the finished sweep in ``out``; returns results.json's data."""
    from sourcepage.sweep.text import report

    runs: list[Key] = [tuple(r) for r in spec["cells"][0]["runs"]]  # type: ignore[misc]
    d0 = grid.default().design
    boot, seed, metric = d0.bootstrap, d0.seed, grid.metric
    dev = collect(out / "cells", grid, runs)
    factors = _factors(grid, dev, boot, seed)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    for f in factors:
        f["figure"] = "figures/" + heatmap(out / "figures", f, metric)
    levels = choose(grid, dev)
    gains = {(lv.factor, lv.label): _gain(dev, c, metric) for lv, c in grid.levels()}
    sel: dict[str, Any] = {
        "cell": chosen.id,
        "label": chosen.label,
        "overrides": chosen.overrides,
        "levels": [
            {"factor": lv.factor, "label": lv.label, "gain": gains[(lv.factor, lv.label)]} for lv in levels
        ],
    }
    base = _single(out / "cells" / DEFAULT_ID, runs)
    if chosen.id != DEFAULT_ID:
        sel["dev"] = _paired_runs(_single(out / "cells" / "chosen", runs), "x", base, "x", metric, boot, seed)
    test = None
    if spec["inputs"].get("test"):
        td = _single(out / "test" / DEFAULT_ID, runs)
        test = {"questions": spec["inputs"]["test"], "n_evaluated": len(td.qids)}
        if chosen.id != DEFAULT_ID:
            tc = _single(out / "test" / "chosen", runs)
            test["paired"] = _paired_runs(tc, "x", td, "x", metric, boot, seed)
        else:
            test["paired"] = _paired_runs(td, "x", td, "x", metric, boot, seed)
    results = {
        "schema": 1,
        "metric": metric,
        "bootstrap_resamples": boot,
        "seed": seed,
        "n_evaluated": len(dev.qids),
        "inputs": spec["inputs"],
        "runs": [_name(r) for r in runs],
        "cells": [
            {
                "id": c.id,
                "factor": c.factor,
                "label": c.label,
                "runs": [_name(r) for r in dev.affected.get(c.id, [])],
            }
            for c in grid.cells()
        ],
        "default": {_name(r): dev.means(DEFAULT_ID, r) for r in runs},
        "factors": factors,
        "orderings": _orderings(grid, dev, boot, seed),
        "chosen": sel,
        "test": test,
        "sessions": list(sessions),
    }
    results = json.loads(json.dumps(results, allow_nan=True))
    write_json(out / "results.json", results)
    write_text(out / "comparisons.csv", _csv(factors, metric))
    write_text(out / "report.md", report(results, grid.source))
    return results
