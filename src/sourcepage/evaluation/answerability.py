"""Held-out evaluation of the support decision (study §4.4, §5.7), inside ``sourcepage eval``.

For each text version on which the design ran BM25 and a semantic method (dense
preferred, else LSA), the answerability features are computed from the very rankings
the run produced, then stratified k-fold cross-validation fits the classifier and
every threshold on the other folds and decides the held-out questions. Reported:
AUROC per feature and of the combined classifier (broad / near-domain / out-of-domain,
bootstrap CIs), the answer / review / refuse shares per class, the same for each single
method's top-score threshold and risk–coverage curves. What the search itself decides
and quotes (the shipped or calibrated policy as a person receives it) is not decided
here: ``evaluation.decisions`` runs every question through the one pipeline and adds it
(``search``). ``held_out`` condenses the held-out comparison for ``sourcepage calibrate``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.evaluation import metrics as M
from sourcepage.evaluation import stats as S
from sourcepage.evaluation.relevance import Run
from sourcepage.records import Hit, Question
from sourcepage.retrieval.methods import has_flag, parse_method
from sourcepage.retrieval.search import Searcher
from sourcepage.support.calibrate import cross_validate
from sourcepage.support.features import FEATURES, feature_row
from sourcepage.support.policy import reads_xenc
from sourcepage.vocabulary import ANSWERABILITIES, NEGATIVE_CLASSES

NEG = NEGATIVE_CLASSES


def pick_pair(runs: Sequence[tuple[str, str]], version: str) -> tuple[str, str] | None:
    """(sparse, semantic) methods run on ``version``: bm25 with dense (any model) or lsa."""
    methods = [m for v, m in runs if v == version]
    if "bm25" not in methods:
        return None
    dense = [m for m in methods if parse_method(m).is_base and has_flag(m, "needs_dense")]
    semantic = dense[0] if dense else ("lsa" if "lsa" in methods else None)
    return ("bm25", semantic) if semantic else None


def _aurocs(
    values: Sequence[float], qs: Sequence[Question], n_boot: int, seed: int
) -> dict[str, list[float]]:
    out = {}
    for name, neg in NEG.items():
        pos = [v for v, q in zip(values, qs, strict=True) if q.answerability == "answerable"]
        ng = [v for v, q in zip(values, qs, strict=True) if q.answerability in neg]
        out[name] = [round(x, 6) for x in S.auroc_bootstrap_ci(pos, ng, n_boot, seed)]
    return out


def decision_shares(answered: Sequence[bool] | Sequence[str], qs: Sequence[Question]) -> dict[str, Any]:
    """How each class was decided: answered / review / refused shares (``answered`` is
    either booleans, True = answer, or decisions), and the ids of the wrong calls."""
    dec = [("answer" if a else "refuse") if isinstance(a, bool | np.bool_) else a for a in answered]
    out: dict[str, Any] = {}
    for cls in ANSWERABILITIES:
        idx = [i for i, q in enumerate(qs) if q.answerability == cls]
        n = len(idx)
        out[cls] = {
            d: (sum(dec[i] == d for i in idx) / n if n else math.nan) for d in ("answer", "review", "refuse")
        }
        out[cls]["n"] = n
    out["answerable_refused"] = [
        qs[i].id for i, d in enumerate(dec) if d == "refuse" and qs[i].answerability == "answerable"
    ]
    out["unsupported_answered"] = [
        qs[i].id for i, d in enumerate(dec) if d == "answer" and qs[i].answerability != "answerable"
    ]
    return out


@dataclass(frozen=True)
class HeldOut:
    """One policy's held-out result: near-domain AUROC and the share of each class refused."""

    policy: str
    auroc_near: float
    refused: dict[str, float]


def held_out(
    cv: Mapping[str, Any], qs: Sequence[Question], single_scores: Mapping[str, Sequence[float]]
) -> list[HeldOut]:
    """The classifier's and each single method's held-out results from ``cross_validate``."""
    y = cv["labels"]
    near = [i for i, q in enumerate(qs) if q.answerability != "out_of_domain"]

    def row(name: str, scores: Sequence[float], decided: Sequence[Any]) -> HeldOut:
        sh = decision_shares(decided, qs)
        a = M.auroc([scores[i] for i in near if y[i] == 1], [scores[i] for i in near if y[i] == 0])
        return HeldOut(name, a, {c: sh[c]["refuse"] for c in ANSWERABILITIES})

    rows = [row("classifier", cv["probability"], cv["decision"])]
    rows += [row(f"{m} top score", sc, cv["single_answered"][m]) for m, sc in single_scores.items()]
    return rows


def risk_coverage(prob: Sequence[float], y: Sequence[int]) -> list[tuple[float, float]]:
    """(coverage, risk) when answering the questions with the highest probability first:
    risk = share of answered questions the documents do not answer."""
    order = np.argsort(-np.asarray(prob), kind="stable")
    yy = np.asarray(y)[order]
    return [((i + 1) / len(yy), float(1 - yy[: i + 1].mean())) for i in range(len(yy))]


def evaluate_support(
    results: Mapping[tuple[str, str], Run],
    qs: Sequence[Question],
    runs: Sequence[tuple[str, str]],
    searchers: Mapping[str, Searcher],
    *,
    seed: int = 42,
    n_boot: int = 20000,
    max_answerable_refused: float = 0.05,
    folds: int = 5,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """answerability.json's held-out study: one entry per text version with a method pair
    (held-out classifier, each feature, single methods and the risk–coverage curves).
    ``results``: (version, method) → the run's ranked hits; ``progress(label, done,
    total)`` hears each question's features (the sentence model makes them slow)."""
    hits = {
        (v, m, qid): [Hit(i, h.page, float(h.score), h.chunk_id) for i, h in enumerate(ranked, 1)]
        for (v, m), run in results.items()
        for qid, ranked in run.items()
        if ranked
    }
    out: dict[str, Any] = {
        "schema": 2,
        "max_answerable_refused": max_answerable_refused,
        "max_negative_answered": 0.0,
        "folds": folds,
        "seed": seed,
        "versions": {},
    }
    for version in dict.fromkeys(v for v, _ in runs):
        pair = pick_pair(runs, version)
        if pair is None or version not in searchers:
            continue
        sparse, semantic = pair
        feats = []
        for i, q in enumerate(qs, 1):
            a, b = hits.get((version, sparse, q.id), []), hits.get((version, semantic, q.id), [])
            feats.append(feature_row(searchers[version], q.question, a, b, reads_xenc()))
            if progress:
                progress(f"answerability features {version}", i, len(qs))
        single = {
            m: [(hits.get((version, m, q.id)) or [Hit(0, "", -math.inf, "")])[0].score for q in qs]
            for v, m in runs
            if v == version
        }
        cv = cross_validate(feats, qs, single, max_answerable_refused, folds=folds, seed=seed)
        out["versions"][version] = _version_entry(pair, feats, qs, single, cv, n_boot, seed)
    return out


def _version_entry(
    pair: tuple[str, str],
    feats: Sequence[Mapping[str, float]],
    qs: Sequence[Question],
    single: Mapping[str, Sequence[float]],
    cv: Mapping[str, Any],
    n_boot: int,
    seed: int,
) -> dict[str, Any]:
    """One text version's entry: the held-out classifier of the method ``pair`` against
    each feature and each single method's top score, the decisions, risk–coverage, the
    quotes and every question's probability and features."""
    prob = cv["probability"]
    return {
        "sparse": pair[0],
        "semantic": pair[1],
        "folds": cv["folds"],
        "feature_auroc": {f: _aurocs([r[f] for r in feats], qs, n_boot, seed) for f in FEATURES},
        "classifier_auroc": _aurocs(prob, qs, n_boot, seed),
        "classifier_decisions": decision_shares(cv["decision"], qs),
        "single_method": {
            m: {"auroc": _top_score_aurocs(sc, qs), **decision_shares(cv["single_answered"][m], qs)}
            for m, sc in single.items()
        },
        "risk_coverage": [[round(c, 4), round(r, 4)] for c, r in risk_coverage(prob, cv["labels"])],
        "per_question": [
            {
                "question_id": q.id,
                "answerability": q.answerability,
                "probability": round(p, 6),
                "decision": d,
                **{k: round(v, 6) for k, v in f.items()},
            }
            for q, p, d, f in zip(qs, prob, cv["decision"], feats, strict=True)
        ],
    }


def _top_score_aurocs(scores: Sequence[float], qs: Sequence[Question]) -> dict[str, float]:
    """AUROC of a single method's top score, answerable against each kind of negative."""
    return {
        k: round(
            M.auroc(
                [s for s, q in zip(scores, qs, strict=True) if q.answerability == "answerable"],
                [s for s, q in zip(scores, qs, strict=True) if q.answerability in neg],
            ),
            6,
        )
        for k, neg in NEG.items()
    }


def figure(out: Path, result: Mapping[str, Any]) -> str | None:
    """Risk–coverage curves of the held-out classifier, one line per text version."""
    if not result["versions"]:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.6), dpi=120)
    for version, e in result["versions"].items():
        rc = np.array(e["risk_coverage"])
        ax.plot(rc[:, 0], rc[:, 1], label=f"{version}: {e['sparse']}+{e['semantic']}")
    ax.set_xlabel("coverage (share of questions answered)")
    ax.set_ylabel("risk (answered but unsupported)")
    ax.set_title("Risk–coverage, held-out folds")
    ax.legend(fontsize=8)
    fig.tight_layout()
    name = "risk_coverage.png"
    fig.savefig(out / name, metadata={"Software": None})
    plt.close(fig)
    return name
