"""BM25 over chunks: bm25s's formulas on our own sharded, memory-mapped postings.

Variant ``robertson`` (the default, named in params.json): Okapi BM25 as in the study
(§3.4), k1=1.5, b=0.75, IDF(t) = ln((N − df + 0.5)/(df + 0.5)) floored at 0 — the
same scores as rank_bm25's ``BM25Okapi(k1, b, epsilon=0)``, which a test checks to
1e-6. bm25s's other variants (``lucene``, ``atire``, ``bm25l``, ``bm25+``, δ = 0.5) are
selectable. Scores are float64 so that parity holds.

The weights are bm25s 0.3's (``bm25s.scoring``), evaluated with the same floating-point
operations in the same order, and a query sums them in query order as bm25s does, so
the scores are bit-identical to a ``bm25s.BM25(method=variant, dtype="float64")`` index
(tested) — but the index is built in bounded memory from a stream of chunks, in shards
with exact global statistics, and memory-mapped at query time (retrieval.postings).
bm25s itself is not imported here (its package imports numba: ~0.2 s a process).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sourcepage.retrieval.postings import FORMAT as POSTINGS_FORMAT
from sourcepage.retrieval.postings import SHARD_DOCS, Postings, build_postings, load_postings
from sourcepage.retrieval.tokenize import tokenize
from sourcepage.store.files import load_array

if TYPE_CHECKING:
    from sourcepage.retrieval.methods import Method
    from sourcepage.retrieval.settings import BuildContext, IndexSettings

VARIANTS = ("robertson", "lucene", "atire", "bm25l", "bm25+")


def idf(df: int, n: int) -> float:
    """Lucene's idf, ln(1 + (N − df + 0.5)/(df + 0.5)): ≥ 0, largest for unseen terms (df 0).
    The one spelling of it: BM25 ``lucene``, the question's term weights (``query``), the
    heading idf of ``sections`` and the features of ``ltr``."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _idf(variant: str, df: int, n: int) -> float:
    """bm25s.scoring's ``_score_idf_<variant>`` (Python floats and ``math.log``, as there)."""
    if variant == "robertson":
        inner = (n - df + 0.5) / (df + 0.5)
        return math.log(1 if inner < 1 else inner)
    if variant == "lucene":
        return idf(df, n)
    if variant == "atire":
        return math.log(n / df)
    if variant == "bm25l":
        return math.log((n + 1) / (df + 0.5))
    return math.log((n + 1) / df)  # bm25+


def _tfc(variant: str, tf: Any, l_d: Any, l_avg: float, k1: float, b: float, delta: float) -> Any:
    """bm25s.scoring's ``_score_tfc_<variant>``, operation for operation."""
    if variant in ("robertson", "lucene"):
        return tf / (k1 * ((1 - b) + b * l_d / l_avg) + tf)
    if variant == "atire":
        return (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * l_d / l_avg))
    if variant == "bm25l":
        c = tf / (1 - b + b * l_d / l_avg)
        return ((k1 + 1) * (c + delta)) / (k1 + c + delta)
    return ((k1 + 1) * tf) / (k1 * (1 - b + b * l_d / l_avg) + tf) + delta  # bm25+


@dataclass(frozen=True)
class Bm25Params:
    """BM25's settings (the method's ``settings_type``, experiment.yaml section ``bm25``):
    the defaults here are the only place they are written."""

    k1: float = 1.5
    b: float = 0.75
    variant: str = "robertson"
    #: bm25s's δ of BM25L and BM25+
    delta: float = 0.5

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown BM25 variant {self.variant!r}; choose from {VARIANTS}")

    def idf(self, df: np.ndarray, n: int) -> np.ndarray:
        """IDF per term, one ``math.log`` per distinct document frequency."""
        values, inverse = np.unique(np.asarray(df), return_inverse=True)
        return np.array([_idf(self.variant, int(d), n) for d in values], dtype=np.float64)[inverse]

    def nonoccurrence(self, idf: np.ndarray, l_avg: float) -> np.ndarray | None:
        """BM25L / BM25+: the score of a term a document lacks (bm25s's non-occurrence array)."""
        if self.variant not in ("bm25l", "bm25+"):
            return None
        return idf * _tfc(self.variant, 0, l_avg, l_avg, self.k1, self.b, self.delta)

    def weigh(
        self, terms: np.ndarray, tf: np.ndarray, lengths: np.ndarray, df: np.ndarray, n: int, l_avg: float
    ) -> np.ndarray:
        """Each posting's weight: IDF × term-frequency component (− the non-occurrence score)."""
        idf = self.idf(df, n)
        w = idf[terms] * _tfc(self.variant, tf, lengths, l_avg, self.k1, self.b, self.delta)
        non = self.nonoccurrence(idf, l_avg)
        if non is not None:
            w -= non[terms]
        return w


@dataclass
class Bm25Index:
    """Postings plus what a query needs besides them."""

    postings: Postings
    params: Bm25Params
    nonoccurrence: np.ndarray | None

    @property
    def n_docs(self) -> int:
        return self.postings.n_docs

    def score_parts(self, query_tokens: list[str]) -> list[np.ndarray]:
        """BM25 scores per shard (tokens unknown to the index ignored)."""
        ids = self.postings.term_ids(query_tokens)
        if not ids.size:
            return [np.zeros(s.n_docs, dtype=np.float64) for s in self.postings.shards]
        parts = self.postings.shard_scores(ids)
        if self.nonoccurrence is not None:
            extra = self.nonoccurrence[ids].sum()
            for p in parts:
                p += extra
        if self.params.variant == "robertson":  # bm25s leaves out Okapi's (k1 + 1) numerator factor
            for p in parts:
                p *= self.params.k1 + 1
        return parts

    def term_df(self) -> TermDf:
        return TermDf(self.postings)


class TermDf:
    """term → chunk frequency (a read-only mapping over the index's vocabulary)."""

    def __init__(self, postings: Postings):
        self._p = postings

    def get(self, term: str, default: int = 0) -> int:
        i = self._p.vocab.id(term)
        return int(self._p.df[i]) if i >= 0 else default

    def __getitem__(self, term: str) -> int:
        i = self._p.vocab.id(term)
        if i < 0:
            raise KeyError(term)
        return int(self._p.df[i])

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self._p.vocab.id(term) >= 0

    def __len__(self) -> int:
        return len(self._p.vocab)


def _build(
    token_lists: Iterable[list[str]], params: Bm25Params, folder: Path | None, shard_docs: int
) -> Bm25Index:
    postings = build_postings(token_lists, params.weigh, folder, shard_docs)
    non = params.nonoccurrence(params.idf(postings.df, postings.n_docs), postings.mean_length)
    if folder is not None and non is not None:
        np.save(folder / "nonoccurrence.npy", non)
    return Bm25Index(postings, params, non)


def build(
    corpus_tokens: Iterable[list[str]],
    k1: float = Bm25Params.k1,
    b: float = Bm25Params.b,
    variant: str = Bm25Params.variant,
    shard_docs: int = SHARD_DOCS,
) -> Bm25Index:
    """Index pre-tokenized chunks in memory."""
    return _build(corpus_tokens, Bm25Params(k1, b, variant), None, shard_docs)


def build_into(
    corpus_tokens: Iterable[list[str]],
    folder: Path,
    params: Bm25Params | None = None,
    shard_docs: int = SHARD_DOCS,
) -> Bm25Index:
    """Index pre-tokenized chunks into ``folder`` (as the registered method does), memory-mapped."""
    return _build(corpus_tokens, params or Bm25Params(), folder, shard_docs)


def scores(model: Bm25Index, query_tokens: list[str]) -> np.ndarray:
    """BM25 score of every chunk for the query (tokens unknown to the index ignored)."""
    parts = model.score_parts(query_tokens)
    return np.concatenate(parts) if len(parts) != 1 else parts[0]


def load(folder: Path, params: Bm25Params) -> Bm25Index:
    non_path = folder / "nonoccurrence.npy"
    non = load_array(non_path, mmap=True) if non_path.exists() else None
    return Bm25Index(load_postings(folder), params, non)


class Bm25Method:
    """The registered method ``bm25`` (``retrieval.methods``)."""

    kind = "bm25"
    grammar = "bm25"
    default_arg = ""
    summary = "Okapi BM25 over chunk tokens (sharded, memory-mapped postings)"
    shard_docs = SHARD_DOCS
    settings_type = Bm25Params  # the experiment.yaml section ``bm25``

    def parse_arg(self, arg: str) -> str:
        if arg:
            raise ValueError(f"bm25 takes no argument, got 'bm25:{arg}'")
        return ""

    def examples(self) -> list[str]:
        return ["bm25"]

    def settings(self, method: Method, settings: IndexSettings) -> dict[str, Any]:
        p = self.params(settings)
        out = {
            "tokenizer": asdict(settings.tokenizer),
            "k1": p.k1,
            "b": p.b,
            "variant": p.variant,
            "storage": f"postings-{POSTINGS_FORMAT}",  # an index of another layout is stale
        }
        if p.delta != Bm25Params.delta:  # recorded only when set: indexes of the default need no rebuild
            out["delta"] = p.delta
        return out

    def params(self, settings: IndexSettings) -> Bm25Params:
        return settings.of(self.kind)

    def build(
        self, method: Method, texts: Iterable[str], folder: Path, settings: IndexSettings, ctx: BuildContext
    ) -> None:
        tokens = (tokenize(t, settings.tokenizer) for t in texts)
        _build(tokens, self.params(settings), folder, self.shard_docs)

    def load(self, method: Method, folder: Path, settings: IndexSettings) -> Bm25Index:
        return load(folder, self.params(settings))

    def scores(self, method: Method, model: Bm25Index, query: str, settings: IndexSettings) -> np.ndarray:
        return scores(model, tokenize(query, settings.tokenizer))

    def score_parts(
        self, method: Method, model: Bm25Index, query: str, settings: IndexSettings
    ) -> list[np.ndarray]:
        return model.score_parts(tokenize(query, settings.tokenizer))


METHOD = Bm25Method()
