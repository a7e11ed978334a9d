"""What an index build needs besides the chunks: its settings and its context."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sourcepage.retrieval.tokenize import TokenizerConfig

if TYPE_CHECKING:
    from sourcepage.retrieval.methods import Method


DENSE_SEARCH = ("auto", "exact", "ann")


@dataclass(frozen=True)
class IndexSettings:
    """Parameters that decide an index's content (each method records its subset in params.json)."""

    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    k1: float = 1.5
    b: float = 0.75
    bm25_variant: str = "robertson"
    lsa_dims: int = 256
    seed: int = 42
    #: LSA keeps every unigram and the bigrams found in at least this many chunks
    lsa_min_df: int = 3
    #: dense search: "auto" (an approximate nearest-neighbour index from
    #: ``retrieval.ann.ANN_MIN_CHUNKS`` chunks up, exact below), "exact" or "ann" (always)
    dense_search: str = "auto"

    def __post_init__(self) -> None:
        if self.dense_search not in DENSE_SEARCH:
            raise ValueError(f"dense search {self.dense_search!r}: use one of {', '.join(DENSE_SEARCH)}")

    def for_method(self, method: Method) -> dict[str, Any]:
        """The subset of settings that matters to ``method`` (asked of its registered object)."""
        return method.spec.settings(method, self)  # type: ignore[union-attr]


@dataclass
class BuildContext:
    """Services a build may use: the store's embedding cache and a progress callback."""

    cache_get: Callable[[str, list[str]], dict[str, Any]] | None = None
    cache_put: Callable[[str, dict[str, Any]], None] | None = None
    progress: Callable[[int, int], None] | None = None
