"""Query a store: any method, any text version, with filters, traceable hits.

``Searcher`` keeps loaded indexes in memory (one per base method) and builds a
missing or stale index on first use when ``auto_build`` is set; without it, such an
index raises IndexMissing (naming the command to run).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from sourcepage.records import Document, Hit, Ranking
from sourcepage.retrieval.filters import Filters, check_filters, matches
from sourcepage.retrieval.fusion import RRF_K
from sourcepage.retrieval.index import IndexMissing, LoadedIndex, build_index, load_index
from sourcepage.retrieval.methods import Method, parse_method
from sourcepage.retrieval.pages import collapse, collapse_top
from sourcepage.retrieval.settings import IndexSettings
from sourcepage.store.db import Store


class Searcher:
    """Page-level search over one store and one text version."""

    def __init__(
        self,
        store: str | Path | Store,
        version: str = "raw",
        settings: IndexSettings | None = None,
        *,
        auto_build: bool = True,
        rrf_k: int = RRF_K,
        rrf_depth: int | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ):
        self.store = store if isinstance(store, Store) else Store(store)
        self.version = version
        self.settings = settings or IndexSettings()
        self.auto_build = auto_build
        self.rrf_k = rrf_k
        self.rrf_depth = rrf_depth
        self.progress = progress
        self.documents: Mapping[str, Document] = self.store.document_map()  # read on demand
        self._fingerprint: str | None = None
        self._indexes: dict[str, LoadedIndex] = {}
        self._lock = threading.Lock()
        self._df: tuple[dict[str, int], int] | None = None

    @property
    def fingerprint(self) -> str:
        """The chunk fingerprint of the searched version (computed once per Searcher)."""
        with self._lock:
            if self._fingerprint is None:
                self._fingerprint = self.store.chunk_fingerprint(self.version)
            return self._fingerprint

    def index(self, method: Method) -> LoadedIndex:
        """The loaded index of a base method (built first if missing or stale)."""
        with self._lock:
            if method.index_key in self._indexes:
                return self._indexes[method.index_key]
            if self._fingerprint is None:
                self._fingerprint = self.store.chunk_fingerprint(self.version)
            idx = load_index(self.store, self.version, method, self.settings, self._fingerprint)
            if idx is None:
                if not self.auto_build:
                    raise IndexMissing(self.store.path, self.version, method)
                cb = (lambda d, n: self.progress(method.name, d, n)) if self.progress else None
                build_index(self.store, self.version, method, self.settings, cb)
                idx = load_index(self.store, self.version, method, self.settings, self._fingerprint)
                assert idx is not None
            self._indexes[method.index_key] = idx
            return idx

    def _mask(self, idx: LoadedIndex, filters: dict[str, list[str]]) -> np.ndarray | None:
        if not filters:
            return None
        ok = np.array(
            [matches(self.documents[d], filters) if d in self.documents else False for d in idx.doc_ids],
            dtype=bool,
        )
        return ok[idx.chunk_docs]

    def ranked(
        self, method: Method, query: str, depth: int | None, filters: dict[str, list[str]]
    ) -> list[Hit]:
        """Ranked pages of any registered method (filters already checked): a base
        method collapses its chunk scores; a stage ranks through this searcher."""
        if not method.is_base:
            return method.spec.rank(self, method, query, depth, filters)  # type: ignore[union-attr]
        idx = self.index(method)
        mask = self._mask(idx, filters)
        fetch = idx.top_chunks(query)
        if fetch is not None:  # an approximate index: its top chunks only (depth None: TOP_PAGES)
            return collapse_top(
                fetch, len(idx.chunk_ids), idx.chunk_pages, idx.page_ids, idx.chunk_ids, mask, depth
            )
        return collapse(
            idx.score_parts(query),
            idx.chunk_pages,
            idx.page_ids,
            idx.chunk_ids,
            mask,
            depth,
        )

    def rank(
        self, query: str, method: str | Method = "bm25", k: int | None = 20, filters: Filters | None = None
    ) -> Ranking:
        """Ranked unique pages for ``query``; ``k=None`` ranks every candidate page."""
        m = parse_method(method) if isinstance(method, str) else method
        f = check_filters(filters, self.documents.values())  # read only when there are filters
        return Ranking(method=m.name, text_version=self.version, hits=tuple(self.ranked(m, query, k, f)))

    def term_df(self) -> tuple[Mapping[str, int], int]:
        """Chunk frequency of every BM25 term of this version (a mapping over the BM25
        index's vocabulary) and the chunk count; for idf weights of question terms."""
        with self._lock:
            cached = self._df
        if cached is None:
            bm = self.index(parse_method("bm25"))
            cached = (bm.model.term_df(), len(bm.chunk_ids))
            with self._lock:
                self._df = cached
        return cached

    def passage(self, chunk_id: str) -> str:
        return self.store.chunk_text(self.version, chunk_id)
