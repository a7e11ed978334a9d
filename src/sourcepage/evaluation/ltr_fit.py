"""Fit the learned second stage (``ltr:<parts>``) on benchmark questions and mined pairs.

    python -m sourcepage.evaluation.ltr_fit --parts bm25+dense --out MODEL.json \\
        [--sections] [--mined 20 --mined-weight 0.25] STORE_1 QUESTIONS_1 [STORE_2 QUESTIONS_2 ...]

For every answerable question of every (store, question file) pair, the candidate pages of
the parts (after jurisdiction routing, as ``route:ltr:…`` ranks) and their features
(``retrieval.ltr.candidates``) are labelled 1 when the page is evidence (grade ≥ 1), and the
pointwise logistic model is fitted on all of them (``retrieval.ltr.fit``). ``--cv K`` first
reports question-level K-fold cross-validated Hit@1 / MRR against the RRF order of the same
candidates, so a model is shipped only with its measured effect. Train on dev splits only.

``--sections`` adds the section features (``retrieval.ltr.SECTION``). ``--mined N`` adds up to
N pairs per document mined from each store's page structure (``evaluation.mined``): a
section title as the query, labelled 1 on its section's pages, 0 on the other candidates
(``--hard``: only the document's other sections' pages are kept as negatives); their rows
weigh ``--mined-weight`` times the questions' rows in total (0: mined pairs alone).

The reviewer log enters as one more question file: ``sourcepage reviews --store STORE
--export reviewed.jsonl`` writes each reviewed question (answered ones with the pages the
reviewer accepted as evidence), and ``STORE reviewed.jsonl`` is then one more pair here.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.evaluation.mined import MinedPair, mine_pairs, sample
from sourcepage.evaluation.questions import read_questions
from sourcepage.retrieval.ltr import candidates, feature_names, fit, fit_pairwise, model_scores
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.routing import router
from sourcepage.retrieval.search import Searcher


def training_rows(
    pairs: Sequence[tuple[str | Path, str | Path]], parts: str, version: str = "raw", sections: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, labels, question keys) over every answerable question of the pairs."""
    methods = [parse_method(p) for p in parts.split("+")]
    xs, ys, keys = [], [], []
    for store, qfile in pairs:
        s = Searcher(store, version)
        for q in read_questions(qfile):
            if q.answerability != "answerable":
                continue
            r = router(s).route(q.question)
            f = {"jurisdiction": list(r.jurisdictions)} if r.jurisdictions else {}
            hits, x = candidates(s, methods, r.query if r.jurisdictions else q.question, f, sections)
            xs.append(x)
            ys += [int(q.evidence.get(h.page_id, 0) >= 1) for h in hits]
            keys += [f"{qfile}:{q.id}"] * len(hits)
    if not xs:
        raise ValueError(f"no answerable question in {', '.join(str(q) for _, q in pairs)}")
    return np.vstack(xs), np.array(ys), np.array(keys)


def mined_rows(
    searcher: Searcher, pairs: Sequence[MinedPair], parts: str, sections: bool = False, hard: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, labels, pair keys) of mined pairs: each title ranked like a question without
    a jurisdiction; a pair none of whose pages is a candidate teaches nothing and is dropped.
    ``hard`` keeps, besides the positives, only the document's other sections' pages."""
    methods = [parse_method(p) for p in parts.split("+")]
    xs, ys, keys = [], [], []
    for p in pairs:
        hits, x = candidates(searcher, methods, p.query, {}, sections)
        pos, neg = set(p.positives), set(p.negatives)
        keep = [i for i, h in enumerate(hits) if not hard or h.page_id in pos or h.page_id in neg]
        y = [int(hits[i].page_id in pos) for i in keep]
        if not any(y):
            continue
        xs.append(x[keep])
        ys += y
        keys += [f"mined:{p.doc_id}:{p.section}"] * len(keep)
    width = len(feature_names(len(methods), sections))
    return (np.vstack(xs) if xs else np.zeros((0, width))), np.array(ys, dtype=int), np.array(keys)


def mine_store(store: str | Path, per_document: int, version: str = "raw") -> list[MinedPair]:
    """The seeded sample of a store's mined pairs (``evaluation.mined``)."""
    return sample(mine_pairs(Searcher(store, version).structure()), per_document)


def mined_weights(n_questions_rows: int, n_mined_rows: int, ratio: float) -> np.ndarray:
    """Row weights: 1 for question rows, the mined rows sharing ``ratio`` × the questions'
    total (all 1 when there are no question rows)."""
    w = ratio * n_questions_rows / n_mined_rows if n_questions_rows and n_mined_rows else 1.0
    return np.concatenate([np.ones(n_questions_rows), np.full(n_mined_rows, w)])


def _hit_mrr(scores: np.ndarray, y: np.ndarray, keys: np.ndarray) -> tuple[float, float]:
    hit, rr = [], []
    for k in dict.fromkeys(keys):
        m = keys == k
        order = sorted(range(int(m.sum())), key=lambda i: (-round(float(scores[m][i]), 9), i))
        ys = y[m][order][:20]
        first = np.flatnonzero(ys)
        hit.append(float(ys[0]) if ys.size else 0.0)
        rr.append(1.0 / (first[0] + 1) if first.size else 0.0)
    return float(np.mean(hit)), float(np.mean(rr))


Rows = tuple[np.ndarray, np.ndarray, np.ndarray]  # features, labels, query keys


def _groups(rows: Rows, weight: float) -> list[tuple[np.ndarray, np.ndarray, float]]:
    x, y, keys = rows
    return [(x[keys == k], y[keys == k], weight) for k in dict.fromkeys(keys.tolist())]


def fit_with(
    rows: Rows, names: list[str], mined: Rows | None = None, ratio: float = 1.0, pairwise: bool = False
) -> dict[str, Any]:
    """The model fitted on question rows plus mined rows that weigh ``ratio`` × the
    questions in total (rows for the pointwise fit, queries for the pairwise one); ratio 0:
    the mined rows alone; no mined rows: the questions alone."""
    x, y, _ = rows
    if mined is not None and not len(mined[1]):
        mined = None
    if pairwise:
        groups = [] if mined is not None and ratio == 0 else _groups(rows, 1.0)
        if mined is not None:
            n_mined = len(set(mined[2].tolist()))
            groups += _groups(mined, ratio * len(groups) / n_mined if groups else 1.0)
        return fit_pairwise(groups, names)
    if mined is None:
        return fit(x, y, names)
    if ratio == 0:
        return fit(mined[0], mined[1], names)
    w = mined_weights(len(y), len(mined[1]), ratio)
    return fit(np.vstack([x, mined[0]]), np.concatenate([y, mined[1]]), names, weights=w)


def fold_scores(
    rows: Rows,
    names: list[str],
    folds: int = 5,
    seed: int = 42,
    mined: Rows | None = None,
    ratio: float = 1.0,
    pairwise: bool = False,
) -> np.ndarray:
    """Held-out model scores of every question row: question-level K folds, each scored by
    the model fitted on the other folds (plus the mined rows, which hold no question)."""
    x, y, keys = rows
    qs = sorted(set(keys.tolist()))
    np.random.default_rng(seed).shuffle(qs)
    fold = {q: i % folds for i, q in enumerate(qs)}
    f = np.array([fold[k] for k in keys.tolist()])
    s = np.zeros(len(y))
    for i in range(folds):
        model = fit_with((x[f != i], y[f != i], keys[f != i]), names, mined, ratio, pairwise)
        s[f == i] = model_scores(model, x[f == i])
    return s


def cross_validate(
    rows: Rows,
    names: list[str],
    folds: int = 5,
    seed: int = 42,
    mined: Rows | None = None,
    ratio: float = 1.0,
    pairwise: bool = False,
) -> dict[str, Any]:
    """Question-level K-fold CV of the model against the candidates' RRF order."""
    x, y, keys = rows
    s = fold_scores(rows, names, folds, seed, mined, ratio, pairwise)
    rrf = x[:, names.index("rrf")]
    (h0, m0), (h1, m1) = _hit_mrr(rrf, y, keys), _hit_mrr(s, y, keys)
    return {
        "questions": len(set(keys.tolist())),
        "rrf": {"hit@1": round(h0, 4), "mrr": round(m0, 4)},
        "ltr": {"hit@1": round(h1, 4), "mrr": round(m1, 4)},
    }


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="bm25+dense")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cv", type=int, default=5)
    ap.add_argument("--sections", action="store_true", help="add the section features")
    ap.add_argument("--mined", type=int, default=0, metavar="N", help="mined pairs per document (0: none)")
    ap.add_argument("--mined-weight", type=float, default=1.0, help="mined rows' total weight / questions'")
    ap.add_argument("--hard", action="store_true", help="mined negatives: the document's other sections only")
    ap.add_argument("--pairwise", action="store_true", help="fit on positive-minus-negative pairs per query")
    ap.add_argument("pairs", nargs="+", help="STORE QUESTIONS [STORE QUESTIONS ...]")
    a = ap.parse_args(argv)
    if len(a.pairs) % 2:
        ap.error("give STORE QUESTIONS pairs")
    pairs = list(zip(a.pairs[::2], a.pairs[1::2], strict=True))
    rows = training_rows(pairs, a.parts, sections=a.sections)
    y = rows[1]
    names = feature_names(len(a.parts.split("+")), a.sections)
    mined = None
    if a.mined:
        got = [
            mined_rows(Searcher(st), mine_store(st, a.mined), a.parts, a.sections, a.hard) for st, _ in pairs
        ]
        keys = [f"{i}:{k}" for i, m in enumerate(got) for k in m[2].tolist()]  # a pair per store
        mined = (np.vstack([m[0] for m in got]), np.concatenate([m[1] for m in got]), np.array(keys))
    report = (
        cross_validate(rows, names, a.cv, mined=mined, ratio=a.mined_weight, pairwise=a.pairwise)
        if a.cv > 1
        else None
    )
    model = {
        **fit_with(rows, names, mined, a.mined_weight, a.pairwise),
        "parts": a.parts,
        "trained_on": [str(q) for _, q in pairs],
        "mined": {"per_document": a.mined, "weight": a.mined_weight, "hard": a.hard} if a.mined else None,
        "cv": report,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(model, indent=1) + "\n")
    print(json.dumps({"out": str(a.out), "rows": len(y), "positives": int(y.sum()), "cv": report}))


if __name__ == "__main__":
    main()
