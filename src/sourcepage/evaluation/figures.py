"""The figures of report.md: Hit@3 by topic (the study's Figure 2) and the answerability
grid (small multiples on a shared scale)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sourcepage.evaluation.report import breakdown
from sourcepage.evaluation.summary import FUSION_MARK, is_fusion
from sourcepage.records import Question
from sourcepage.vocabulary import ANSWERABILITIES


def figures(
    out: Path,
    per_q: Sequence[Mapping[str, Any]],
    rows: Sequence[Mapping[str, Any]],
    qs: Sequence[Question],
    runs: Sequence[tuple[str, str]],
) -> list[str]:
    """Hit@3 by topic and method per text version (the study's Figure 2), with the value
    and the number of questions on the bars, and the answerability grid. Returns the PNG
    file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names: list[str] = []
    hit3 = breakdown(per_q, "topic", "hit@3")
    versions = list(dict.fromkeys(v for v, _ in runs))
    for v in versions:
        methods = [m for vv, m in runs if vv == v]
        topics = sorted({t for m in methods for t in hit3.get((v, m), {})})
        if not topics:
            continue
        counts = {t: max(hit3.get((v, m), {}).get(t, (0, 0))[1] for m in methods) for t in topics}
        fig, ax = plt.subplots(figsize=(max(6.4, 1.9 * len(topics)), 4.2), dpi=120)
        width = 0.8 / max(len(methods), 1)
        for i, m in enumerate(methods):
            ys = [hit3.get((v, m), {}).get(t, (0, 0))[0] for t in topics]
            bars = ax.bar([j + i * width for j in range(len(topics))], ys, width, label=m)
            ax.bar_label(bars, labels=[f"{y:.2f}" for y in ys], fontsize=7, padding=1)
        ax.set_xticks(
            [j + 0.4 - width / 2 for j in range(len(topics))],
            [f"{t}\n(n = {counts[t]})" for t in topics],
        )
        ax.set_ylim(0, 1.12)
        ax.set_ylabel("Hit@3 (page level)")
        ax.set_title(f"Hit@3 by topic and method — {v} text (n = answerable questions)", fontsize=10)
        ax.legend(
            fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=len(methods), frameon=False
        )
        fig.tight_layout()
        name = f"hit3_by_topic_{v}.png"
        fig.savefig(out / name, metadata={"Software": None})
        plt.close(fig)
        names.append(name)
    names.append(answerability_grid(out, per_q, runs))
    return names


def answerability_grid(out: Path, per_q: Sequence[Mapping[str, Any]], runs: Sequence[tuple[str, str]]) -> str:
    """Small multiples, one panel a run (rows: text versions, columns: methods), on one
    shared scale: each question's top page score as a percentile rank among the run's
    questions (0 = lowest, 1 = highest; ties share their mean rank), since BM25, LSA, dense
    and fusion scores have unrelated units and outliers. That is the scale AUROC reads.
    Points by question class with their n, and the class medians."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.stats import rankdata

    versions = list(dict.fromkeys(v for v, _ in runs))
    methods = list(dict.fromkeys(m for _, m in runs))
    fig, axes = plt.subplots(
        len(versions),
        len(methods),
        figsize=(1.9 + 2.1 * len(methods), 0.7 + 2.3 * len(versions)),
        dpi=120,
        sharey=True,
        squeeze=False,
    )
    labels = {"answerable": "ans", "unsupported": "unsup", "out_of_domain": "ood"}
    for r, v in enumerate(versions):
        for c, m in enumerate(methods):
            ax = axes[r][c]
            if (v, m) not in runs:
                ax.set_axis_off()
                continue
            rows = [
                x for x in per_q if x["text_version"] == v and x["method"] == m and x["top_score"] is not None
            ]
            ranks = rankdata([float(x["top_score"]) for x in rows]) if rows else []
            pct = [(r - 1) / max(len(rows) - 1, 1) for r in ranks]
            for k, cls in enumerate(ANSWERABILITIES):
                ys = sorted(p for p, x in zip(pct, rows, strict=True) if x["answerability"] == cls)
                xs = [k + 0.18 * ((i % 5) - 2) / 2 for i in range(len(ys))]
                ax.scatter(xs, ys, s=9, alpha=0.7)
                if ys:
                    ax.hlines(ys[len(ys) // 2], k - 0.3, k + 0.3, color="black", linewidth=1.2)
            n = {cls: sum(x["answerability"] == cls for x in rows) for cls in ANSWERABILITIES}
            ax.set_xticks(range(3), [f"{labels[c]}\nn={n[c]}" for c in ANSWERABILITIES], fontsize=7)
            ax.set_ylim(-0.05, 1.05)
            mark = f" {FUSION_MARK}" if is_fusion(m) else ""
            ax.set_title(f"{v} · {m}{mark}", fontsize=8)
            ax.tick_params(axis="y", labelsize=7)
        axes[r][0].set_ylabel("top page score, percentile\nrank in its run", fontsize=7)
    fig.suptitle(
        "Answerability: top page score by question class (bar = median; "
        f"{FUSION_MARK} fusion scores are rank agreement, not calibrated)",
        fontsize=9,
    )
    fig.tight_layout()
    name = "answerability_scores.png"
    fig.savefig(out / name, metadata={"Software": None})
    plt.close(fig)
    return name
