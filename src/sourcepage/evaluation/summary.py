"""The top of report.md: a five-line summary a person reads in a minute, and the
definition of every column and feature the report uses.

The summary names the best run by MRR (with its bootstrap CI), the paired differences
that survive Holm correction, the policy that refuses the most unsupported questions on
held-out folds, how the quotes of answered questions fare against the evidence, and
what to read with care (rank-fusion AUROC, silver labels, sample size).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sourcepage.retrieval.methods import has_flag
from sourcepage.support.features import FEATURE_WORDS

#: report column → its definition
COLUMNS: dict[str, str] = {
    "Hit@k": "share of answerable questions with a labelled page among the first k unique pages",
    "R@10": "recall at 10: share of a question's labelled pages among the first 10, averaged",
    "MRR": "mean reciprocal rank of the first labelled page (0 when none is in the first 20)",
    "nDCG@10": "normalised discounted cumulative gain at 10, binary gains (grade ≥ 1); graded: gains 1 and 2",
    "doc Hit@k": "a labelled page's document among the first k distinct documents",
    "AUROC broad / near / ood": (
        "how well the top page score separates answerable questions from all negatives / from the "
        "unsupported (near-domain) ones / from the out-of-domain ones; 0.5 = chance. Margin AUROC "
        "uses the top-1 minus top-2 score instead"
    ),
    "ms p50": (
        "median time to rank one question in milliseconds, after one untimed warm-up query "
        "(ranking only: no index loading, no decision)"
    ),
    "ΔMRR, 95% CI": "paired mean difference of reciprocal rank (first minus second) with a bootstrap CI",
    "Wilcoxon p / Holm p": (
        "paired signed-rank test on reciprocal rank; Holm p is corrected for the comparisons of its family"
    ),
    "rank-biserial": "effect size of the Wilcoxon test, −1 to 1 (positive: the first ranks evidence earlier)",
    "McNemar b01/b10": "questions with a Hit@3 for only the second / only the first condition; exact test",
    "answer / review / refuse": "share of a question class the policy answers, refers or refuses (held-out)",
}

#: the mark on AUROCs of rank-fusion runs, and what it means
FUSION_MARK = "†"
FUSION_NOTE = (
    f"{FUSION_MARK} Rank fusion (rrf:…) scores are sums of 1/(60 + rank): they lie in a narrow band "
    "(about 0.016–0.033) with many ties and say how well the methods agree, not how likely an answer "
    "is. Their AUROC is not that of a calibrated score: do not compare it with the other methods'."
)


def is_fusion(method: str) -> bool:
    """Whether the method's own kind fuses ranks (its scores are not calibrated)."""
    return has_flag(method, "fused")


def _ci(x: Sequence[float]) -> str:
    return f"{x[0]:.3f} [95% CI {x[1]:.3f}, {x[2]:.3f}]"


def _pct(x: float | None) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.0f}%"


def summary_lines(
    metrics: Mapping[str, Any], stats: Mapping[str, Any], support: Mapping[str, Any] | None
) -> list[str]:
    """Five lines: best run, Holm survivors, best refuser, quotes, caveats."""
    runs = metrics["runs"]
    best = max(runs, key=lambda r: (r["mrr"], r["hit@3"]))
    key = f"{best['text_version']} {best['method']}"
    ci = stats["ci"].get(key, {})
    n = stats.get("n_answerable", metrics["questions"].get("answerable"))
    lines = [
        f"**Best retrieval:** {best['method']} on {best['text_version']} text — MRR "
        + (_ci(ci["mrr"]) if "mrr" in ci else f"{best['mrr']:.3f}")
        + f", Hit@3 {best['hit@3']:.3f} over {n} answerable questions."
    ]
    survivors = [
        f"{c['a']} vs {c['b']} ({fam['family']}, ΔMRR {c['mean_diff']:+.3f}, Holm p {c['p_holm']:.3f})"
        for fam in stats["pairwise"]
        for c in fam["comparisons"]
        if c.get("p_holm") is not None and c["p_holm"] < 0.05
    ]
    total = sum(len(f["comparisons"]) for f in stats["pairwise"])
    lines.append(
        "**Survives Holm correction:** " + "; ".join(survivors) + "."
        if survivors
        else f"**Survives Holm correction:** none of the {total} paired comparisons (p < 0.05)."
    )
    lines.append(_refuser_line(support))
    lines.append(_quotes_line(support))
    lines.append(
        f"**Read with care:** rank-fusion AUROC ({FUSION_MARK}) is not a calibrated score; the labels "
        f"are a silver standard; with {n} answerable questions the CIs are wide."
    )
    return lines


def _refuser_line(support: Mapping[str, Any] | None) -> str:
    if not support or not support.get("versions"):
        return "**Refuses best:** not measured (the design has no sparse + semantic pair)."
    cands = []
    for version, e in support["versions"].items():
        d = e["classifier_decisions"]
        cands.append((version, f"the {e['sparse']} + {e['semantic']} classifier", d))
        for m, sm in e["single_method"].items():
            cands.append((version, f"{m}'s top-score threshold", sm))

    def score(c: tuple[str, str, Mapping[str, Any]]) -> tuple[float, float]:
        d = c[2]
        return (d["unsupported"]["refuse"], -d["answerable"]["refuse"])

    version, name, d = max(cands, key=score)
    return (
        f"**Refuses best:** {name} on {version} text refuses {_pct(d['unsupported']['refuse'])} of "
        f"unsupported and {_pct(d['out_of_domain']['refuse'])} of out-of-domain questions, and wrongly "
        f"{_pct(d['answerable']['refuse'])} of answerable ones (held-out folds)."
    )


def _quotes_line(support: Mapping[str, Any] | None) -> str:
    runs = (support or {}).get("search", {})
    if not runs:
        return "**Quotes:** not measured."
    parts = [
        f"{run}: {q['counts']['answer']} answers, {_pct(q['answers_with_key_fact'])} of those checked quote "
        "the key fact"
        for run, q in runs.items()
    ]
    return (
        "**Quotes:** as the search gives them, "
        + "; ".join(parts)
        + " (see “Do the quotes state the answer?”)."
    )


def glossary() -> str:
    """The 'How to read this report' section: every column and feature, defined."""
    cols = "".join(f"- **{k}**: {v}.\n" for k, v in COLUMNS.items())
    feats = "".join(f"- `{k}`: {v}.\n" for k, v in FEATURE_WORDS.items())
    return (
        "\n## How to read this report\n\n"
        "Retrieval metrics are means over the answerable questions, on unique pages after chunk hits "
        "are collapsed to pages, over the first 20 ranks.\n\n"
        f"{cols}\n{FUSION_NOTE}\n\n"
        "Answerability features (the classifier of “Does the corpus support an answer?”; a = the "
        "sparse ranking, b = the semantic one):\n\n"
        f"{feats}"
    )


def quotes_section(support: Mapping[str, Any]) -> str:
    """'Do the quotes state the answer?': what the search decides and quotes for every run
    (``evaluation.decisions``: the one search pipeline), against the labelled excerpts."""
    parts = [
        "\n## Do the quotes state the answer?\n\n",
        "Every question of every run goes through the search pipeline as `sourcepage search` runs it "
        "(the store's policy, the jurisdiction rules, the quote gate: an `answer` stands only on a quote "
        "that states it), from the run's own ranking. A quote **contains the key fact** when it holds "
        "at least 60% of the content words of one of the question's labelled evidence excerpts.\n\n",
        "| run | answer / review / refuse | answers quoting the key fact | negatives answered | "
        "answerable refused |\n|---|---|---|---|---|\n",
    ]
    for run, q in support.get("search", {}).items():
        c, d = q["counts"], q["decisions"]
        parts.append(
            f"| {run} | {c['answer']} / {c['review']} / {c['refuse']} | {_pct(q['answers_with_key_fact'])} "
            f"(n={q['answers_checked']}) | {', '.join(d['unsupported_answered']) or 'none'} | "
            f"{', '.join(d['answerable_refused']) or 'none'} |\n"
        )
    return "".join(parts)
