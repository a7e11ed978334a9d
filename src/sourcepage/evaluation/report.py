"""report.md: the tables a person reads after ``sourcepage eval``, written from the
runner's result (``evaluation.runner.RunResult``), a step after the runner. One writer
(``write_sections``) for both layouts: a questions benchmark's (``write_report``) and a
BEIR folder's (``write_beir_report``)."""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sourcepage.evaluation.by_field import field_tables
from sourcepage.evaluation.summary import FUSION_MARK, glossary, is_fusion, quotes_section, summary_lines
from sourcepage.records import Question
from sourcepage.store.files import write_text
from sourcepage.vocabulary import ANSWERABILITIES, NEGATIVES, TABLE_METRICS

if TYPE_CHECKING:
    from sourcepage.evaluation.runner import RunResult


def _f(x: Any, nd: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{nd}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[int] = ()) -> str:
    """A Markdown table; the columns numbered in ``right`` are right-aligned."""
    rule = "|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|"
    lines = ["| " + " | ".join(header) + " |", rule]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def breakdown(
    per_q: Sequence[Mapping[str, Any]], key: str, metric: str
) -> dict[tuple[str, str], dict[str, Any]]:
    """(version method) → group → (mean metric, n) over answerable questions."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in per_q:
        if metric not in r:
            continue
        out.setdefault((r["text_version"], r["method"]), {}).setdefault(r[key], []).append(r[metric])
    return {k: {g: (_mean(v), len(v)) for g, v in groups.items()} for k, groups in out.items()}


def write_sections(out: Path, parts: Sequence[str]) -> Path:
    """Write report.md from its sections (Markdown), one blank line around every heading."""
    text = re.sub(r"\n+(#+ )", r"\n\n\1", "".join(parts))  # a blank line before every heading
    text = re.sub(r"(#+ [^\n]*)\n+", r"\1\n\n", text)  # and after it
    return write_text(out / "report.md", re.sub(r"\n{3,}", "\n\n", text))


def write_report(result: RunResult, qs: Sequence[Question]) -> Path:
    """Write report.md of a questions benchmark: headline table, CIs, statistics,
    breakdowns, failures, figures (``qs``: the question set the result ranked)."""
    metrics, stats, per_q, runs = result.metrics, result.stats, result.per_question, result.runs
    support, run_info = result.support, result.provenance
    parts = [
        _opening(metrics, stats, support),
        _page_level_section(metrics),
        _document_level_section(metrics),
        _ci_section(metrics, stats),
        _paired_section(stats),
        _breakdown_sections(per_q, runs),
        miss_section(per_q, runs),
        _field_sections(per_q, runs),
    ]
    if support and support["versions"]:
        parts.append(support_section(support))
    if support and support.get("search"):  # what the search decides, with or without the study
        parts.append(quotes_section(support))
    parts += [
        _failures_section(per_q, qs, runs),
        ratings_section(qs),
        "\n## Figures\n\n" + "".join(f"![{f}]({f})\n\n" for f in result.figures),
        _reproducibility(run_info),
    ]
    return write_sections(result.out, parts)


def write_beir_report(result: RunResult, warnings: Sequence[str] = ()) -> Path:
    """Write report.md of a BEIR run: nDCG@10 with its CI, MRR@10, R@100, Hit@10 and
    latency per run, the paired comparisons, the store and the ingest warnings."""
    metrics, stats, info = result.metrics, result.stats, result.provenance
    q = metrics["queries"]
    rows = []
    for r in metrics["runs"]:
        lo, hi = stats["ci"][f"{r['text_version']} {r['method']}"]["ndcg_cut_10"][1:]
        rows.append(
            [r["text_version"], r["method"], _f(r["ndcg_cut_10"]), f"[{_f(lo)}, {_f(hi)}]", _f(r["mrr@10"])]
            + [_f(r["recall@100"]), _f(r["hit@10"]), _f(r["query_ms"]["p50"], 2)]
        )
    parts = [
        f"# BEIR evaluation — {metrics['dataset']} ({metrics['split']})\n",
        f"{q['evaluated']} queries evaluated; {metrics['skipped_queries']} of the {q['in_qrels']} "
        f"queries in the qrels skipped ({q['skipped_no_relevant']} without a relevant document, "
        f"{q['skipped_no_text']} without a text in queries.jsonl). Each BEIR document is one page. "
        f"Metrics over the first {metrics['depth']} ranks in trec_eval order; nDCG@10 is graded "
        "(linear gains, trec_eval `ndcg_cut.10` = BEIR NDCG@10). 95% bootstrap CIs "
        f"({stats['bootstrap_resamples']} query resamples, seed {stats['seed']}).\n\n",
        _table(
            ["version", "method", "nDCG@10", "95% CI", "MRR@10", "R@100", "Hit@10", "ms p50"],
            rows,
            right=(2, 4, 5, 6, 7),
        ),
    ]
    head = ["a", "b", "Δ", "95% CI", "Wilcoxon p (Holm)", "rank-biserial", "McNemar p (Holm)"]
    for fam in stats["pairwise"]:
        rows = [
            [c["a"], c["b"], _f(c["mean_diff"]), f"[{_f(c['ci_low'])}, {_f(c['ci_high'])}]", _f(c["p_holm"])]
            + [_f(c["rank_biserial"]), _f(c.get("mcnemar_p_holm"))]
            for c in fam["comparisons"]
        ]
        parts += [
            f"\n## Paired comparison: {fam['family']} (ΔnDCG@10; McNemar on Hit@10)\n",
            _table(head, rows, right=(2, 4, 5, 6)),
        ]
    ing = info["ingest"]
    parts.append(
        f"\nStore `{info['store']}`: {ing['documents']} documents ({ing['written']} written, "
        f"{ing['unchanged']} unchanged, {ing['duplicates']} duplicate ids, {ing['empty']} empty). "
        "TREC files in `trec/` use the original BEIR ids (whitespace percent-encoded).\n"
    )
    if warnings:
        parts += ["\nIngest warnings:\n", *(f"- {w}\n" for w in warnings)]
    return write_sections(result.out, parts)


def _opening(metrics: Mapping[str, Any], stats: Mapping[str, Any], support: Mapping[str, Any] | None) -> str:
    """The title, the summary lines, the question counts and the glossary."""
    c = metrics["questions"]
    return (
        "# sourcepage evaluation report\n"
        + "".join(f"{line}  \n" for line in summary_lines(metrics, stats, support))
        + f"\nQuestions: {c['answerable']} answerable, {c['unsupported']} unsupported (near-domain), "
        f"{c['out_of_domain']} out-of-domain. The relevance labels are a silver standard: read the "
        "results as exploratory, CIs first.\n" + glossary()
    )


def _page_level_section(metrics: Mapping[str, Any]) -> str:
    """The headline table: page-level retrieval per run (the study's Table 4 layout)."""
    head = ["version", "method", "Hit@1", "Hit@3", "Hit@5", "Hit@10", "R@10", "MRR", "nDCG@10"]
    head += ["doc Hit@3", "AUROC broad", "AUROC near", "AUROC ood", "ms p50"]
    rows = [
        [
            r["text_version"],
            r["method"],
            *(_f(r[k]) for k in TABLE_METRICS),
            *(_f(r["auroc"][k]) + _mark(r["method"]) for k in NEGATIVES),
            _f(r["query_ms"]["p50"], 2),
        ]
        for r in metrics["runs"]
    ]
    fused = any(is_fusion(r["method"]) for r in metrics["runs"])
    note = f"\n{FUSION_MARK} not a calibrated score (see “How to read this report”).\n" if fused else ""
    return "\n## Page-level retrieval (Table 4 layout)\n" + _table(head, rows) + note


def _document_level_section(metrics: Mapping[str, Any]) -> str:
    """Document Hit@k beside page Hit@k: what the document-level view hides."""
    head = ["version", "method", "doc Hit@1", "page Hit@1", "doc Hit@3", "page Hit@3"]
    head += ["doc Hit@10", "page Hit@10"]
    keys = ("doc_hit@1", "hit@1", "doc_hit@3", "hit@3", "doc_hit@10", "hit@10")
    rows = [[r["text_version"], r["method"], *(_f(r[k]) for k in keys)] for r in metrics["runs"]]
    return (
        "\n## Document level against page level\n"
        "A document hit counts when any page of a labelled document is among the first k distinct "
        "documents; the gap to page Hit@k is evidence the document-level view hides.\n\n" + _table(head, rows)
    )


def _ci_section(metrics: Mapping[str, Any], stats: Mapping[str, Any]) -> str:
    """The bootstrap CIs of each run's headline metrics and AUROCs."""
    head = ["version", "method", "MRR [CI]", "Hit@3 [CI]", "nDCG@10 [CI]", "graded nDCG@10 [CI]"]
    head += ["AUROC broad [CI]", "AUROC near [CI]", "margin AUROC broad"]
    margin = {(r["text_version"], r["method"]): r["auroc_margin"]["broad"] for r in metrics["runs"]}
    rows = []
    for (v, m), ci in ((tuple(k.split(" ", 1)), x) for k, x in stats["ci"].items()):
        rows.append(
            [
                v,
                m,
                *(_ci(ci[k]) for k in ("mrr", "hit@3", "ndcg@10", "ndcg_graded@10")),
                *(
                    f"{_f(ci['auroc'][k][0])}{_mark(m)} [{_f(ci['auroc'][k][1])}, {_f(ci['auroc'][k][2])}]"
                    for k in ("broad", "near_domain")
                ),
                _f(margin[(v, m)]),
            ]
        )
    return (
        f"\n## 95% bootstrap CIs ({stats['bootstrap_resamples']} question-level resamples, seed "
        f"{stats['seed']})\n" + _table(head, rows)
    )


def _paired_section(stats: Mapping[str, Any]) -> str:
    """Friedman tests, then the planned pairwise comparisons (Wilcoxon + Holm, McNemar)."""
    parts = [
        "\n## Paired statistics on reciprocal rank\n",
        "Friedman tests across conditions; planned pairwise Wilcoxon signed-rank tests with Holm "
        "correction within each family; exact McNemar on Hit@3; rank-biserial effect sizes "
        "(positive: the first condition ranks the evidence earlier). Exploratory.\n\n",
    ]
    if stats["friedman"]:
        rows = [[f["family"], _f(f["statistic"]), _f(f["p"]), f["k"], f["n"]] for f in stats["friedman"]]
        parts += [_table(["family", "χ²", "p", "conditions", "questions"], rows), "\n"]
    rows = [_comparison_row(fam["family"], cmp) for fam in stats["pairwise"] for cmp in fam["comparisons"]]
    if rows:
        head = ["family", "comparison", "ΔMRR", "95% CI", "Wilcoxon p", "Holm p", "rank-biserial"]
        head += ["McNemar b01/b10 (Hit@3)", "McNemar p", "reading"]
        parts.append(_table(head, rows))
    return "".join(parts)


def _comparison_row(family: str, cmp: Mapping[str, Any]) -> list[str]:
    """One planned comparison: ΔMRR with its CI, the p-values, the effect size, a reading."""
    p = cmp["p_holm"]
    verdict = (
        "exploratory difference after correction"
        if p is not None and p < 0.05
        else "no evidence of a paired difference"
    )
    return [
        family,
        f"{cmp['a']} vs {cmp['b']}",
        _f(cmp["mean_diff"]),
        f"{_f(cmp['ci_low'])} to {_f(cmp['ci_high'])}",
        _f(cmp["p"]),
        _f(p),
        _f(cmp["rank_biserial"]),
        f"{cmp.get('mcnemar_b01', '–')}/{cmp.get('mcnemar_b10', '–')}",
        _f(cmp.get("mcnemar_p")),
        verdict,
    ]


def _breakdown_sections(per_q: Sequence[Mapping[str, Any]], runs: Sequence[tuple[str, str]]) -> str:
    """Hit@3 / MRR by topic, by question type and (when questions name one) by jurisdiction."""
    by = [("topic", "topic"), ("type", "question type")]
    if any(r.get("named_jurisdiction", "none named") != "none named" for r in per_q):
        by.append(("named_jurisdiction", "jurisdiction named in the question"))
    parts = []
    for key, title in by:
        h3 = breakdown(per_q, key, "hit@3")
        rr = breakdown(per_q, key, "mrr")
        groups = sorted({g for d in h3.values() for g in d})
        rows = [[v, m, *(_cell(h3[(v, m)], rr[(v, m)], g) for g in groups)] for v, m in runs if (v, m) in h3]
        parts.append(f"\n## By {title}: Hit@3 / MRR (n)\n\n" + _table(["version", "method", *groups], rows))
    return "".join(parts)


def _cell(h3: Mapping[str, Any], rr: Mapping[str, Any], group: str) -> str:
    """One run's Hit@3 / MRR (n) in one group."""
    hit, n = h3.get(group, (math.nan, 0))[0], h3.get(group, (0, 0))[1]
    return f"{_f(hit, 2)} / {_f(rr.get(group, (math.nan, 0))[0], 2)} ({n})"


def _field_sections(per_q: Sequence[Mapping[str, Any]], runs: Sequence[tuple[str, str]]) -> str:
    """Hit@3 / MRR by the construction question sets' fields (phase, work package)."""
    return "".join(
        f"\n## By {title}: Hit@3 / MRR\n\nOver each group's answerable questions; a question "
        f"counts in every {title} it lists.\n\n" + _table(head, rows)
        for title, head, rows in field_tables(per_q, runs)
    )


def _failures_section(
    per_q: Sequence[Mapping[str, Any]], qs: Sequence[Question], runs: Sequence[tuple[str, str]]
) -> str:
    """Per run, the answerable questions with no labelled page in the top 3 (the worst ten)."""
    qtext = {q.id: q for q in qs}
    parts = [
        "\n## Failures: the worst answerable questions per run\n\n"
        'First relevant rank ">20": no labelled page in the top 20.\n'
    ]
    head = ["id", "topic", "type", "question", "first relevant rank", "ranked first instead"]
    for v, m in runs:
        fails = [
            r
            for r in per_q
            if r["text_version"] == v
            and r["method"] == m
            and "mrr" in r
            and (r["first_relevant_rank"] is None or r["first_relevant_rank"] > 3)
        ]
        fails.sort(key=lambda r: (r["mrr"], r["question_id"]))
        parts.append(f"\n### {v} · {m}: questions with no labelled page in the top 3: {len(fails)}\n\n")
        rows = [
            [
                r["question_id"],
                r["topic"],
                r["type"],
                textwrap.shorten(qtext[r["question_id"]].question, 100, placeholder=" …").replace("|", "/"),
                r["first_relevant_rank"] or ">20",
                r["top_page"] or "–",
            ]
            for r in fails[:10]
        ]
        if rows:
            parts.append(_table(head, rows))
    return "".join(parts)


def _reproducibility(run_info: Mapping[str, Any]) -> str:
    return (
        "## Reproducibility\n\n"
        f"Seed {run_info['seed']}; inputs and package versions with checksums in run.json; "
        "every number above is recomputable from ranked.jsonl and the question set; TREC run "
        "and qrels files are in trec/ for ranx, ir_measures or trec_eval. Total time "
        f"{run_info['timings']['total_s']:.1f} s.\n"
    )


def ratings_section(qs: Sequence[Question]) -> str:
    """The means of the reviewers' ratings (1-5) a question set carries (``ratings``, kept
    when reviewed referrals are exported as questions); '' when no question has any."""
    by: dict[str, list[int]] = {}
    rated = 0
    for q in qs:
        got = q.extra.get("ratings")
        if not isinstance(got, Mapping):
            continue
        rated += 1
        for name, v in got.items():
            if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 5:
                by.setdefault(str(name), []).append(v)
    if not by:
        return ""
    rows = [[name, len(v), f"{_mean(v):.2f}", min(v), max(v)] for name, v in sorted(by.items())]
    return (
        "\n## Reviewer ratings\n\n"
        f"{rated} of {len(qs)} questions carry a reviewer's ratings of the system's draft answer "
        "(1 poor - 5 excellent).\n\n" + _table(["rating", "questions", "mean", "min", "max"], rows)
    )


def miss_section(per_q: Sequence[Mapping[str, Any]], runs: Sequence[tuple[str, str]]) -> str:
    """Rank-1 misses by kind (``metrics.miss_kind``) per run and question type, so the next
    change is aimed: the page next to a labelled one, another page of the right document,
    or another document."""
    from sourcepage.evaluation.metrics import MISS_KINDS

    rows = []
    for v, m in runs:
        mine = [r for r in per_q if r["text_version"] == v and r["method"] == m and "mrr" in r]
        for t in ["all", *sorted({r["type"] for r in mine})]:
            group = [r for r in mine if t == "all" or r["type"] == t]
            kinds = [r.get("miss_kind") for r in group]
            rows.append(
                [
                    v,
                    m,
                    t,
                    len(group),
                    sum(k is not None for k in kinds),
                    *(sum(k == kind for k in kinds) for kind in MISS_KINDS[:3]),
                ]
            )
    if not rows:
        return ""
    return "\n## Rank-1 misses by kind and question type\n\n" + _table(
        ["version", "method", "type", "n", "misses", *MISS_KINDS[:3]], rows
    )


def _mark(method: str) -> str:
    """The rank-fusion mark on an AUROC (not a calibrated score)."""
    return FUSION_MARK if is_fusion(method) else ""


def _ci(x: Sequence[float]) -> str:
    return f"{_f(x[0])} [{_f(x[1])}, {_f(x[2])}]"


def _pct(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.0f}%"


def _shares_row(name: str, d: Mapping[str, Any]) -> list[str]:
    return [
        name,
        *(
            f"{_pct(d[c]['answer'])} / {_pct(d[c]['review'])} / {_pct(d[c]['refuse'])}"
            for c in ANSWERABILITIES
        ),
    ]


def _risk_rows(curve: Sequence[Sequence[float]], at: Sequence[float] = (0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)):
    """The risk–coverage curve at a few coverages (the first point reaching each)."""
    return [[f"{c:.0%}", next((f"{r:.1%}" for cv, r in curve if cv >= c - 1e-9), "–")] for c in at]


def support_section(support: Mapping[str, Any]) -> str:
    """The answerability section: held-out folds, the shipped default policy as it is,
    risk–coverage, and the answer-point coverage of the quoted sentences."""
    parts = [
        "\n## Does the corpus support an answer?\n\n",
        f"Held out: stratified {support['folds']}-fold cross-validation (seed {support['seed']}); the "
        "classifier and every threshold are fitted on the other folds. Thresholds are asymmetric: "
        f"at most {support['max_answerable_refused']:.0%} of answerable training questions refused, no "
        "unsupported or out-of-domain training question answered; in between, review. Beside it, "
        "what the search decides: every question of every run of the version through the one search "
        "pipeline (`sourcepage search` with the store's policy — the shipped default unless calibrated, "
        "on the benchmarks' dev splits in-sample —, its jurisdiction rules and the quote gate) from the "
        "run's own ranking. An AUROC below 0.5 means the feature is higher for the negatives. Cells: "
        "answer / review / refuse.\n",
    ]
    for version, e in support["versions"].items():
        parts.append(f"\n### {version}: {e['sparse']} + {e['semantic']}\n\n")
        rows = [["held-out classifier", *(_ci(e["classifier_auroc"][k]) for k in NEGATIVES)]]
        searched = {
            k.split(" ", 1)[1]: v for k, v in support.get("search", {}).items() if k.split(" ")[0] == version
        }
        rows += [[f"search: {m}", *(_f(v["auroc"][k]) for k in NEGATIVES)] for m, v in searched.items()]
        rows += [[f, *(_ci(v[k]) for k in NEGATIVES)] for f, v in e["feature_auroc"].items()]
        parts.append(_table(["P(supported) / feature", "AUROC broad", "AUROC near", "AUROC ood"], rows))
        d = e["classifier_decisions"]
        rows = [_shares_row("held-out classifier", d)]
        rows += [_shares_row(f"search: {m}", v["decisions"]) for m, v in searched.items()]
        for m, sm in e["single_method"].items():
            rows.append(
                [
                    f"{m}{_mark(m)} top score: answer / refuse",
                    *(f"{_pct(sm[c]['answer'])} / {_pct(sm[c]['refuse'])}" for c in ANSWERABILITIES),
                ]
            )
        head = [f"{c} (n={d[c]['n']})" for c in ANSWERABILITIES]
        parts.append("\n" + _table(["policy", *head], rows))
        parts.append(
            f"\nHeld out, answerable refused: {', '.join(d['answerable_refused']) or 'none'}; negatives "
            f"answered: {', '.join(d['unsupported_answered']) or 'none'}.\n"
        )
        for m, v in searched.items():
            c = v["decisions"]
            parts.append(
                f"Search, {m}: answerable refused: {', '.join(c['answerable_refused']) or 'none'}; "
                f"negatives answered: {', '.join(c['unsupported_answered']) or 'none'}.\n"
            )
        curves = [("held-out classifier", e["risk_coverage"])] + [
            (f"search: {m}", v["risk_coverage"]) for m, v in searched.items() if v["risk_coverage"]
        ]
        rc = list(zip(*(_risk_rows(cv) for _, cv in curves), strict=True))
        parts.append(
            "\nRisk–coverage (answering the most probable first; risk = share of the answered "
            "questions that the documents do not answer):\n\n"
            + _table(
                ["coverage", *(f"risk, {n}" for n, _ in curves)], [[r[0][0], *(x[1] for x in r)] for r in rc]
            )
        )
    ap = support.get("answer_points") or {}
    if ap:
        parts.append(
            "\n### Answer points covered by the quoted sentences\n\nThe quotes the search gives for each "
            "run (none for a refusal) against each answerable question's `answer_points`: "
            "a point counts as covered when most of its words (idf-weighted, stemmed) and all its numbers "
            "are quoted.\n\n"
        )
        parts.append(
            _table(
                ["run", "questions", "mean share of points covered", "all points covered"],
                [
                    [k, v["questions"], _pct(v["mean_points_covered"]), _pct(v["all_points_covered"])]
                    for k, v in ap.items()
                ],
            )
        )
    return "".join(parts)
