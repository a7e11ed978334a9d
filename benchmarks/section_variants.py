"""Dev-split scores of the section-aware stage's variants (README, "Section-aware ranking").

    python benchmarks/section_variants.py STORE QUESTIONS.jsonl [--base route:rrf:bm25+dense]

Ranks each answerable question once with the base method (every page), then reorders that
ranking with each variant of ``retrieval.sections.SectionSettings`` and prints page Hit@1,
Hit@3, MRR and Recall@10 per variant. Tune on dev only.
"""

from __future__ import annotations

import argparse
import sys

from sourcepage.evaluation.metrics import hit_at, recall_at, reciprocal_rank
from sourcepage.evaluation.questions import read_questions
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.sections import SectionSettings, section_rank

ALL = ("contents", "index", "amendments", "change_table", "glossary")
NO_GLOSSARY = ("contents", "index", "amendments", "change_table")
VARIANTS: dict[str, SectionSettings | None] = {
    "base": None,
    "demote kinds (no glossary)": SectionSettings(0.0, 0.0, NO_GLOSSARY),
    "demote kinds (all five)": SectionSettings(0.0, 0.0, ALL),
    "headings w=0.25": SectionSettings(0.25, 0.0, ()),
    "headings w=0.5": SectionSettings(0.5, 0.0, ()),
    "headings w=1.0": SectionSettings(1.0, 0.0, ()),
    "neighbours a=0.1": SectionSettings(0.0, 0.1, ()),
    "neighbours a=0.25": SectionSettings(0.0, 0.25, ()),
    "headings w=0.05": SectionSettings(0.05, 0.0, ()),
    "headings w=0.1": SectionSettings(0.1, 0.0, ()),
    "neighbours a=0.05": SectionSettings(0.0, 0.05, ()),
    "headings 0.05 + demote all five": SectionSettings(0.05, 0.0, ALL),
    "headings 0.25 + neighbours 0.1 + demote": SectionSettings(0.25, 0.1, NO_GLOSSARY),
    "section index w=0.1": SectionSettings(0.0, 0.0, (), 0.1),
    "section index w=0.25": SectionSettings(0.0, 0.0, (), 0.25),
    "section index w=0.5": SectionSettings(0.0, 0.0, (), 0.5),
    "section index w=1.0": SectionSettings(0.0, 0.0, (), 1.0),
    "section index 0.25 + demote all five": SectionSettings(0.0, 0.0, ALL, 0.25),
    "section 0.25 + neighbours 0.1 + demote all five": SectionSettings(0.0, 0.1, ALL, 0.25),
    "section 0.25 + demote all five + recitals": SectionSettings(0.0, 0.0, (*ALL, "recitals"), 0.25),
    "section 0.1 + neighbours 0.1 + demote all five": SectionSettings(0.0, 0.1, ALL, 0.1),
    "section 0.25 + neighbours 0.05 + demote all five": SectionSettings(0.0, 0.05, ALL, 0.25),
    "headings 0.1 + section 0.25 + neighbours 0.1 + demote": SectionSettings(0.1, 0.1, ALL, 0.25),
    "headings 0.5 + demote": SectionSettings(0.5, 0.0, NO_GLOSSARY),
    "headings 0.25 + demote": SectionSettings(0.25, 0.0, NO_GLOSSARY),
    # 2026-12-06, sixth session: sections cut at the headings within a page (spans)
    "DEFAULT (whole pages, main section)": SectionSettings(),
    "spans, main section": SectionSettings(units="spans", credit="dominant"),
    "spans, share-weighted": SectionSettings(units="spans", credit="share"),
    "spans, best section holding >= 1/4": SectionSettings(units="spans", credit="max"),
    "spans, best section held": SectionSettings(units="spans", credit="any"),
    "spans, main section, w=0.5": SectionSettings(section_weight=0.5, units="spans", credit="dominant"),
}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("questions")
    ap.add_argument("--base", default="route:rrf:bm25+dense")
    ap.add_argument("--only", default="", help="variants whose name holds this text (and base)")
    a = ap.parse_args(argv)
    s = Searcher(a.store, auto_build=False)
    qs = [q for q in read_questions(a.questions) if q.answerability == "answerable" and q.evidence]
    bases = [(q, s.rank(q.question, a.base, k=None).hits) for q in qs]
    print(f"{a.questions}: {len(qs)} answerable, base {a.base}")
    print(f"{'variant':44} {'Hit@1':>6} {'Hit@3':>6} {'MRR':>6} {'R@10':>6}")
    for name, v in VARIANTS.items():
        if a.only and v is not None and a.only not in name:
            continue
        h1 = h3 = mrr = r10 = 0.0
        for q, hits in bases:
            ranked = [h.page_id for h in (hits if v is None else section_rank(s, q.question, hits, v))]
            h1 += hit_at(ranked, q.evidence, 1)
            h3 += hit_at(ranked, q.evidence, 3)
            mrr += reciprocal_rank(ranked, q.evidence)
            r10 += recall_at(ranked, q.evidence, 10)
        n = len(bases)
        print(f"{name:44} {h1 / n:6.3f} {h3 / n:6.3f} {mrr / n:6.3f} {r10 / n:6.3f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
