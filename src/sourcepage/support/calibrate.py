"""Fit the answer / review / refuse policy (``policy.Policy``) on development questions.

The classifier is a logistic regression (scikit-learn, balanced classes, standardised
features) over ``features.FEATURES``. Its two thresholds are asymmetric, both set on
held-out (out-of-fold) probabilities:

- ``t_answer``: at most ``max_negative_answered`` of the unsupported and out-of-domain
  questions reach it (default 0 — none of them is answered automatically);
- ``t_refuse``: at most ``max_answerable_refused`` of the answerable questions fall below
  it (default 5%);
- in between: refer to a reviewer.

``fit_policy`` fits on feature rows with labels; the shipped default is fitted that way
on the project's benchmarks (``benchmarks/fit_policy.py``) and keeps its rows.
``run_calibration`` is ``sourcepage calibrate``: it computes the store's rows and refits on
the default's rows plus the store's (when the method pair is the default's), so a few
store questions refine the default rather than replace it, reports how much the policy
changed, and saves it with the version's indexes. ``cross_validate`` gives held-out
results only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.records import Hit, Question
from sourcepage.retrieval.search import Searcher
from sourcepage.store.db import Store
from sourcepage.support.decide import Decider
from sourcepage.support.features import CLASSIFIER_FEATURES, FEATURES, feature_row, matrix
from sourcepage.support.policy import Classifier, Policy, default_policy, reads_xenc, save_policy

#: inverse L2 strength of the logistic regression (standardised features)
C_REG = 0.5


def recall_threshold(pos_scores: Sequence[float], target: float) -> float:
    """The largest t with share(pos ≥ t) ≥ target: answering everything at or above t
    keeps at least ``target`` of the answerable questions."""
    s = np.sort(np.asarray(pos_scores, dtype=np.float64))
    if s.size == 0:
        return -math.inf
    k = int(math.floor((1.0 - target) * s.size + 1e-9))
    return float(s[min(k, s.size - 1)])


def negative_threshold(neg_scores: Sequence[float], max_share: float) -> float:
    """The smallest t with share(neg ≥ t) ≤ ``max_share``: with 0, just above the highest
    negative, so no development negative would be answered."""
    s = np.sort(np.asarray(neg_scores, dtype=np.float64))[::-1]
    if s.size == 0:
        return -math.inf
    k = int(math.floor(max_share * s.size + 1e-9))  # negatives allowed at or above t
    return float(np.nextafter(s[k], math.inf)) if k < s.size else -math.inf


def precision_threshold(scores: Sequence[float], y: Sequence[int], target: float) -> float:
    """The smallest t such that questions scoring ≥ t are answerable with precision ≥ target
    (and at least one is); +inf when no threshold reaches it."""
    s, yy = np.asarray(scores, dtype=np.float64), np.asarray(y, dtype=int)
    for t in np.unique(s):
        sel = s >= t
        if sel.any() and yy[sel].mean() >= target:
            return float(t)
    return math.inf


def fit_classifier(
    x: np.ndarray,
    y: np.ndarray,
    seed: int = 42,
    weights: np.ndarray | None = None,
    names: Sequence[str] = CLASSIFIER_FEATURES,
) -> Classifier:
    """Logistic regression on standardised columns ``names`` of ``x`` (balanced classes)."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    from sklearn.linear_model import LogisticRegression  # here: a search must not import sklearn

    model = LogisticRegression(C=C_REG, class_weight="balanced", max_iter=5000, random_state=seed)
    model.fit((x - mean) / scale, y, sample_weight=weights)
    return Classifier(
        mean.tolist(), scale.tolist(), model.coef_[0].tolist(), float(model.intercept_[0]), list(names)
    )


def out_of_fold(
    x: np.ndarray, y: np.ndarray, folds: int = 5, seed: int = 42, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, int]:
    """Held-out probabilities (each from a classifier fitted on the other folds) and the
    fold of every row; stratified k-fold, ``k`` ≤ the smaller class."""
    k = max(2, min(folds, int(y.sum()), int((1 - y).sum())))
    prob, fold = np.zeros(len(y)), np.zeros(len(y), dtype=int)
    from sklearn.model_selection import StratifiedKFold

    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    for i, (train, test) in enumerate(skf.split(x, y)):
        clf = fit_classifier(x[train], y[train], seed, None if weights is None else weights[train])
        prob[test] = clf.proba(x[test])
        fold[test] = i
    return prob, fold, k


def thresholds(
    prob: np.ndarray, y: np.ndarray, max_answerable_refused: float, max_negative_answered: float
) -> tuple[float, float]:
    """(t_refuse, t_answer) from held-out probabilities, t_refuse ≤ t_answer."""
    t_answer = negative_threshold(prob[y == 0], max_negative_answered)
    t_refuse = recall_threshold(prob[y == 1], 1.0 - max_answerable_refused)
    return min(t_refuse, t_answer), t_answer


def labels(qs: Sequence[Question]) -> np.ndarray:
    return np.array([1 if q.answerability == "answerable" else 0 for q in qs], dtype=int)


#: questions of each class (answerable; unsupported or out-of-domain) a calibration needs:
#: its cross-validation fits thresholds by an inner 2-fold split of each training part,
#: which needs 2 of each class there, so 3 in all (with 2, scikit-learn failed after the
#: features were computed: "n_splits=2 cannot be greater than the number of members")
MIN_PER_CLASS = 3


def check_classes(qs: Sequence[Question], source: str | Path = "the development questions") -> None:
    """ValueError unless ``qs`` holds at least MIN_PER_CLASS answerable and MIN_PER_CLASS
    unsupported or out-of-domain questions (checked before any work is done)."""
    pos = sum(q.answerability == "answerable" for q in qs)
    neg = len(qs) - pos
    if pos < MIN_PER_CLASS or neg < MIN_PER_CLASS:
        raise ValueError(
            f"{source}: calibration needs at least {MIN_PER_CLASS} answerable and {MIN_PER_CLASS} "
            f"unsupported or out-of-domain questions; it has {pos} answerable and {neg} others"
        )


def cross_validate(
    rows: Sequence[Mapping[str, float]],
    qs: Sequence[Question],
    single_scores: Mapping[str, Sequence[float]],
    max_answerable_refused: float = 0.05,
    max_negative_answered: float = 0.0,
    folds: int = 5,
    seed: int = 42,
) -> dict[str, Any]:
    """Held-out answerability results with stratified k-fold cross-validation.

    For every fold, the classifier and all thresholds are fitted on the other folds
    (thresholds on the training folds' own out-of-fold probabilities) and applied to the
    held-out questions; nothing below is measured on the data it was fitted on.
    ``single_scores`` maps a method name to its top page scores (question order)."""
    y = labels(qs)
    x = matrix(rows, CLASSIFIER_FEATURES)
    k = max(2, min(folds, int(y.sum()), int((1 - y).sum())))
    from sklearn.model_selection import StratifiedKFold

    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    prob = np.zeros(len(qs))
    decision = np.array(["refuse"] * len(qs), dtype=object)
    single_answer = {m: np.zeros(len(qs), dtype=bool) for m in single_scores}
    for train, test in skf.split(x, y):
        clf = fit_classifier(x[train], y[train], seed)
        inner, _, _ = out_of_fold(x[train], y[train], folds, seed)
        t_refuse, t_answer = thresholds(inner, y[train], max_answerable_refused, max_negative_answered)
        p = clf.proba(x[test])
        prob[test] = p
        decision[test] = np.where(p >= t_answer, "answer", np.where(p >= t_refuse, "review", "refuse"))
        for m, scores in single_scores.items():
            s = np.asarray(scores, dtype=np.float64)
            t = recall_threshold(s[train][y[train] == 1], 1.0 - max_answerable_refused)
            single_answer[m][test] = s[test] >= t
    return {
        "folds": k,
        "seed": seed,
        "max_answerable_refused": max_answerable_refused,
        "max_negative_answered": max_negative_answered,
        "probability": prob.tolist(),
        "decision": decision.tolist(),
        "labels": y.tolist(),
        "single_answered": {m: v.tolist() for m, v in single_answer.items()},
    }


def fit_policy(
    rows: Sequence[Mapping[str, Any]],
    *,
    text_version: str,
    sparse: str,
    semantic: str,
    max_answerable_refused: float = 0.05,
    max_negative_answered: float = 0.0,
    seed: int = 42,
    origin: str = "calibrated",
    fitted_on: Sequence[Mapping[str, Any]] = (),
    single: Mapping[str, float] | None = None,
    chunk_fingerprint: str = "",
    names: Sequence[str] = CLASSIFIER_FEATURES,
) -> Policy:
    """Fit the classifier on all ``rows`` (each ``{"id", "label": 0|1, "features": {…},
    "weight"?}``) over the features ``names`` and set both thresholds on their out-of-fold
    probabilities. The rows are kept in ``fitted_on``'s last entry, so the policy can be
    refined later."""
    x = matrix([r["features"] for r in rows], names)
    y = np.array([int(r["label"]) for r in rows])
    w = np.array([float(r.get("weight", 1.0)) for r in rows])
    if y.sum() < 2 or (1 - y).sum() < 2:
        raise ValueError(
            "calibration needs at least 2 answerable and 2 unsupported or out-of-domain questions"
        )
    clf = fit_classifier(x, y, seed, w, names)
    oof, _, _ = out_of_fold(x, y, seed=seed, weights=w)
    t_refuse, t_answer = thresholds(oof, y, max_answerable_refused, max_negative_answered)
    described = [*FEATURES, *(f for f in names if f not in FEATURES)]
    every = matrix([r["features"] for r in rows], described)
    ref = {
        f: {"answerable": float(every[y == 1, i].mean()), "negative": float(every[y == 0, i].mean())}
        for i, f in enumerate(described)
    }
    return Policy(
        text_version=text_version,
        sparse=sparse,
        semantic=semantic,
        classifier=clf,
        t_refuse=t_refuse,
        t_answer=t_answer,
        max_answerable_refused=max_answerable_refused,
        max_negative_answered=max_negative_answered,
        n_questions={"answerable": int(y.sum()), "negative": int((1 - y).sum())},
        reference=ref,
        single=dict(single or {}),
        origin=origin,
        fitted_on=[
            *(dict(f) for f in fitted_on),
            {"rows": [_kept_row(r) for r in rows]},
        ],
        chunk_fingerprint=chunk_fingerprint,
    )


def _kept_row(r: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: r[k] for k in ("id", "label", "weight") if k in r}
    return {**out, "features": {f: round(float(v), 6) for f, v in r["features"].items()}}


def policy_rows(policy: Policy) -> list[dict[str, Any]]:
    """The feature rows a policy was fitted on (kept in its last ``fitted_on`` entry)."""
    return list(policy.fitted_on[-1].get("rows", [])) if policy.fitted_on else []


def decisions(policy: Policy, rows: Sequence[Mapping[str, float]]) -> list[str]:
    """answer / review / refuse of ``policy``'s probability for each feature row, at the
    thresholds a search applies (``support.decide.Decider``; the threshold part of the
    decision only: jurisdiction and conflict rules need the ranked pages)."""
    return Decider(policy).verdicts(rows)


def compare(old: Policy, new: Policy, rows: Sequence[Mapping[str, float]]) -> dict[str, Any]:
    """How much ``new`` differs from ``old`` on these questions: the thresholds in force
    (``Decider.thresholds``), mean |ΔP|, and how many decisions change."""
    p_old, p_new = old.classifier.predict(rows), new.classifier.predict(rows)
    d_old, d_new = decisions(old, rows), decisions(new, rows)
    (r_old, a_old), (r_new, a_new) = Decider(old).thresholds(), Decider(new).thresholds()
    return {
        "t_refuse": [r_old, r_new],
        "t_answer": [None if math.isinf(a_old) else a_old, a_new],
        "mean_abs_probability_change": round(float(np.mean(np.abs(p_new - p_old))), 4),
        "decisions_changed": int(sum(a != b for a, b in zip(d_old, d_new, strict=True))),
        "questions": len(rows),
        "before": {d: d_old.count(d) for d in ("answer", "review", "refuse")},
        "after": {d: d_new.count(d) for d in ("answer", "review", "refuse")},
    }


def question_features(
    searcher: Searcher,
    question: str,
    sparse: str,
    semantic: str,
    depth: int = 20,
    filters: Mapping[str, Any] | None = None,
    xenc: bool | None = None,
) -> tuple[dict[str, float], list[Hit], list[Hit]]:
    """Rank with both methods and compute the feature dict of one question (with the
    cross-encoder's features when ``xenc``; None: when a policy reads them)."""
    a = list(searcher.rank(question, sparse, k=depth, filters=filters).hits)
    b = list(searcher.rank(question, semantic, k=depth, filters=filters).hits)
    return feature_row(searcher, question, a, b, reads_xenc() if xenc is None else xenc), a, b


#: a question's feature row and its sparse and semantic rankings, from (question, sparse, semantic)
FeatureFn = Callable[[str, str, str], tuple[dict[str, float], list[Hit], list[Hit]]]


@dataclass
class CalibrationReport:
    """What ``run_calibration`` fitted and where it stored it, with the held-out
    (``cross_validate``) results, each method's top page score per question and what
    changed against the shipped default (``change``; empty when the pair differs)."""

    policy: Policy
    path: Path
    cv: dict[str, Any]
    single_scores: dict[str, list[float]]
    questions: int
    change: dict[str, Any]


def run_calibration(
    store: str | Path | Store,
    qs: Sequence[Question],
    *,
    version: str = "raw",
    sparse: str = "bm25",
    semantic: str = "dense",
    max_answerable_refused: float = 0.05,
    max_negative_answered: float = 0.0,
    seed: int = 42,
    progress: Callable[[int, int], None] | None = None,
    features: FeatureFn | None = None,
) -> CalibrationReport:
    """Compute the features of every development question (``progress(done, total)``
    after each), cross-validate, refit the policy — on the default's rows plus these when
    the pair is the default's, on these alone otherwise — and save it with the version's
    indexes. ValueError before any work when a class is missing (:func:`check_classes`).
    ``features(question, sparse, semantic)``: a question's row and its two rankings (the
    CLI passes the search pipeline's, ``SearchService.policy_features``); by default
    :func:`question_features` on this store and version."""
    check_classes(qs)
    searcher = Searcher(store, version)
    features = features or (lambda q, a, b: question_features(searcher, q, a, b))
    feats: list[dict[str, float]] = []
    tops_a: list[float] = []
    tops_b: list[float] = []
    for i, q in enumerate(qs, 1):
        f, a, b = features(q.question, sparse, semantic)
        feats.append(f)
        tops_a.append(a[0].score if a else float("-inf"))
        tops_b.append(b[0].score if b else float("-inf"))
        if progress is not None:
            progress(i, len(qs))
    single = {sparse: tops_a, semantic: tops_b}
    cv = cross_validate(feats, qs, single, max_answerable_refused, max_negative_answered, seed=seed)
    y = labels(qs)
    base = default_policy()
    same_pair = (base.sparse, base.semantic) == (sparse, semantic)
    rows = policy_rows(base) if same_pair else []
    rows += [
        {"id": f"store:{q.id}", "label": int(v), "features": f} for q, v, f in zip(qs, y, feats, strict=True)
    ]
    pol = fit_policy(
        rows,
        text_version=version,
        sparse=sparse,
        semantic=semantic,
        max_answerable_refused=max_answerable_refused,
        max_negative_answered=max_negative_answered,
        seed=seed,
        fitted_on=[*(base.fitted_on[:-1] if same_pair else []), {"questions": "this store", "n": len(qs)}],
        single={
            m: recall_threshold(np.asarray(s)[y == 1], 1.0 - max_answerable_refused)
            for m, s in single.items()
        },
        chunk_fingerprint=searcher.store.chunk_fingerprint(version),
    )
    change = compare(base, pol, feats) if same_pair else {}
    pol.change = change
    path = save_policy(searcher.store.path, pol)
    return CalibrationReport(pol, path, cv, single, len(qs), change)


def describe_calibration(rep: CalibrationReport) -> str:
    """What ``calibrate`` fitted and how much it changed against the shipped default, in words."""
    pol, ch = rep.policy, rep.change
    n = pol.n_questions["answerable"] + pol.n_questions["negative"]
    lines = [
        f"policy fitted on {rep.questions} questions of this store ({n} with the shipped ones): refuse "
        f"below P={pol.t_refuse:.3f}, answer at or above P={pol.t_answer:.3f}; stored in {rep.path}"
    ]
    if not ch:
        lines.append("no shipped default for this method pair: fitted on this store's questions alone")
        return "\n".join(lines)
    b, a = ch["before"], ch["after"]
    lines.append(
        f"change against the shipped default: refuse threshold {ch['t_refuse'][0]:.3f} → "
        f"{ch['t_refuse'][1]:.3f}, answer threshold {ch['t_answer'][0]:.3f} → {ch['t_answer'][1]:.3f}; "
        f"mean |ΔP| {ch['mean_abs_probability_change']:.3f} on these questions; "
        f"{ch['decisions_changed']} of {ch['questions']} decisions changed (answer/review/refuse "
        f"{b['answer']}/{b['review']}/{b['refuse']} → {a['answer']}/{a['review']}/{a['refuse']})"
    )
    return "\n".join(lines)
