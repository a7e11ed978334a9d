"""Reciprocal rank fusion of page rankings (Cormack et al. 2009; study §3.4).

RRF(p) = Σ_m 1 / (k + rank_m(p)), k = 60 by default (``RrfSettings``), over the methods whose ranking holds p.
Ranks, never raw scores, are combined. Each input ranking must hold unique pages
(page collapse guarantees it; a duplicate raises). Ties are broken by the page's
natural order, given as ``page_order``; a fused hit keeps the chunk of the method
that ranked the page best (the first such method on equal ranks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sourcepage.records import Hit

if TYPE_CHECKING:
    from sourcepage.retrieval.methods import Method
    from sourcepage.retrieval.parsed import Parsed
    from sourcepage.retrieval.search import Searcher


@dataclass(frozen=True)
class RrfSettings:
    """RRF's settings (the stage's ``settings_type``, experiment.yaml section ``rrf``):
    ``k`` and the depth each input ranking is cut at (None: all)."""

    k: int = 60
    depth: int | None = None

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be 1 or more, got {self.k}")


#: the default k; also the reciprocal-rank constant of ``ltr`` (whose fitted model was
#: trained on RRF features with it) and of the section stage: theirs, not a design's rrf.k
RRF_K = RrfSettings.k


def rrf(
    rankings: Sequence[Sequence[Hit]],
    page_order: Mapping[str, int],
    k: int = RRF_K,
    depth: int | None = None,
) -> list[Hit]:
    """Fuse page rankings; ``depth`` cuts each input ranking first (None: all)."""
    score: dict[str, float] = {}
    best: dict[str, tuple[int, int, str]] = {}
    for m, ranking in enumerate(rankings):
        seen: set[str] = set()
        for h in ranking[:depth] if depth else ranking:
            if h.page_id in seen:
                raise ValueError(f"ranking {m} holds page {h.page_id} twice; collapse chunks first")
            seen.add(h.page_id)
            score[h.page_id] = score.get(h.page_id, 0.0) + 1.0 / (k + h.rank)
            cand = (h.rank, m, h.chunk_id)
            if h.page_id not in best or cand < best[h.page_id]:
                best[h.page_id] = cand
    # rounding makes sums of the same reciprocals in another order compare equal
    pages = sorted(score, key=lambda p: (-round(score[p], 12), page_order.get(p, 1 << 30), p))
    return [Hit(rank=r, page_id=p, score=score[p], chunk_id=best[p][2]) for r, p in enumerate(pages, 1)]


class RrfMethod:
    """The registered stage ``rrf:<a>+<b>[+<c>]``: RRF of the base methods' page rankings,
    with the searcher's ``RrfSettings`` (k, and the depth each ranking is cut at)."""

    kind = "rrf"
    settings_type, fused = RrfSettings, True
    grammar = "rrf:<a>+<b>[+<c>]"
    summary = f"reciprocal rank fusion of base methods' page ranks (k = {RrfSettings.k})"
    arity = "many"

    def examples(self, bases: Sequence[str]) -> list[str]:
        return ["rrf:bm25+lsa"] + (["rrf:bm25+dense"] if "dense" in bases else [])

    def rank(
        self,
        searcher: Searcher,
        method: Method,
        query: str,
        k: int | None,
        filters: dict[str, list[str]],
        parsed: Parsed | None = None,
    ) -> list[Hit]:
        own = searcher.settings.of(self.kind)
        parts = [searcher.ranked(p, query, own.depth, filters, parsed) for p in method.parts]
        hits = rrf(parts, searcher.index(method.parts[0]).page_order, own.k)
        return hits[:k] if k else hits


METHOD = RrfMethod()
