"""Heat maps of a sweep, one figure per factor (sweep.report draws them).

Colour is the change of the selection metric against the default cell (blue better,
red worse, white equal, the same scale within a figure); each square is labelled with
the metric itself, ``*`` when the 95% bootstrap CI of the change excludes 0. The default
level is framed. A factor that varies two keys as a product (BM25 k1 × b) gets one small
panel per run with the two keys as axes; any other factor one matrix of runs × levels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["heatmap"]


def _cell_text(entry: Mapping[str, Any], metric: str) -> str:
    lo, hi = entry["ci"]
    star = "*" if (lo > 0 or hi < 0) else ""
    return f"{entry['means'][metric]:.3f}{star}"


def _limit(factor: Mapping[str, Any]) -> float:
    deltas = [abs(e["delta"]) for lv in factor["levels"] for e in lv["runs"].values()]
    return max([0.05, *deltas])  # a small change stays pale: the colour scale is at least ±0.05


def _draw(ax: Any, grid: np.ndarray, text: list[list[str]], frame: tuple[int, int] | None, lim: float) -> Any:
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.patches import Rectangle

    norm = TwoSlopeNorm(vcenter=0.0, vmin=-lim, vmax=lim)
    im = ax.imshow(grid, cmap="RdBu", norm=norm, aspect="auto")
    for i, row in enumerate(text):
        for j, t in enumerate(row):
            if not t:
                continue
            dark = abs(grid[i, j]) > 0.6 * lim
            ax.text(j, i, t, ha="center", va="center", fontsize=8, color="white" if dark else "black")
    if frame is not None:
        i, j = frame
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2))
    return im


def heatmap(folder: Path, factor: Mapping[str, Any], metric: str) -> str:
    """Draw ``factor`` (a results.json factor entry) into ``folder``; returns the file name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = f"sweep_{factor['slug']}.png"
    runs: Sequence[str] = factor["runs"]
    levels = factor["levels"]
    lim = _limit(factor)
    keys = factor["keys"]
    title = f"{factor['name']}: {metric.upper()} (colour: change vs default; * 95% CI excludes 0)"
    if len(keys) == 2:
        rows = list(dict.fromkeys(lv["values"][keys[0]] for lv in levels))
        cols = list(dict.fromkeys(lv["values"][keys[1]] for lv in levels))
        ncol = min(3, len(runs))
        nrow = -(-len(runs) // ncol)
        fig, axes = plt.subplots(
            nrow,
            ncol,
            figsize=(3.3 * ncol + 1.2, 2.7 * nrow + 0.7),
            dpi=120,
            squeeze=False,
            layout="constrained",
        )
        im = None
        for k, run in enumerate(runs):
            ax = axes[k // ncol][k % ncol]
            grid = np.zeros((len(rows), len(cols)))
            text = [["" for _ in cols] for _ in rows]
            frame = None
            for lv in levels:
                i, j = rows.index(lv["values"][keys[0]]), cols.index(lv["values"][keys[1]])
                e = lv["runs"][run]
                grid[i, j] = e["delta"]
                text[i][j] = _cell_text(e, metric)
                if lv["is_default"]:
                    frame = (i, j)
            im = _draw(ax, grid, text, frame, lim)
            ax.set_title(run, fontsize=9)
            ax.set_xticks(range(len(cols)), [str(c) for c in cols], fontsize=8)
            ax.set_yticks(range(len(rows)), [str(r) for r in rows], fontsize=8)
            ax.set_xlabel(keys[1], fontsize=8)
            ax.set_ylabel(keys[0], fontsize=8)
        for k in range(len(runs), nrow * ncol):
            axes[k // ncol][k % ncol].axis("off")
        fig.suptitle(title, fontsize=10)
        fig.colorbar(im, ax=axes, shrink=0.8, label=f"Δ{metric.upper()} vs default")
    else:
        labels = [lv["label"] + (" (default)" if lv["is_default"] else "") for lv in levels]
        grid = np.array([[lv["runs"][r]["delta"] for lv in levels] for r in runs])
        text = [[_cell_text(lv["runs"][r], metric) for lv in levels] for r in runs]
        width = max(6.0, 1.25 * len(levels) + 3.2)
        fig, ax = plt.subplots(figsize=(width, 0.45 * len(runs) + 1.9), dpi=120, layout="constrained")
        frame_col = next((j for j, lv in enumerate(levels) if lv["is_default"]), None)
        im = _draw(ax, grid, text, None, lim)
        if frame_col is not None:
            from matplotlib.patches import Rectangle

            ax.add_patch(
                Rectangle((frame_col - 0.5, -0.5), 1, len(runs), fill=False, edgecolor="black", linewidth=2)
            )
        ax.set_xticks(range(len(levels)), labels, fontsize=8, rotation=20, ha="right")
        ax.set_yticks(range(len(runs)), list(runs), fontsize=8)
        ax.set_title(title, fontsize=10)
        fig.colorbar(im, ax=ax, shrink=0.9, label=f"Δ{metric.upper()} vs default")
    fig.savefig(folder / name, metadata={"Software": None})
    plt.close(fig)
    return name
