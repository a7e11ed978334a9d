"""Fit the learned second stage (``ltr:<parts>``) on benchmark questions.

    python -m sourcepage.evaluation.ltr_fit --parts bm25+dense --out MODEL.json \\
        STORE_1 QUESTIONS_1 [STORE_2 QUESTIONS_2 ...]

For every answerable question of every (store, question file) pair, the candidate pages of
the parts (after jurisdiction routing, as ``route:ltr:…`` ranks) and their features
(``retrieval.ltr.candidates``) are labelled 1 when the page is evidence (grade ≥ 1), and the
pointwise logistic model is fitted on all of them (``retrieval.ltr.fit``). ``--cv K`` first
reports question-level K-fold cross-validated Hit@1 / MRR against the RRF order of the same
candidates, so a model is shipped only with its measured effect. Train on dev splits only.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.evaluation.questions import read_questions
from sourcepage.retrieval.ltr import candidates, feature_names, fit, model_scores
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.routing import router
from sourcepage.retrieval.search import Searcher


def training_rows(
    pairs: Sequence[tuple[str | Path, str | Path]], parts: str, version: str = "raw"
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
            hits, x = candidates(s, methods, r.query if r.jurisdictions else q.question, f)
            xs.append(x)
            ys += [int(q.evidence.get(h.page_id, 0) >= 1) for h in hits]
            keys += [f"{qfile}:{q.id}"] * len(hits)
    return np.vstack(xs), np.array(ys), np.array(keys)


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


def cross_validate(
    x: np.ndarray, y: np.ndarray, keys: np.ndarray, names: list[str], folds: int = 5, seed: int = 42
) -> dict[str, Any]:
    """Question-level K-fold CV of the model against the candidates' RRF order."""
    qs = sorted(set(keys.tolist()))
    np.random.default_rng(seed).shuffle(qs)
    fold = {q: i % folds for i, q in enumerate(qs)}
    f = np.array([fold[k] for k in keys])
    s = np.zeros(len(y))
    for i in range(folds):
        model = fit(x[f != i], y[f != i], names)
        s[f == i] = model_scores(model, x[f == i])
    rrf = x[:, names.index("rrf")]
    (h0, m0), (h1, m1) = _hit_mrr(rrf, y, keys), _hit_mrr(s, y, keys)
    return {
        "questions": len(qs),
        "rrf": {"hit@1": round(h0, 4), "mrr": round(m0, 4)},
        "ltr": {"hit@1": round(h1, 4), "mrr": round(m1, 4)},
    }


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="bm25+dense")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cv", type=int, default=5)
    ap.add_argument("pairs", nargs="+", help="STORE QUESTIONS [STORE QUESTIONS ...]")
    a = ap.parse_args(argv)
    if len(a.pairs) % 2:
        ap.error("give STORE QUESTIONS pairs")
    pairs = list(zip(a.pairs[::2], a.pairs[1::2], strict=True))
    x, y, keys = training_rows(pairs, a.parts)
    names = feature_names(len(a.parts.split("+")))
    report = cross_validate(x, y, keys, names, a.cv) if a.cv > 1 else None
    model = {**fit(x, y, names), "parts": a.parts, "trained_on": [str(q) for _, q in pairs], "cv": report}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(model, indent=1) + "\n")
    print(json.dumps({"out": str(a.out), "rows": len(y), "positives": int(y.sum()), "cv": report}))


if __name__ == "__main__":
    main()
