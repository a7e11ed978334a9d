"""report.md of a sweep, written from results.json's data (sweep.report).

Plain language first ("which conclusions hold across the grid", the defaults the grid
would change, the test split), then one section per factor with its heat map, a compact
table and every paired comparison with the default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["report"]

LABELS = {"mrr": "MRR", "hit@1": "Hit@1", "hit@3": "Hit@3", "hit@10": "Hit@10", "ndcg@10": "nDCG@10"}


def _m(name: str) -> str:
    return LABELS.get(name, name)


def _ci(ci: Sequence[float]) -> str:
    return f"{ci[0]:+.3f} to {ci[1]:+.3f}"


def _beyond(ci: Sequence[float]) -> bool:
    return ci[0] > 0 or ci[1] < 0


def _ordering_lines(orderings: Sequence[Mapping[str, Any]], metric: str) -> list[str]:
    held = [o for o in orderings if not o["tied_in_default"] and o["reverses"] == 0]
    broken = [o for o in orderings if not o["tied_in_default"] and o["reverses"] > 0]
    tied = [o for o in orderings if o["tied_in_default"]]
    lines = [
        f"Of the {len(orderings)} paired orderings of the default cell (methods within a text version, "
        f"text versions within a method), {len(held)} hold in every cell of the grid, {len(broken)} "
        f"reverse somewhere and {len(tied)} are tied in the default cell.",
        "",
    ]
    for o in held:
        noise = "beyond noise" if _beyond(o["ci"]) else "within noise"
        tie = f", tied in {o['ties']}" if o["ties"] else ""
        lines.append(
            f"- **Holds:** {o['winner']} ahead of {o['loser']} — {_m(metric)} {o['default'][0]:.3f} vs "
            f"{o['default'][1]:.3f} in the default (Δ {o['delta']:+.3f}, 95% CI {_ci(o['ci'])}, {noise}); "
            f"ahead in {o['holds']} of {o['cells']} cells{tie}."
        )
    for o in broken:
        where = ", ".join(o["reversed_in"][:4]) + (" …" if len(o["reversed_in"]) > 4 else "")
        lines.append(
            f"- **Does not hold everywhere:** {o['winner']} ahead of {o['loser']} in the default "
            f"({o['default'][0]:.3f} vs {o['default'][1]:.3f}, Δ {o['delta']:+.3f}, CI {_ci(o['ci'])}), "
            f"behind in {o['reverses']} of {o['cells']} cells ({where})."
        )
    for o in tied:
        lines.append(f"- **Tied in the default:** {o['winner']} and {o['loser']} ({o['default'][0]:.3f}).")
    return lines


def _factor_line(f: Mapping[str, Any], metric: str) -> str:
    entries = [(lv, run, e) for lv in f["levels"] for run, e in lv["runs"].items() if e["affected"]]
    lo = min(r[0] for r in f["range"].values())
    hi = max(r[1] for r in f["range"].values())
    default = next(
        (f"default {lv['label']}" for lv in f["levels"] if lv["is_default"]), "default not a level"
    )
    text = (
        f"**{f['name']}** ({default}): {_m(metric)} ranged from {lo:.3f} to {hi:.3f} over its "
        f"{len(f['levels'])} levels and the {len(f['runs'])} runs it changes. "
    )
    up = sorted((e["ci"][0], lv["label"], run, e) for lv, run, e in entries if e["ci"][0] > 0)
    down = [(lv["label"], run, e) for lv, run, e in entries if e["ci"][1] < 0]
    if up:
        _, label, run, e = up[-1]
        text += (
            f"{len(up)} of {len(entries)} comparisons gain beyond noise (largest lower bound: {label} on "
            f"{run}, Δ {e['delta']:+.3f}, CI {_ci(e['ci'])}). "
        )
    else:
        text += "No level beats the default beyond noise on any run. "
    if down:
        label, run, e = min(down, key=lambda t: t[2]["delta"])
        text += (
            f"{len(down)} of {len(entries)} fall below it beyond noise (largest loss: {label} on {run}, "
            f"Δ {e['delta']:+.3f}, CI {_ci(e['ci'])}). "
        )
    best = f["best"]
    if set(best.values()) == {"all levels tie"}:
        text += "Every level gives the same values at every cutoff."
    elif len(set(best.values())) == 1:
        text += f"{next(iter(best.values()))} is best at every cutoff."
    else:
        text += (
            "No single level is best at every cutoff: "
            + ", ".join(f"{_m(k)} {v}" for k, v in best.items())
            + "."
        )
    return text


def _changes(res: Mapping[str, Any], metric: str) -> list[str]:
    sel = res["chosen"]
    if not sel["levels"]:
        return ["None: no level of any factor raised the mean " + _m(metric) + " on the dev questions."]
    defaults = {
        f["name"]: next((lv["label"] for lv in f["levels"] if lv["is_default"]), "default")
        for f in res["factors"]
    }
    lines = []
    for lv in sel["levels"]:
        f = next(x for x in res["factors"] if x["name"] == lv["factor"])
        entry = next(e for e in f["levels"] if e["label"] == lv["label"])
        changed = [e for e in entry["runs"].values() if e["affected"]]
        beyond = sum(e["ci"][0] > 0 for e in changed)
        lines.append(
            f"- **{lv['factor']}**: {defaults[lv['factor']]} → **{lv['label']}** (dev: mean Δ{_m(metric)} "
            f"{lv['gain']:+.3f} over the {len(changed)} runs it changes; beyond noise on {beyond})."
        )
    return lines


def _paired_table(paired: Mapping[str, Mapping[str, Any]], a: str, b: str, metric: str) -> list[str]:
    lines = [f"| run | {a} | {b} | Δ{_m(metric)} | 95% CI |", "|---|---|---|---|---|"]
    for run, e in paired.items():
        lines.append(f"| {run} | {e['a']:.3f} | {e['b']:.3f} | {e['delta']:+.3f} | {_ci(e['ci'])} |")
    return lines


def _factor_section(f: Mapping[str, Any], metric: str) -> list[str]:
    runs = f["runs"]
    lines = [f"### {f['name']}", "", f"![{f['name']}]({f['figure']})", ""]
    lines += ["| level | " + " | ".join(runs) + " |", "|---|" + "---|" * len(runs)]
    for lv in f["levels"]:
        cells = []
        for r in runs:
            e = lv["runs"][r]
            star = "*" if _beyond(e["ci"]) else ""
            cells.append(
                f"{e['means'][metric]:.3f} ({e['delta']:+.3f}){star}"
                if e["affected"]
                else f"{e['means'][metric]:.3f}"
            )
        label = f"**{lv['label']}** (default)" if lv["is_default"] else lv["label"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"{_m(metric)} (Δ vs default); * the 95% bootstrap CI of Δ excludes 0.",
        "",
        f"<details><summary>Every paired comparison with the default (Δ{_m(metric)}, 95% bootstrap CI)"
        "</summary>",
        "",
        "| level | run | " + _m(metric) + " | Δ | 95% CI | Hit@1 | Hit@3 | Hit@10 | nDCG@10 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for lv in f["levels"]:
        for r in runs:
            e = lv["runs"][r]
            if not e["affected"]:
                continue
            m = e["means"]
            lines.append(
                f"| {lv['label']} | {r} | {m[metric]:.3f} | {e['delta']:+.3f} | {_ci(e['ci'])} | "
                f"{m['hit@1']:.3f} | {m['hit@3']:.3f} | {m['hit@10']:.3f} | {m['ndcg@10']:.3f} |"
            )
    return lines + ["", "</details>", ""]


def report(res: Mapping[str, Any], grid_source: str) -> str:
    """The sweep's report.md."""
    metric = res["metric"]
    lines = _opening(res, grid_source) + _conclusions(res, metric)
    sel = res["chosen"]
    if sel.get("dev"):
        lines += ["Chosen cell against the default on the dev questions:", ""]
        lines += _paired_table(sel["dev"], "chosen", "default", metric) + [""]
    lines += _test_lines(res, metric)
    lines += ["## Factors", ""]
    for f in res["factors"]:
        lines += _factor_section(f, metric)
    lines += _default_cell(res)
    return "\n".join(lines)


def _opening(res: Mapping[str, Any], grid_source: str) -> list[str]:
    """The title, the inputs and design, and the last session's wall time."""
    metric = res["metric"]
    s = res["sessions"][-1]
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in s["phases_s"].items())
    inputs = res["inputs"]
    return [
        "# Robustness sweep",
        "",
        f"Corpus `{inputs['corpus']}`; questions `{inputs['questions']['path']}` "
        f"({res['n_evaluated']} answerable questions scored); grid `{grid_source}`: "
        f"{len(res['factors'])} factors, {len(res['cells'])} cells, {len(res['runs'])} runs "
        f"(a cell re-runs only the runs its settings change). Settings are compared and chosen by "
        f"{_m(metric)} on these questions; paired bootstrap CIs with {res['bootstrap_resamples']} "
        f"resamples, seed {res['seed']}.",
        "",
        f"Wall time of the last session before this report: {s['wall_s']:.1f} s with "
        f"`{s['executor']}` ({s['workers']} workers); {phases}; {s['cells_run']} cells run, "
        f"{s['cells_reused']} reused from earlier "
        f"sessions ({len(res['sessions'])} session{'s' if len(res['sessions']) != 1 else ''}, "
        f"{sum(x['wall_s'] for x in res['sessions']):.1f} s in all).",
        "",
    ]


def _conclusions(res: Mapping[str, Any], metric: str) -> list[str]:
    """Which conclusions hold across the grid, how many comparisons exclude 0, and the
    defaults the grid would change."""
    n_comp = sum(
        1 for f in res["factors"] for lv in f["levels"] for e in lv["runs"].values() if e["affected"]
    )
    n_beyond = sum(
        1
        for f in res["factors"]
        for lv in f["levels"]
        for e in lv["runs"].values()
        if e["affected"] and _beyond(e["ci"])
    )
    return [
        "## Which conclusions hold across the grid",
        "",
        *_ordering_lines(res["orderings"], metric),
        "",
        "Per factor:",
        "",
        *[f"- {_factor_line(f, metric)}" for f in res["factors"]],
        "",
        f"- {n_comp} paired comparisons with the default were made; at a 95% level about "
        f"{n_comp / 20:.0f} would exclude 0 by chance alone, and {n_beyond} do. Read single "
        "differences with that in mind.",
        f"- {res['n_evaluated']} questions with silver-standard page labels: the CIs are wide, and "
        "the conclusions are exploratory, as in the study (§4.6).",
        "",
        "## Defaults the grid would change",
        "",
        "Chosen on the dev questions: per factor the level with the largest mean gain over the runs "
        "it changes (the default when none gains); the chosen levels together form the chosen cell.",
        "",
        *_changes(res, metric),
        "",
    ]


def _test_lines(res: Mapping[str, Any], metric: str) -> list[str]:
    """The test split's paired table (reported once), or that none was given."""
    if not res["test"]:
        return ["No test split was given (`--test`): the chosen settings are not yet confirmed.", ""]
    t = res["test"]
    lines = [
        "## Test split, reported once",
        "",
        f"`{t['questions']['path']}` ({t['n_evaluated']} answerable questions), evaluated once after "
        "the settings were chosen; no choice above used it.",
        "",
    ]
    against = "chosen" if res["chosen"].get("dev") else "default"
    lines += _paired_table(t["paired"], against, "default", metric)
    return lines + [""]


def _default_cell(res: Mapping[str, Any]) -> list[str]:
    """The default cell's metrics per run, and where every cell's outputs are."""
    lines = [
        "## Default cell",
        "",
        "| run | " + " | ".join(_m(k) for k in LABELS) + " |",
        "|---|" + "---|" * len(LABELS),
    ]
    for run, m in res["default"].items():
        lines.append(f"| {run} | " + " | ".join(f"{m[k]:.3f}" for k in LABELS) + " |")
    lines += [
        "",
        "Every cell's outputs (metrics.json, ranked.jsonl, TREC files, run.json) are in `cells/`; "
        "`sourcepage export cells/<cell> --out package.zip` packages one.",
        "",
    ]
    return lines
