"""``sourcepage sweep``: the study's robustness grid (or any grid) in one resumable command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from sourcepage.cli._common import RayAddressOpt, RayOpt, err, escape, fail, out, ray_executor


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class _Bar:
    """One bar per phase on a terminal (cells done, time left, best cell so far); one line per
    update on a pipe or a file, so a log shows the same."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.live = err.is_terminal
        self.prog = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("left {task.fields[eta]}"),
            TextColumn("{task.fields[best]}"),
            console=err,
            disable=not self.live,
        )
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> _Bar:
        self.prog.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.prog.__exit__(*exc)

    def __call__(self, p: Any) -> None:
        best = f"best: {p.best}" if p.best else ""
        if self.live:
            if p.phase not in self.tasks:
                self.tasks[p.phase] = self.prog.add_task(escape(p.phase), total=p.total, eta="–", best="")
            self.prog.update(
                self.tasks[p.phase], completed=p.done, total=p.total, eta=_duration(p.eta), best=escape(best)
            )
        else:
            resumed = f" ({p.reused} done before)" if p.reused else ""
            err.print(
                f"{p.phase}: {p.done}/{p.total}{resumed}, {_duration(p.elapsed)} elapsed, "
                f"{_duration(p.eta)} left {best}".rstrip(),
                markup=False,
                highlight=False,
                soft_wrap=True,
            )


def sweep(
    out_dir: Annotated[Path, typer.Option("--out", help="Sweep folder (a killed sweep continues here).")],
    questions: Annotated[
        Path, typer.Option("--questions", help="Dev questions.jsonl: settings are chosen on it.")
    ],
    corpus: Annotated[Path, typer.Option("--corpus", help="Corpus folder (manifest.csv + pdf/).")],
    grid: Annotated[
        Path | None, typer.Option("--grid", help="sweep.yaml (default: the study's grid, study_grid.yaml).")
    ] = None,
    test: Annotated[
        Path | None, typer.Option("--test", help="Test questions.jsonl, evaluated once after choosing.")
    ] = None,
    executor: Annotated[
        str, typer.Option("--executor", help="inline, process or process:N (default: every core).")
    ] = "process",
    ray: RayOpt = False,
    ray_address: RayAddressOpt = None,
    bootstrap: Annotated[int | None, typer.Option(help="Bootstrap resamples (default: the grid's).")] = None,
    keep_indexes: Annotated[
        bool,
        typer.Option("--keep-indexes", help="Keep the cells' indexes after the sweep (default: delete)."),
    ] = False,
) -> None:
    """Sweep a grid of settings on dev questions, choose settings, report the test split once."""
    from sourcepage.executor import make_executor
    from sourcepage.sweep.grid import Grid, merge, study_grid
    from sourcepage.sweep.sweep import SweepError, run_sweep

    try:
        g = Grid.from_yaml(grid) if grid else study_grid()
        if bootstrap is not None:
            g.base = merge(g.base, {"bootstrap": bootstrap})
            g.default().design.runs()
        ex = ray_executor(ray, ray_address) or make_executor(executor)
    except (ValueError, OSError) as e:
        fail(str(e))
    try:
        with _Bar() as bar:
            res = run_sweep(
                corpus, questions, out_dir, g, test=test, executor=ex, progress=bar, keep_indexes=keep_indexes
            )
    except (SweepError, ValueError, OSError) as e:
        fail(str(e))
    finally:
        ex.close()
    _print(res, out_dir)


def _print(res: dict[str, Any], out_dir: Path) -> None:
    metric = res["metric"].upper()
    t = Table(title=f"Sweep — {metric} on {res['n_evaluated']} dev questions", title_justify="left")
    for col in ("factor", "default", "best level", f"mean Δ{metric}", "gains*", "losses*", "chosen"):
        t.add_column(col, no_wrap=True)
    chosen = {lv["factor"]: lv["label"] for lv in res["chosen"]["levels"]}
    for f in res["factors"]:
        best = max(f["levels"], key=lambda lv: (lv["gain"], lv["is_default"]))
        default = next((lv["label"] for lv in f["levels"] if lv["is_default"]), "–")
        changed = [e for lv in f["levels"] for e in lv["runs"].values() if e["affected"]]
        t.add_row(
            escape(f["name"]),
            escape(default),
            escape(best["label"]),
            f"{best['gain']:+.3f}",
            str(sum(e["ci"][0] > 0 for e in changed)),
            str(sum(e["ci"][1] < 0 for e in changed)),
            escape(chosen.get(f["name"], "default")),
        )
    out.print(t)
    out.print(
        f"* paired comparisons (level × run) whose 95% bootstrap CI of Δ{metric} excludes 0", markup=False
    )
    s = res["sessions"][-1]
    out.print(
        f"wall time {s['wall_s']:.1f} s + report {s.get('report_s', 0):.1f} s "
        f"({s['executor']}, {s['workers']} workers; "
        f"{s['cells_run']} cells run, {s['cells_reused']} reused)",
        markup=False,
    )
    if res["test"]:
        gains = [e["delta"] for e in res["test"]["paired"].values()]
        out.print(
            f"test split (once): mean Δ{metric} of the chosen settings {sum(gains) / len(gains):+.3f}",
            markup=False,
        )
    out.print(
        f"report: {out_dir / 'report.md'}  (results.json, comparisons.csv, figures/, cells/)", markup=False
    )
