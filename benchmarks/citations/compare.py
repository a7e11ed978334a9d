"""The citation rule of ``sect:`` (a cited provision's pages first) against the same stage
without it, on the citation questions (README, "A cited provision first").

    python benchmarks/citations/compare.py STORE benchmarks/citations/dev.jsonl [--time]

Page Hit@1 / Hit@3 / MRR / Recall@10 over the questions, and each question's first labelled
rank under both. "Without" is ``sections.section_rank`` over the same routed base ranking,
which is what the stage ranked before the rule. ``--time`` also times the default's warm
ranking of the questions as written and with each citation replaced by "the provision"
(median and 95th percentile over five rounds after a first pass, one process).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time

from sourcepage.evaluation.metrics import hit_at, recall_at, reciprocal_rank
from sourcepage.evaluation.questions import read_questions
from sourcepage.retrieval.methods import default_method, parse_method
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.sections import section_rank


def first(ranked: list[str], gold: dict[str, int]) -> int | None:
    return next((i for i, p in enumerate(ranked, 1) if p in gold), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("questions")
    ap.add_argument("--time", action="store_true", help="time citing and plain rankings")
    a = ap.parse_args()
    s = Searcher(a.store, auto_build=False)
    method = parse_method(default_method())
    qs = [q for q in read_questions(a.questions) if q.answerability == "answerable" and q.evidence]
    runs: dict[str, list[list[str]]] = {"without": [], "with": []}
    for q in qs:
        base = s.ranked(method.parts[0], q.question, None, {})
        runs["without"].append([h.page_id for h in section_rank(s, q.question, base)])
        runs["with"].append(s.rank(q.question, method, k=None).pages())
        print(
            f"{q.id}  first labelled rank {first(runs['without'][-1], q.evidence)} -> "
            f"{first(runs['with'][-1], q.evidence)}  {q.question[:80]}"
        )
    n = len(qs)
    for name, rs in runs.items():
        h1 = sum(hit_at(r, q.evidence, 1) for r, q in zip(rs, qs, strict=True)) / n
        h3 = sum(hit_at(r, q.evidence, 3) for r, q in zip(rs, qs, strict=True)) / n
        mrr = sum(reciprocal_rank(r, q.evidence) for r, q in zip(rs, qs, strict=True)) / n
        r10 = sum(recall_at(r, q.evidence, 10) for r, q in zip(rs, qs, strict=True)) / n
        print(f"{name:8} ({n}) {h1:.3f} / {h3:.3f} / {mrr:.3f} / {r10:.3f}")
    if a.time:
        timings(Searcher(a.store, auto_build=False), [q.question for q in qs])


def timings(s: Searcher, questions: list[str]) -> None:
    plain = [
        re.sub(
            r"(?i)\b(ss?|sections?|articles?|art\.|clause|annex)\s+[\dIVX.]+(\s+and\s+\d+)?",
            "the provision",
            q,
        )
        for q in questions
    ]
    method = default_method()
    first = []
    for q in questions:
        t = time.perf_counter()
        s.rank(q, method, k=10)
        first.append((time.perf_counter() - t) * 1000)
    for q in plain:
        s.rank(q, method, k=10)
    print(f"citing, first time each: p50 {statistics.median(first):.1f} ms")
    for name, group in (("citing", questions), ("citation removed", plain)):
        ms = []
        for _ in range(5):
            for q in group:
                t = time.perf_counter()
                s.rank(q, method, k=10)
                ms.append((time.perf_counter() - t) * 1000)
        print(
            f"{name}: warm p50 {statistics.median(ms):.1f} ms, p95 {sorted(ms)[int(0.95 * len(ms))]:.1f} ms"
        )


if __name__ == "__main__":
    main()
