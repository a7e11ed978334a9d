"""Chunk → page collapse (study §3.4): a page's score is its best chunk's score.

Pages are ranked by score descending; ties are broken by page id in natural order
(document id, then page number), and the best chunk of a page by chunk order, so
equal inputs always give the same ranking.

With a ``depth``, only the top candidates are collapsed, not every chunk: the m-th best
eligible score T is found by partial selection over the values above a sampled estimate
(over every document-aligned part; ``_mth_largest``), the chunks scoring above T are kept
(part by part), and of the chunks scoring
exactly T (often every chunk without a query term, score 0) only those of the pages
that can still enter the ranking: the smallest page positions, since equal scores are
ordered by page. A page's best chunk scores at least T if and only if it is among the
kept chunks, so the first ``depth`` pages are exactly those of the full collapse; when
the candidates hold fewer than ``depth`` pages, m grows (×4) until they do or every
eligible chunk is in. Tested against the full collapse.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from sourcepage.records import Hit, renumber

#: candidate chunks per requested page in the first selection round (pages have several chunks)
CANDIDATES_PER_PAGE = 4
#: the pages a ranking of "every page" holds when it comes from top chunks only: RRF's inputs
#: (a page at rank 1000 adds at most 1/1060 to a fused score, the first page 1/61)
TOP_PAGES = 1000


def collapse(
    chunk_scores: np.ndarray | Sequence[np.ndarray],
    chunk_pages: np.ndarray,
    page_ids: list[str],
    chunk_ids: Sequence[str],
    mask: np.ndarray | None = None,
    depth: int | None = None,
    min_score: float | None = None,
) -> list[Hit]:
    """Rank unique pages.

    ``chunk_scores`` is one score per chunk, or its document-aligned parts (shards, in
    chunk order). ``chunk_pages[i]`` is the index (into ``page_ids``, which must be in
    natural page order) of chunk i's credited page. ``mask`` keeps only chunks allowed by
    filters; ``min_score`` drops chunks scoring at or below it (e.g. 0 for BM25, a chunk
    with no query term is not retrieved); ``depth`` cuts the ranking (None: every page).
    """
    parts = [chunk_scores] if isinstance(chunk_scores, np.ndarray) else list(chunk_scores)
    if depth is not None and depth <= 0:
        return []
    if depth is None:
        idx = np.concatenate([_eligible(s, o, mask, min_score) for s, o in _offsets(parts)])
        scores = np.concatenate(parts)[idx] if idx.size else np.zeros(0)
        return _rank(idx, scores, chunk_pages, page_ids, chunk_ids, None)
    m = CANDIDATES_PER_PAGE * depth + 16
    while True:
        idx, scores, complete = _candidates(parts, chunk_pages, len(page_ids), mask, min_score, m, depth)
        hits = _rank(idx, scores, chunk_pages, page_ids, chunk_ids, depth)
        if len(hits) >= depth or complete:
            return hits
        m *= 4


def collapse_top(
    fetch: Callable[[int], tuple[np.ndarray, np.ndarray]],
    n_chunks: int,
    chunk_pages: np.ndarray,
    page_ids: list[str],
    chunk_ids: Sequence[str],
    mask: np.ndarray | None,
    depth: int | None,
) -> list[Hit]:
    """Rank the first ``depth`` pages (None: ``TOP_PAGES``) from a method's top chunks only
    (an approximate nearest-neighbour index): ``fetch(m)`` gives the (chunk indices,
    scores) of the method's best m chunks; chunks it does not return are not retrieved.
    Pages collapse as in :func:`collapse`; m grows (×4) until the chunks allowed by ``mask``
    hold ``depth`` pages or m reaches every chunk."""
    depth = TOP_PAGES if depth is None else depth
    if depth <= 0:
        return []
    m = CANDIDATES_PER_PAGE * depth + 16
    while True:
        m = min(m, n_chunks)
        idx, scores = fetch(m)
        order = np.argsort(idx, kind="stable")
        idx, scores = idx[order], np.asarray(scores, dtype=np.float64)[order]
        if mask is not None:
            keep = mask[idx]
            idx, scores = idx[keep], scores[keep]
        hits = _rank(idx, scores, chunk_pages, page_ids, chunk_ids, depth)
        if len(hits) >= depth or m >= n_chunks:
            return hits
        m *= 4


def _offsets(parts: list[np.ndarray]) -> list[tuple[np.ndarray, int]]:
    out, o = [], 0
    for s in parts:
        out.append((s, o))
        o += len(s)
    return out


def _eligible(s: np.ndarray, offset: int, mask: np.ndarray | None, min_score: float | None) -> np.ndarray:
    """Global indices of the chunks of one part that pass the mask and ``min_score``."""
    keep = np.ones(len(s), dtype=bool) if mask is None else mask[offset : offset + len(s)].copy()
    if min_score is not None:
        keep &= s > min_score
    return np.flatnonzero(keep) + offset


def _candidates(
    parts: list[np.ndarray],
    chunk_pages: np.ndarray,
    n_pages: int,
    mask: np.ndarray | None,
    min_score: float | None,
    m: int,
    depth: int,
) -> tuple[np.ndarray, np.ndarray, bool]:
    """(global chunk indices in chunk order, their scores, whether every eligible chunk is
    among them): every eligible chunk scoring above the m-th best eligible score T and the
    T-scoring chunks of the pages that can still rank (see the module docstring)."""
    plain = mask is None and min_score is None
    vals = [s if plain else s[_eligible(s, o, mask, min_score) - o] for s, o in _offsets(parts)]
    n_eligible = sum(len(v) for v in vals)
    if n_eligible <= m:  # every eligible chunk is a candidate
        idx = np.concatenate([_eligible(s, o, mask, min_score) for s, o in _offsets(parts)])
        return idx, np.concatenate(parts)[idx] if idx.size else np.zeros(0), True
    t = _mth_largest(vals, n_eligible, m)
    above, ties = [], []
    for s, o in _offsets(parts):
        ok = s >= t
        if mask is not None:
            ok &= mask[o : o + len(s)]
        if min_score is not None:
            ok &= s > min_score
        i = np.flatnonzero(ok)
        hi = s[i] > t
        above.append(i[hi] + o)
        ties.append(i[~hi] + o)
    up, tie = np.concatenate(above), np.concatenate(ties)
    # of the T-scoring chunks keep those of the smallest page positions: enough pages for
    # the ranking even if every page already holding a higher chunk is among them
    want = depth + len(_first_of_each(chunk_pages[up]))
    if len(tie) <= want:
        idx = np.sort(np.concatenate([up, tie]))
        return idx, _gather(parts, idx), False
    present = np.zeros(n_pages, dtype=bool)
    present[chunk_pages[tie]] = True
    chosen = np.flatnonzero(present)[:want]
    if len(chosen) < np.count_nonzero(present):
        present[:] = False
        present[chosen] = True
        tie = tie[present[chunk_pages[tie]]]
    idx = np.sort(np.concatenate([up, tie]))
    return idx, _gather(parts, idx), False


#: values sampled (strided, deterministic) to estimate where the top candidates start
SAMPLE = 4096


def _mth_largest(vals: list[np.ndarray], n: int, m: int) -> float:
    """The m-th largest of the values of ``vals`` (n of them, n > m), exactly.

    A sorted strided sample gives a value ``est`` with about 8m values above it; the m-th
    largest is then selected among the values above ``est`` only, a few hundred instead of
    n (``np.partition`` over all of them is slow on the many equal scores of BM25: every
    chunk without a query term scores 0). If fewer than m values exceed ``est``, it is the
    answer when at least m reach it, else a lower sample value is tried."""
    stride = max(1, n // SAMPLE)
    sample = np.sort(np.concatenate([v[::stride] for v in vals]))
    r = max(4, -(-8 * m * len(sample) // n))  # sample rank of the estimate, from the top
    while True:
        est = sample[max(0, len(sample) - r)]
        above = [v[v > est] for v in vals]
        n_above = sum(len(a) for a in above)
        if n_above >= m:
            a = np.concatenate(above)
            return float(np.partition(a, n_above - m)[n_above - m])
        if n_above + sum(int(np.count_nonzero(v == est)) for v in vals) >= m:
            return float(est)
        if r >= len(sample):
            break
        r *= 8
    every = np.concatenate(vals)  # not reached unless values sit below every sampled one
    return float(np.partition(every, n - m)[n - m])


def _gather(parts: list[np.ndarray], idx: np.ndarray) -> np.ndarray:
    """Scores at global chunk indices ``idx`` (sorted) from the parts."""
    out = np.empty(len(idx), dtype=np.float64)
    for s, o in _offsets(parts):
        a, b = np.searchsorted(idx, [o, o + len(s)])
        out[a:b] = s[idx[a:b] - o]
    return out


def _first_of_each(a: np.ndarray) -> np.ndarray:
    """Position of the first occurrence of each distinct value of ``a``, by value (what
    ``np.unique(a, return_index=True)`` gives, without importing numpy.ma on first use)."""
    srt = np.argsort(a, kind="stable")
    v = a[srt]
    keep = np.ones(len(v), dtype=bool)
    keep[1:] = v[1:] != v[:-1]
    return srt[keep]


def _rank(
    idx: np.ndarray,
    s: np.ndarray,
    chunk_pages: np.ndarray,
    page_ids: list[str],
    chunk_ids: Sequence[str],
    depth: int | None,
) -> list[Hit]:
    """Collapse the chunks ``idx`` (global indices, ascending) scoring ``s`` to ranked pages."""
    if idx.size == 0:
        return []
    p = chunk_pages[idx]
    order = np.lexsort((idx, p, -s))  # score desc, then page order, then chunk order
    best = order[_first_of_each(p[order])]  # best chunk position per page (in idx space)
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
    return renumber(order)
