"""Near-duplicate pages in a ranking: the same text published twice (the SafeWork NSW falls
code repeats the Safe Work Australia one page for page) must not fill the top ten.

Two pages are near-duplicates when the Jaccard similarity of their word 5-gram shingles
(lower-cased words) is at least ``THRESHOLD`` (0.8). Grouping is done on the ranked pages
only (a few dozen comparisons a query, no index needed): each page joins the group of the
first higher-ranked page it nearly duplicates; the group is shown once, at the rank of its
best page, with the others listed as its duplicates.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Sequence
from functools import lru_cache

from sourcepage.records import Hit

THRESHOLD = 0.8
SHINGLE = 5
_WORD = re.compile(r"[^\W_]+")


@lru_cache(maxsize=4096)  # a page's text is read again by every search that ranks it
def shingles(text: str, n: int = SHINGLE) -> frozenset[int]:
    """CRC-32 of every run of ``n`` consecutive lower-cased words (one set a page)."""
    words = _WORD.findall(text.lower())
    if len(words) < n:
        return frozenset([zlib.crc32(" ".join(words).encode())]) if words else frozenset()
    return frozenset(zlib.crc32(" ".join(words[i : i + n]).encode()) for i in range(len(words) - n + 1))


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    """|a ∩ b| / |a ∪ b|, the union counted rather than built (half the set work a pair)."""
    if not (a and b):
        return 0.0
    common = len(a & b)
    return common / (len(a) + len(b) - common)


def _may_reach(a: frozenset[int], b: frozenset[int], threshold: float) -> bool:
    """False when the sizes alone keep Jaccard below ``threshold`` (it is at most
    min/max of the sizes): most pairs of a ranking are skipped without intersecting."""
    small, large = sorted((len(a), len(b)))
    return large > 0 and small >= threshold * large


def group(
    hits: Sequence[Hit], text_of: Callable[[str], str], threshold: float = THRESHOLD
) -> list[tuple[Hit, list[tuple[Hit, float]]]]:
    """(kept hit, [(duplicate hit, similarity), …]) in rank order."""
    groups: list[tuple[Hit, list[tuple[Hit, float]]]] = []
    sets: list[frozenset[int]] = []
    for h in hits:
        sh = shingles(text_of(h.page_id))
        for (_, dups), hs in zip(groups, sets, strict=True):
            if not _may_reach(sh, hs, threshold):
                continue
            sim = jaccard(sh, hs)
            if sim >= threshold:
                dups.append((h, round(sim, 3)))
                break
        else:
            groups.append((h, []))
            sets.append(sh)
    return groups
