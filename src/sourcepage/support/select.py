"""Answer-sentence selection: which quotable units of the top pages state the answer.

A learned, measured stage (issue #22): every quotable unit (``text.sentences.quotable``)
of the first ``PAGES`` ranked pages is a candidate; its features (``FEATURE_WORDS``) say
how close it is to the question (e5 and MiniLM cosines, BM25 of the unit as a share of
the question's ceiling, the idf-weighted share of the question's words it and its heading
hold), whether it states a fact of the kind asked (``text.facts``: the regular
expressions are features here, not the gate), whether it names the roles and entities the
question names and no others (manufacturer ≠ importer, employer ≠ employee), whether it
carries the condition or exception the question asks about ("unless", "except", "if … not
available"), how close its neighbours are, and the rank of its page. A logistic model
(``quote_model.json``, plain JSON beside ``default_policy.json``, fitted by
``benchmarks/fit_quotes.py`` on the dev splits with question-level cross-validation)
turns them into P(the unit states the answer). Positives in training: units holding at
least 60% of the content words of a labelled evidence excerpt (the rule eval scores
quotes with).

The model file also holds the two thresholds of the answer gate (``support.decide.gate``):
``t_support`` on P(supported) and ``t_quote`` on the best quote's P(states)
(``support.answer.stated``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any

import numpy as np

from sourcepage.query import PageHit, Query
from sourcepage.retrieval.tokenize import content_terms, stem_terms
from sourcepage.text.facts import states
from sourcepage.text.roles import role_features, roles_in
from sourcepage.text.sentences import Quotable, quote_units

MODEL_FILE = "quote_model.json"
SCHEMA = "sourcepage-quote-model/1"
#: the ranked pages whose units are candidates
PAGES = 3
#: P(states) from which a unit counts as answering under the rule without a model
RULE_THRESHOLD = 0.5
#: the units (most of the question's words first) whose cosines are computed
EMBEDDED = 24
#: BM25 constants of the unit score (a unit is a short document)
K1, B, AVG_UNIT_WORDS = 1.2, 0.75, 14.0

#: feature → what it measures, in words
FEATURE_WORDS: dict[str, str] = {
    "e5": "meaning similarity (e5-small) of the sentence to the question",
    "e5_gap": "its e5 similarity minus that of the closest candidate",
    "minilm": "meaning similarity (MiniLM) of the sentence to the question",
    "minilm_gap": "its MiniLM similarity minus that of the closest candidate",
    "bm25": "BM25 of the sentence as a share of the question's ceiling",
    "share": "idf-weighted share of the question's words the sentence holds",
    "heading": "idf-weighted share of the question's words its heading adds",
    "value_asked": "the question asks for a value",
    "value_stated": "the sentence states a value of the asked kind",
    "kinds_asked": "the question asks for a person, a list or a condition",
    "other_stated": "share of the asked person / list / condition facts the sentence states",
    "role_match": "share of the roles the question names that the sentence names",
    "role_other": "the sentence names a role the question does not (and names none it does)",
    "lead_role": "the first role the sentence names is one the question names (1), another (−1)",
    "exception_q": "the question asks about an exception or condition",
    "exception_s": "the sentence states an exception or condition",
    "neighbour": "the larger e5 similarity of the sentences before and after it",
    "page_rank": "1 / rank of its page",
    "position": "its position on the page (0 first, 1 last)",
    "is_list": "it is a list or a list item",
    "length": "log of its length in characters",
    "numbers": "it states some number (not a section, standard or year)",
    "xenc": "cross-encoder logit of the question with the sentence as quoted (with its neighbours)",
    "xenc_gap": "its cross-encoder logit minus the best candidate's",
    "xenc_unit": "cross-encoder logit of the question with the sentence alone",
    "xenc_unit_gap": "its sentence-alone cross-encoder logit minus the best candidate's",
}
FEATURES: tuple[str, ...] = tuple(FEATURE_WORDS)
#: the features read from sentence vectors
EMBEDDING_FEATURES = ("e5", "e5_gap", "minilm", "minilm_gap", "neighbour")
#: the cross-encoder's features (``add_xenc``): computed only for a model that lists them
XENC_FEATURES = ("xenc", "xenc_gap", "xenc_unit", "xenc_unit_gap")
#: the units of a part (``add_cosines``' parts) read by the cross-encoder: the closest by e5
XENC_UNITS = 12
#: word pieces of a (question, unit) pair read by the cross-encoder (≈ 22 ms a pair)
XENC_TOKENS = 128

_EXCEPTION_Q = re.compile(
    r"\b(?:unless|except|exempt|exception|not (?:at|available|present|possible|practicable)|absent|"
    r"away|instead|if|when|whenever|where|who may|can .* without|without)\b",
    re.IGNORECASE,
)
_EXCEPTION_S = re.compile(
    r"\b(?:unless|except|exempt|however|only if|provided that|if|when|where|in lieu|instead|"
    r"not available|not present|not practicable|not reasonably practicable|under the direction)\b",
    re.IGNORECASE,
)


@lru_cache(maxsize=16384)  # units and headings of the pages a search quotes recur across searches
def _stems(text: str) -> frozenset[str]:
    return frozenset(stem_terms(content_terms(text)).values())


@dataclass
class Candidate:
    """One quotable unit of a ranked page, with its features and, once scored, P(states)."""

    unit: Quotable
    page: PageHit
    order: int  # 0-based index of its page among the ranked pages
    position: int  # index of the unit on its page
    risk: bool  # the page's columns may run together in its text
    stems: frozenset[str] = field(default_factory=frozenset)
    features: dict[str, float] = field(default_factory=dict)
    p: float = 0.0

    @property
    def text(self) -> str:
        return self.unit.text

    @property
    def other_party(self) -> bool:
        """Whether the unit sets out another party's duty than the one the question asks
        about (its ``lead_role`` feature −1: the question names a role, the unit names
        another first); the answer reads it of each chosen unit."""
        return self.features.get("lead_role", 0.0) < 0


def quoted_pages(query: Query, pages: Sequence[PageHit]) -> list[PageHit]:
    """The pages whose units are quote candidates: the first ``PAGES``, and when the
    question compares jurisdictions (``Route.compares``: "Compare OSHA's position with the
    NSW plant code") the best-ranked page of each named side that none of them is from, so
    that the reviewer it goes to sees each side's own text, not one side twice."""
    out = list(pages[:PAGES])
    route = query.route
    if route is None or not route.compares:
        return out
    for group in route.groups:
        if not any(p.document.jurisdiction in group for p in out):
            out += [p for p in pages[PAGES:] if p.document.jurisdiction in group][:1]
    return out


def candidates(
    query: Query, pages: Sequence[PageHit], texts: Mapping[str, tuple[str, bool]] | None = None
) -> list[Candidate]:
    """The quotable units of the ``quoted_pages`` (raw page text from ``texts``, else the
    page's passage), a sentence repeated on several pages kept once."""
    out: list[Candidate] = []
    seen: set[str] = set()
    for order, p in enumerate(quoted_pages(query, pages)):
        raw, risk = (texts or {}).get(p.page) or (p.passage, False)
        for j, u in quote_units(raw):
            if u.text in seen:
                continue
            seen.add(u.text)
            out.append(Candidate(u, p, order, j, risk, _stems(u.text)))
    return out


def featurise(
    query: Query,
    cands: Sequence[Candidate],
    cosines: Callable[[Sequence[str]], Mapping[str, np.ndarray]] | None = None,
) -> None:
    """Set every candidate's ``features`` (see ``FEATURE_WORDS``). ``cosines`` maps the
    candidates' texts to {"e5": …, "minilm": …} arrays of cosines with the question
    (``support.features.sentence_cosines``); without it both are 0. In two steps, so that
    a search does the first while the question's vector is still being encoded."""
    prepare(query, cands)
    add_cosines(cands, cosines)


#: the features ``add_cosines`` sets (``prepare`` holds their places with 0)
COSINE_FEATURES = ("e5", "e5_gap", "minilm", "minilm_gap", "neighbour")


def prepare(query: Query, cands: Sequence[Candidate]) -> None:
    """Every feature but the cosines (``COSINE_FEATURES``, 0 until ``add_cosines``)."""
    if not cands:
        return
    w = query.stems
    total = sum(w.values()) or 1.0
    lexical = [sum(v for s, v in w.items() if s in c.stems) / total for c in cands]
    ceiling = total * (K1 + 1)
    q_roles = set(query.roles)
    exc_q = float(bool(_EXCEPTION_Q.search(query.text)))
    others = [k for k in query.kinds if k in ("actor", "list", "condition")]
    per_page: dict[str, int] = {}
    for c in cands:
        per_page[c.page.page] = max(per_page.get(c.page.page, 0), c.position + 1)
    heads: dict[str, frozenset[str]] = {}
    for i, c in enumerate(cands):
        head = heads.setdefault(c.unit.heading, _stems(c.unit.heading))
        tf = _stem_counts(c.text)
        n = sum(tf.values()) or 1
        bm = sum(
            v * tf[s] * (K1 + 1) / (tf[s] + K1 * (1 - B + B * n / AVG_UNIT_WORDS))
            for s, v in w.items()
            if s in tf
        )
        c.features = {
            "e5": 0.0,
            "e5_gap": 0.0,
            "minilm": 0.0,
            "minilm_gap": 0.0,
            "bm25": bm / ceiling if ceiling else 0.0,
            "share": lexical[i],
            "heading": sum(v for s, v in w.items() if s in head and s not in c.stems) / total,
            "value_asked": float(query.value is not None),
            "value_stated": float(query.value is not None and states(c.text, query.value.kind, c.unit.kind)),
            "kinds_asked": float(bool(others)),
            "other_stated": (
                sum(states(c.text, k, c.unit.kind) for k in others) / len(others) if others else 0.0
            ),
            **role_features(roles_in(c.text), q_roles),
            "exception_q": exc_q,
            "exception_s": float(bool(_EXCEPTION_S.search(c.text))),
            "neighbour": 0.0,
            "page_rank": 1.0 / (c.order + 1),
            "position": c.position / max(1, per_page[c.page.page] - 1),
            "is_list": float(c.unit.kind in ("list", "item")),
            "length": math.log(len(c.text)),
            "numbers": float(states(c.text, "number")),
            **dict.fromkeys(XENC_FEATURES, 0.0),
        }


def add_cosines(
    cands: Sequence[Candidate], cosines: Callable[[Sequence[str]], Mapping[str, np.ndarray]] | None
) -> None:
    """The cosine features of ``prepare``d candidates. Only the lexically closest units
    are embedded (encoding every unit of three pages costs seconds on a loaded CPU); the
    others take the least cosine of those embedded. The units of the first ``PAGES`` pages
    and those of each further page (a compared side's, ``quoted_pages``) are set apart:
    a side's page neither takes the first pages' embedding places nor moves their gaps."""
    parts: dict[int, list[Candidate]] = {}
    for c in cands:
        parts.setdefault(max(c.order, PAGES - 1), []).append(c)
    for part in parts.values():
        _add_cosines(part, cosines)


def _add_cosines(
    cands: Sequence[Candidate], cosines: Callable[[Sequence[str]], Mapping[str, np.ndarray]] | None
) -> None:
    if not cands:
        return
    keep = sorted(range(len(cands)), key=lambda i: (-cands[i].features["share"], i))[:EMBEDDED]
    sims = dict(cosines([cands[i].text for i in keep])) if cosines else {}
    e5, ml = (_spread(sims.get(k), keep, len(cands)) for k in ("e5", "minilm"))
    for i, c in enumerate(cands):
        nb = [e5[j] for j in (i - 1, i + 1) if 0 <= j < len(cands) and cands[j].page is c.page]
        c.features.update(
            e5=float(e5[i]),
            e5_gap=float(e5[i] - e5.max()),
            minilm=float(ml[i]),
            minilm_gap=float(ml[i] - ml.max()),
            neighbour=float(max(nb)) if nb else 0.0,
        )


def xenc_order(feats: Sequence[Mapping[str, float]]) -> list[int]:
    """Candidates (their features, in candidate order) in the order the cross-encoder reads
    them: the closest by e5 first, then by the share of the question's words they hold."""
    return sorted(range(len(feats)), key=lambda i: (-feats[i]["e5"], -feats[i]["share"], i))


def set_xenc(feats: Sequence[dict[str, float]], keep: Sequence[int], values: Any, name: str) -> None:
    """Set feature ``name`` (the logits of the ``keep`` candidates, the least of them
    elsewhere) and ``name``_gap (the logit minus the best of the part)."""
    x = _spread(values, keep, len(feats))
    for f, v in zip(feats, x.tolist(), strict=True):
        f[name] = float(v)
        f[f"{name}_gap"] = float(v - x.max()) if len(x) else 0.0


def add_xenc(
    question: str,
    cands: Sequence[Candidate],
    names: Sequence[str],
    quoted: Callable[[Candidate], str] | None = None,
    n: int = XENC_UNITS,
) -> None:
    """The cross-encoder features among ``names`` (``XENC_FEATURES``) of ``add_cosines``'d
    candidates: per part (as ``add_cosines``), the logit of (question, text) for its first
    ``n`` units by ``xenc_order``, pairs cut to ``XENC_TOKENS``; ``xenc`` reads the unit as
    it is quoted (``quoted``: ``support.answer.passages``; without it the unit alone),
    ``xenc_unit`` the unit alone. Why: the cosines cannot tell the stating sentence from
    its topical neighbour; a cross-encoder, reading both texts together, can."""
    from sourcepage.support.crossenc import logits

    parts: dict[int, list[Candidate]] = {}
    for c in cands:
        parts.setdefault(max(c.order, PAGES - 1), []).append(c)
    for part in parts.values():
        keep = xenc_order([c.features for c in part])[:n]
        feats = [c.features for c in part]
        if "xenc" in names or "xenc_gap" in names:
            texts = [(quoted or (lambda c: c.text))(part[i]) for i in keep]
            set_xenc(feats, keep, logits(question, texts, XENC_TOKENS), "xenc")
        if "xenc_unit" in names or "xenc_unit_gap" in names:
            texts = [part[i].text for i in keep]
            set_xenc(feats, keep, logits(question, texts, XENC_TOKENS), "xenc_unit")


def _spread(values: Any, keep: Sequence[int], n: int) -> np.ndarray:
    """Cosines of the embedded units at their places, the least of them elsewhere."""
    if values is None or not len(keep):
        return np.zeros(n)
    vals = np.asarray(values, dtype=np.float64)
    out = np.full(n, float(vals.min()))
    out[list(keep)] = vals
    return out


@lru_cache(maxsize=16384)
def _stem_counts(text: str) -> Mapping[str, int]:
    """Stem → count in ``text``, in text order (read-only: cached)."""
    from sourcepage.retrieval.tokenize import TokenizerConfig, tokenize

    out: dict[str, int] = {}
    for s in tokenize(text, TokenizerConfig(stopwords=True, stem=True)):
        out[s] = out.get(s, 0) + 1
    return MappingProxyType(out)


@dataclass(frozen=True)
class QuoteModel:
    """The fitted selector and the gate's thresholds (``quote_model.json``)."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    t_support: float
    t_quote: float
    meta: Mapping[str, Any] = field(default_factory=dict)

    def proba(self, rows: Sequence[Mapping[str, float]]) -> np.ndarray:
        """P(states the answer) of feature dicts."""
        if not rows:
            return np.zeros(0)
        x = np.array([[float(r[f]) for f in self.features] for r in rows])
        z = (x - np.array(self.mean)) / np.array(self.scale)
        return 1.0 / (1.0 + np.exp(-(z @ np.array(self.coef) + self.intercept)))

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "coef": list(self.coef),
            "intercept": self.intercept,
            "t_support": self.t_support,
            "t_quote": self.t_quote,
            **dict(self.meta),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> QuoteModel:
        keys = ("schema", "features", "mean", "scale", "coef", "intercept", "t_support", "t_quote")
        return cls(
            tuple(d["features"]),
            tuple(d["mean"]),
            tuple(d["scale"]),
            tuple(d["coef"]),
            float(d["intercept"]),
            float(d["t_support"]),
            float(d["t_quote"]),
            {k: v for k, v in d.items() if k not in keys},
        )


@lru_cache(maxsize=1)
def quote_model() -> QuoteModel | None:
    """The shipped selector (None when the file is absent or of another schema)."""
    try:
        d = json.loads(resources.files("sourcepage.support").joinpath(MODEL_FILE).read_text("utf-8"))
    except FileNotFoundError:
        return None
    return QuoteModel.from_dict(d) if d.get("schema") == SCHEMA else None


def score(cands: Sequence[Candidate], model: QuoteModel | None) -> None:
    """Set each candidate's ``p``: the model's P(states), or without a model the rule of
    before the model: a unit answers when it states a fact of an asked kind and holds a
    quarter of the question's (idf-weighted) words, its heading counting half — or, for a
    question of no recognised kind, 40% of them; p = 0.5 + relevance / 2 when it answers,
    relevance / 2 when not (so ``RULE_THRESHOLD`` 0.5 separates them)."""
    if model is not None:
        for c, p in zip(cands, model.proba([c.features for c in cands]), strict=True):
            c.p = float(p)
        return
    for c in cands:
        f = c.features
        rel = min(1.0, f["share"] + 0.5 * f["heading"])
        asked = f["value_asked"] or f["kinds_asked"]
        stated = f["value_stated"] or f["other_stated"] > 0
        answers = rel >= 0.25 and stated if asked else rel >= 0.4
        c.p = (0.5 + rel / 2) if answers else rel / 2
