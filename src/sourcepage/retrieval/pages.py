"""Chunk → page collapse (study §3.4): a page's score is its best chunk's score.

Pages are ranked by score descending; ties are broken by page id in natural order
(document id, then page number), and the best chunk of a page by chunk order, so
equal inputs always give the same ranking.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from sourcepage.records import Hit


def collapse(
    chunk_scores: np.ndarray,
    chunk_pages: np.ndarray,
    page_ids: list[str],
    chunk_ids: list[str],
    mask: np.ndarray | None = None,
    depth: int | None = None,
    min_score: float | None = None,
) -> list[Hit]:
    """Rank unique pages.

    ``chunk_pages[i]`` is the index (into ``page_ids``, which must be in natural
    page order) of chunk i's credited page. ``mask`` keeps only chunks allowed by
    filters; ``min_score`` drops chunks scoring at or below it (e.g. 0 for BM25,
    a chunk with no query term is not retrieved).
    """
    keep = np.ones(len(chunk_scores), dtype=bool) if mask is None else mask.copy()
    if min_score is not None:
        keep &= chunk_scores > min_score
    idx = np.flatnonzero(keep)
    if idx.size == 0:
        return []
    s, p = chunk_scores[idx], chunk_pages[idx]
    order = np.lexsort((idx, p, -s))  # score desc, then page order, then chunk order
    _, first = np.unique(p[order], return_index=True)
    best = order[first]  # best chunk position per page (in idx space)
    ranked = best[np.lexsort((p[best], -s[best]))]
    if depth is not None:
        ranked = ranked[:depth]
    return [
        Hit(rank=r, page_id=page_ids[p[j]], score=float(s[j]), chunk_id=chunk_ids[idx[j]])
        for r, j in enumerate(ranked, 1)
    ]


_NAVIGATION = re.compile(
    r"\b(?:table of contents|contents pages?|which (?:chapter|section|part)s?\b|where in (?:the|this) "
    r"(?:booklet|document|guide|publication|manual))",
    re.IGNORECASE,
)


def navigation_question(question: str) -> bool:
    """True for a question about where things are in a document ("which section covers …"),
    the one kind a table of contents answers."""
    return _NAVIGATION.search(question) is not None


def contents_last(hits: Sequence[Hit], contents: set[str]) -> list[Hit]:
    """The ranking with every page in ``contents`` (tables of contents, from the audit)
    moved after the other pages, order kept within each group, ranks renumbered.

    A contents page shares every topic word of its document, so it scores high, yet it
    supports no answer: it must never rank first for a content question. Its own score is
    kept (so scores are no longer monotone in rank after the first contents page)."""
    if not contents or not any(h.page_id in contents for h in hits):
        return list(hits)
    order = [h for h in hits if h.page_id not in contents] + [h for h in hits if h.page_id in contents]
    return [
        Hit(rank=r, page_id=h.page_id, score=h.score, chunk_id=h.chunk_id) for r, h in enumerate(order, 1)
    ]
