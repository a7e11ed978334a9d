"""BM25 over chunks with bm25s.

Variant ``robertson`` (the default, named in params.json): Okapi BM25 as in the study
(§3.4), k1=1.5, b=0.75, IDF(t) = ln((N − df + 0.5)/(df + 0.5)) floored at 0 — the
same scores as rank_bm25's ``BM25Okapi(k1, b, epsilon=0)``, which a test checks to
1e-6. bm25s's other variants (``lucene``, ``atire``, ``bm25l``, ``bm25+``) are
selectable. Scores are float64 so that parity holds.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import bm25s
import numpy as np

from sourcepage.retrieval.tokenize import tokenize

if TYPE_CHECKING:
    from sourcepage.retrieval.methods import Method
    from sourcepage.retrieval.settings import BuildContext, IndexSettings

VARIANTS = ("robertson", "lucene", "atire", "bm25l", "bm25+")


def build(
    corpus_tokens: list[list[str]], k1: float = 1.5, b: float = 0.75, variant: str = "robertson"
) -> bm25s.BM25:
    """Index pre-tokenized chunks."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown BM25 variant {variant!r}; choose from {VARIANTS}")
    model = bm25s.BM25(k1=k1, b=b, method=variant, dtype="float64")
    model.index(corpus_tokens, show_progress=False)
    return model


def scores(model: bm25s.BM25, query_tokens: list[str]) -> np.ndarray:
    """BM25 score of every chunk for the query (tokens unknown to the index ignored)."""
    vocab = model.vocab_dict
    known = [t for t in query_tokens if t in vocab]
    n = model.scores["num_docs"]
    if not known:
        return np.zeros(n, dtype=np.float64)
    out = np.asarray(model.get_scores(known), dtype=np.float64)
    if model.method == "robertson":  # bm25s leaves out Okapi's (k1 + 1) numerator factor
        out *= model.k1 + 1
    return out


def save(model: bm25s.BM25, folder: Path) -> None:
    model.save(str(folder))


def load(folder: Path) -> bm25s.BM25:
    return bm25s.BM25.load(str(folder))


class Bm25Method:
    """The registered method ``bm25`` (``retrieval.methods``)."""

    kind = "bm25"
    grammar = "bm25"
    default_arg = ""
    summary = "Okapi BM25 over chunk tokens (bm25s)"

    def parse_arg(self, arg: str) -> str:
        if arg:
            raise ValueError(f"bm25 takes no argument, got 'bm25:{arg}'")
        return ""

    def examples(self) -> list[str]:
        return ["bm25"]

    def settings(self, method: Method, settings: IndexSettings) -> dict[str, Any]:
        return {
            "tokenizer": asdict(settings.tokenizer),
            "k1": settings.k1,
            "b": settings.b,
            "variant": settings.bm25_variant,
        }

    def build(
        self, method: Method, texts: list[str], folder: Path, settings: IndexSettings, ctx: BuildContext
    ) -> None:
        tokens = [tokenize(t, settings.tokenizer) for t in texts]
        save(build(tokens, settings.k1, settings.b, settings.bm25_variant), folder)

    def load(self, method: Method, folder: Path, settings: IndexSettings) -> bm25s.BM25:
        return load(folder)

    def scores(self, method: Method, model: bm25s.BM25, query: str, settings: IndexSettings) -> np.ndarray:
        return scores(model, tokenize(query, settings.tokenizer))


METHOD = Bm25Method()
