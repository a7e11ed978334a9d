"""Dev-split scores of the learned second stage fitted on mined pairs, dev questions, or both
(README, "Mined training pairs").

    python benchmarks/ltr_variants.py --cache CACHE.pkl \\
        osha6 STORE benchmarks/osha6/dev.jsonl intl20 STORE benchmarks/intl20/dev.jsonl

For every answerable dev question the candidates of ``route:ltr:bm25+dense`` and their
features (section features included) are computed once; mined pairs (``evaluation.mined``,
up to ``--per-document`` per document of each store) likewise. Each variant (feature set ×
training rows × mined weight, with or without the ``sect:`` stage after it) scores the
questions with question-level 5-fold cross-validation over the pooled dev questions (mined
rows are in every training fold: they hold no question); a variant trained on mined pairs
alone needs no folds. Prints page Hit@1 / MRR / Recall@10 per split beside the default
``sect:route:rrf:bm25+dense``. Tune on dev only.
"""

from __future__ import annotations

import argparse
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sourcepage.evaluation.ltr_fit import fit_with, fold_scores, mine_store
from sourcepage.evaluation.metrics import hit_at, recall_at, reciprocal_rank
from sourcepage.evaluation.questions import read_questions
from sourcepage.records import Hit
from sourcepage.retrieval.ltr import candidates, feature_names, model_scores, rerank
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.pages import contents_last, navigation_question
from sourcepage.retrieval.routing import router
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.sections import section_rank

PARTS = [parse_method("bm25"), parse_method("dense")]
BASELINES = ("route:rrf:bm25+dense", "sect:route:rrf:bm25+dense", "route:ltr:bm25+dense")
FEATURE_SETS = {
    "base": feature_names(2),
    "+sections": feature_names(2, True),
    "+sect_rr+listing": [n for n in feature_names(2, True) if n != "head"],
}


@dataclass
class Asked:
    split: str
    question: str
    routed: str
    evidence: dict[str, int]
    hits: list[Hit]
    x: np.ndarray
    baselines: dict[str, list[str]]


def collect(splits: list[tuple[str, str, str]], per_document: int) -> dict:
    """Questions' and mined pairs' candidates and features, once."""
    asked: list[Asked] = []
    mined: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # x, y, hard-keep mask
    for name, store, qfile in splits:
        s = Searcher(store, auto_build=False)
        for q in read_questions(qfile):
            if q.answerability != "answerable" or not q.evidence:
                continue
            r = router(s).route(q.question)
            f = {"jurisdiction": list(r.jurisdictions)} if r.jurisdictions else {}
            routed = r.query if r.jurisdictions else q.question
            hits, x = candidates(s, PARTS, routed, f, sections=True)
            base = {m: [h.page_id for h in s.rank(q.question, m, k=None).hits] for m in BASELINES}
            asked.append(Asked(name, q.question, routed, q.evidence, hits, x, base))
        for p in mine_store(store, per_document):
            hits, x = candidates(s, PARTS, p.query, {}, sections=True)
            y = np.array([int(h.page_id in p.positives) for h in hits])
            hard = np.array([h.page_id in p.positives or h.page_id in p.negatives for h in hits], dtype=bool)
            if y.any():
                mined.append((x, y, hard))
        print(f"{name}: {sum(a.split == name for a in asked)} questions, {len(mined)} mined pairs so far")
    return {"asked": asked, "mined": mined}


def _ranked(s: Searcher, a: Asked, scores: np.ndarray, sect: bool) -> list[str]:
    """The page order ``[sect:]route:ltr:bm25+dense`` gives with these model scores."""
    hits = rerank(a.hits, scores)
    if s.contents_last and not navigation_question(a.routed):
        hits = contents_last(hits, s.contents_pages())
    if sect:
        hits = section_rank(s, a.question, hits)
        if s.contents_last and not navigation_question(a.question):
            hits = contents_last(hits, s.contents_pages())
    return [h.page_id for h in hits]


def _scores(ranked: dict[str, list[list[str]]], asked: list[Asked]) -> dict[str, tuple[float, ...]]:
    out = {}
    for split in dict.fromkeys(a.split for a in asked):
        rows = [(r, a) for r, a in zip(ranked[split], [a for a in asked if a.split == split], strict=True)]
        n = len(rows)
        out[split] = (
            sum(hit_at(r, a.evidence, 1) for r, a in rows) / n,
            sum(reciprocal_rank(r, a.evidence) for r, a in rows) / n,
            sum(recall_at(r, a.evidence, 10) for r, a in rows) / n,
        )
    return out


def _grid(mx: np.ndarray, my: np.ndarray, mk: np.ndarray, hard: np.ndarray) -> list[tuple]:
    """(loss, feature set, training name, (mined rows or None, ratio)) of every variant."""
    train = {
        "dev only": (None, 1.0),
        "mined only": ((mx, my, mk), 0.0),
        "mined only, hard negatives": ((mx[hard], my[hard], mk[hard]), 0.0),
        "dev + mined w=0.1": ((mx, my, mk), 0.1),
        "dev + mined w=0.25": ((mx, my, mk), 0.25),
        "dev + mined w=1": ((mx, my, mk), 1.0),
        "dev + mined hard w=0.25": ((mx[hard], my[hard], mk[hard]), 0.25),
        "dev + mined hard w=1": ((mx[hard], my[hard], mk[hard]), 1.0),
    }
    pointwise = [("", f, t, v) for f in FEATURE_SETS for t, v in train.items()]
    pair_train = ("dev only", "mined only", "dev + mined w=0.25", "dev + mined w=1")
    pairwise = [
        ("pairwise ", f, t, train[t]) for f in ("base", "+sect_rr+listing", "+sections") for t in pair_train
    ]
    return pointwise + pairwise


def variants(data: dict, searchers: dict[str, Searcher]) -> None:
    asked: list[Asked] = data["asked"]
    x = np.vstack([a.x for a in asked])
    y = np.concatenate([[int(a.evidence.get(h.page_id, 0) >= 1) for h in a.hits] for a in asked])
    keys = np.concatenate([[i] * len(a.hits) for i, a in enumerate(asked)])
    mx = np.vstack([m[0] for m in data["mined"]])
    my = np.concatenate([m[1] for m in data["mined"]])
    hard = np.concatenate([m[2] for m in data["mined"]])
    mk = np.concatenate([[i] * len(m[1]) for i, m in enumerate(data["mined"])])
    print(f"{len(asked)} questions ({len(y)} rows, {y.sum()} positive); "
          f"{len(data['mined'])} mined pairs ({len(my)} rows, {my.sum()} positive, {hard.sum()} hard-kept)")
    rows: dict[str, dict[str, tuple[float, ...]]] = {}
    for m in BASELINES:
        ranked: dict[str, list[list[str]]] = {}
        for a in asked:
            ranked.setdefault(a.split, []).append(a.baselines[m])
        label = m + " (shipped model, fitted on these questions)" * m.endswith("ltr:bm25+dense")
        rows[label] = _scores(ranked, asked)
    every = feature_names(2, True)
    for loss, feats, tname, (mined, ratio) in _grid(mx, my, mk, hard):
        names = FEATURE_SETS[feats]
        cols = [every.index(n) for n in names]
        mcut = None if mined is None else (mined[0][:, cols], mined[1], mined[2])
        pairwise = loss == "pairwise "
        if ratio == 0:
            s = model_scores(fit_with((x[:, cols], y, keys), names, mcut, 0.0, pairwise), x[:, cols])
        else:
            s = fold_scores((x[:, cols], y, keys), names, 5, 42, mcut, ratio, pairwise)
        for sect in (False, True):
            ranked = {}
            for i, a in enumerate(asked):
                ranked.setdefault(a.split, []).append(_ranked(searchers[a.split], a, s[keys == i], sect))
            rows[f"{'sect:' if sect else ''}{loss}ltr {feats}, {tname}"] = _scores(ranked, asked)
    splits = list(dict.fromkeys(a.split for a in asked))
    print(f"{'variant':56} " + " ".join(f"{sp + ' H@1/MRR/R@10':>24}" for sp in splits))
    for label, sc in rows.items():
        print(f"{label:56} " + " ".join(f"{' / '.join(f'{v:.3f}' for v in sc[sp]):>24}" for sp in splits))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", type=Path, required=True, help="features computed once are kept here")
    ap.add_argument("--per-document", type=int, default=20)
    ap.add_argument("splits", nargs="+", help="NAME STORE QUESTIONS [NAME STORE QUESTIONS ...]")
    a = ap.parse_args(argv)
    splits = [tuple(a.splits[i : i + 3]) for i in range(0, len(a.splits), 3)]
    if a.cache.is_file():
        data = pickle.loads(a.cache.read_bytes())
    else:
        data = collect(splits, a.per_document)  # type: ignore[arg-type]
        a.cache.write_bytes(pickle.dumps(data))
    variants(data, {name: Searcher(store, auto_build=False) for name, store, _ in splits})


if __name__ == "__main__":
    main()
