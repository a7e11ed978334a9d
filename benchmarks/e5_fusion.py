"""Dev-split scores of multilingual-e5-small chunk vectors as a part of the default fusion
(README, "Section-aware ranking": the e5 rows).

    python benchmarks/e5_fusion.py STORE QUESTIONS.jsonl [--mean] [--methods M1,M2,…]

The e5 question vector is computed for the answer policy anyway, so an e5 chunk ranking
would cost a search one matrix product; what it costs is the index build (every chunk
encoded by e5 as well as MiniLM). Builds the ``dense:e5-small`` chunk index of the store's
raw text if it is missing, then prints page Hit@1, Hit@3, MRR and Recall@10 of each method
over the answerable questions. ``--mean`` replaces the e5 chunk vectors (in memory only)
by the normalised mean of the chunk's sentence vectors from the index's sentence table: a
chunk index for no extra encoding. Tune on dev only.
"""

from __future__ import annotations

import argparse

import numpy as np

from sourcepage.evaluation.metrics import hit_at, recall_at, reciprocal_rank
from sourcepage.evaluation.questions import read_questions
from sourcepage.retrieval import sentvec
from sourcepage.retrieval.index import build_indexes
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.search import Searcher

METHODS = (
    "sect:route:rrf:bm25+dense",
    "sect:route:rrf:bm25+dense+dense:e5-small",
    "sect:route:rrf:bm25+dense:e5-small",
)


def sentence_means(s: Searcher) -> None:
    """Swap the loaded e5 chunk vectors for their sentences' normalised mean vectors."""
    li = s.index(parse_method("dense:e5-small"))
    table = sentvec.load(s.store, "raw")
    if table is None:
        raise SystemExit(f"{s.store.path}: no current sentence table; run `sourcepage index` first")
    old = np.asarray(li.model.vectors)
    new = np.zeros_like(old)
    for i, c in enumerate(li.chunk_ids):
        vecs, found = table.lookup(sentvec.units(s.passage(c)))
        m = vecs[found].mean(0) if found.any() else old[i]
        new[i] = m / (np.linalg.norm(m) or 1.0)
    cos = float((old * new).sum(1).mean())
    print(f"mean cosine of e5 chunk vectors with their sentences' mean: {cos:.4f}")
    li.model.vectors = new


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("questions")
    ap.add_argument("--mean", action="store_true", help="e5 chunk vectors from the sentence table")
    ap.add_argument("--methods", default=",".join(METHODS))
    a = ap.parse_args()
    build_indexes(a.store, "raw", [parse_method("dense:e5-small")])
    s = Searcher(a.store, "raw")
    if a.mean:
        sentence_means(s)
    qs = [q for q in read_questions(a.questions) if q.evidence]
    for m in a.methods.split(","):
        runs = [[h.page_id for h in s.rank(q.question, m, k=20).hits] for q in qs]
        row = [
            np.mean([hit_at(r, q.evidence, 1) for r, q in zip(runs, qs, strict=True)]),
            np.mean([hit_at(r, q.evidence, 3) for r, q in zip(runs, qs, strict=True)]),
            np.mean([reciprocal_rank(r, q.evidence) for r, q in zip(runs, qs, strict=True)]),
            np.mean([recall_at(r, q.evidence, 10) for r, q in zip(runs, qs, strict=True)]),
        ]
        print(f"{m:45} " + " ".join(f"{v:.3f}" for v in row) + f"  ({len(qs)} questions)", flush=True)


if __name__ == "__main__":
    main()
