"""Query a store: any method, any text version, with filters, traceable hits.

``Searcher`` keeps loaded indexes in memory (one per base method) and builds a
missing or stale index on first use when ``auto_build`` is set; without it, such an
index raises IndexMissing (naming the command to run).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from sourcepage.corpus.structure import section_at
from sourcepage.records import Document, Hit, Ranking, parse_page_id
from sourcepage.retrieval.filters import (
    Filters,
    check_filters,
    heading_test,
    matches,
    page_filters,
    section_test,
)
from sourcepage.retrieval.index import IndexDamaged, IndexMissing, LoadedIndex, build_index, load_index
from sourcepage.retrieval.methods import Method, parse_method
from sourcepage.retrieval.pages import collapse, collapse_top, contents_last, navigation_question
from sourcepage.retrieval.parsed import Parsed
from sourcepage.retrieval.settings import IndexSettings
from sourcepage.store.db import Store
from sourcepage.text.sentences import quote_text, running_lines

log = logging.getLogger("sourcepage.search")

T = TypeVar("T")

#: what the stages keep per searcher (``Searcher.memo``), declared here: routing's router,
#: ``sect:``'s heading terms, heading idf and section indexes (of pages, of spans), and
#: ``ltr:``'s model of each part list (``ltr_model:<parts>``) and its pages' features
MEMO_KEYS = frozenset(
    {
        "router",
        "heading_terms",
        "heading_idf",
        "section_index",
        "section_index_spans",
        "ltr_model",
        "ltr_pages",
    }
)


class Searcher:
    """Page-level search over one store and one text version."""

    def __init__(
        self,
        store: str | Path | Store,
        version: str = "raw",
        settings: IndexSettings | None = None,
        *,
        auto_build: bool = True,
        progress: Callable[[str, int, int], None] | None = None,
        contents_last: bool = True,
    ):
        self.store = store if isinstance(store, Store) else Store(store)
        self.version = version
        self.settings = settings or IndexSettings()
        self.auto_build = auto_build
        self.progress = progress
        #: move table-of-contents pages after the others, except for navigation questions
        self.contents_last = contents_last
        self._contents: set[str] | None = None
        self._structure: dict[str, tuple[str, str, str]] | None = None
        self._paths: dict[str, tuple[str, ...]] = {}  # page id → its heading paths (page_sections)
        self._section_masks: dict[tuple[Any, ...], np.ndarray] = {}  # _page_mask
        self.documents: Mapping[str, Document] = self.store.document_map()  # read on demand
        self._fingerprint: str | None = None
        self._indexes: dict[str, LoadedIndex] = {}
        self._lock = threading.Lock()
        self._df: tuple[dict[str, int], int] | None = None
        self._sentences: Any = False  # False: not looked for yet; None: no current table
        self._running: dict[str, frozenset[str]] = {}
        self._memo: dict[str, Any] = {}  # MEMO_KEYS → the stages' values (``memo``)

    @property
    def fingerprint(self) -> str:
        """The chunk fingerprint of the searched version (computed once per Searcher)."""
        with self._lock:
            if self._fingerprint is None:
                self._fingerprint = self.store.chunk_fingerprint(self.version)
            return self._fingerprint

    def memo(self, key: str, make: Callable[[], T]) -> T:
        """The stages' value of ``key`` (its kind one of ``MEMO_KEYS``: "router",
        "ltr_model:bm25+dense", …), made once per searcher: read and kept under the
        searcher's lock, made outside it (a maker may call the searcher); when two
        searches make it at once, the first one kept is the one both use."""
        if key.partition(":")[0] not in MEMO_KEYS:
            raise KeyError(f"{key!r} is not declared in MEMO_KEYS")
        with self._lock:
            if key in self._memo:
                return self._memo[key]  # type: ignore[no-any-return]
        value = make()
        with self._lock:
            return self._memo.setdefault(key, value)  # type: ignore[no-any-return]

    def has_index(self, method: Method) -> bool:
        """True when the index of base ``method`` is loaded in this searcher."""
        with self._lock:
            return method.index_key in self._indexes

    def index(self, method: Method, notify: Callable[[str], None] | None = None) -> LoadedIndex:
        """The loaded index of a base method, built first if missing or stale; a build
        (minutes for a dense model) is announced to ``notify`` and to the searcher's
        ``progress`` (a bar from 0 to 1, or the embedding count), else logged."""
        with self._lock:
            if method.index_key in self._indexes:
                return self._indexes[method.index_key]
            if self._fingerprint is None:
                self._fingerprint = self.store.chunk_fingerprint(self.version)
            try:
                idx = load_index(self.store, self.version, method, self.settings, self._fingerprint)
            except IndexDamaged:
                if not self.auto_build:
                    raise
                idx = None  # built again below
            if idx is None:
                if not self.auto_build:
                    raise IndexMissing(self.store.path, self.version, method)
                note = (
                    f"building the {method.name} index of the {self.version} text on first use "
                    f"({self.store.chunk_count(self.version)} chunks; `sourcepage index` builds it ahead)"
                )
                label = f"{method.name} index ({self.version}, first use)"
                if notify:
                    notify(note)
                if self.progress:
                    self.progress(label, 0, 1)
                if not notify and not self.progress:
                    log.warning(note)
                cb = (lambda d, n: self.progress(label, d, n)) if self.progress else None
                build_index(self.store, self.version, method, self.settings, cb)
                if self.progress:
                    self.progress(label, 1, 1)
                idx = load_index(self.store, self.version, method, self.settings, self._fingerprint)
                assert idx is not None
            warm = getattr(method.spec, "warm", None)
            if warm is not None:
                warm(method)  # load the query model now, so a first query's time is its own
            self._indexes[method.index_key] = idx
            return idx

    def _mask(
        self,
        idx: LoadedIndex,
        filters: dict[str, list[str]],
        cited: tuple[tuple[str, str], ...] | None = None,
    ) -> np.ndarray | None:
        """Which chunks the filters keep (None: all): those of documents that pass the
        document filters and, with a ``section`` filter, of pages whose headings hold it;
        with ``cited`` (``Parsed.under_cited``), of pages under one of those provisions."""
        if not filters and cited is None:
            return None
        ok = np.array(
            [matches(self.documents[d], filters) if d in self.documents else False for d in idx.doc_ids],
            dtype=bool,
        )
        mask = ok[idx.chunk_docs]
        if values := page_filters(filters).get("section"):
            mask &= self._page_mask(idx, ("section", *values), lambda: section_test(values))[idx.chunk_pages]
        if cited is not None:
            mask &= self._page_mask(idx, ("cited", *cited), lambda: heading_test(cited))[idx.chunk_pages]
        return mask

    def _page_mask(
        self, idx: LoadedIndex, key: tuple[Any, ...], make: Callable[[], Callable[[tuple[str, ...]], bool]]
    ) -> np.ndarray:
        """Which of the index's pages a test of their heading paths keeps (``make`` gives the
        test: a ``section`` filter's, or that of a question's cited provisions), kept for the
        last 32 keys: a cited provision is asked of the same store again and again."""
        key = (id(idx), *key)
        with self._lock:
            got = self._section_masks.get(key)
        if got is None or len(got) != len(idx.page_ids):
            test = make()
            got = np.array([test(self.section_paths(p)) for p in idx.page_ids])
            with self._lock:
                if len(self._section_masks) >= 32:
                    self._section_masks.pop(next(iter(self._section_masks)))
                self._section_masks[key] = got
        return got

    def ranked(
        self,
        method: Method,
        query: str,
        depth: int | None,
        filters: dict[str, list[str]],
        parsed: Parsed | None = None,
    ) -> list[Hit]:
        """Ranked pages of any registered method (filters already checked): a base
        method collapses its chunk scores; a stage ranks through this searcher. Tables of
        contents follow the other pages (``contents_last``) unless the question asks where
        something is in a document. ``parsed``: the question's route and cited provisions,
        parsed once by the search (``Query.parsed``), handed to every stage; without it a
        stage parses ``query`` itself."""
        if not method.is_base:
            hits = method.spec.rank(self, method, query, depth, filters, parsed)  # type: ignore[union-attr]
        else:
            idx = self.index(method)
            under = parsed.cited if parsed is not None and parsed.under_cited else None
            mask = self._mask(idx, filters, under)
            fetch = idx.top_chunks(query)
            if fetch is not None:  # an approximate index: its top chunks only (depth None: TOP_PAGES)
                hits = collapse_top(
                    fetch, len(idx.chunk_ids), idx.chunk_pages, idx.page_ids, idx.chunk_ids, mask, depth
                )
            else:
                hits = collapse(
                    idx.score_parts(query),
                    idx.chunk_pages,
                    idx.page_ids,
                    idx.chunk_ids,
                    mask,
                    depth,
                )
        if self.contents_last and not navigation_question(query):
            hits = contents_last(hits, self.contents_pages())
        return hits

    def encode_question(self, method: Method, query: str) -> None:
        """Encode ``query`` now for a base method that ranks by a question vector (dense),
        so that its ranking, perhaps on another thread, finds the vector cached."""
        encoder = getattr(method.spec, "encoder", None)
        if method.is_base and encoder is not None:
            encoder(method).query(query)

    def contents_pages(self) -> set[str]:
        """The store's table-of-contents pages (the audit's flag), read once."""
        with self._lock:
            if self._contents is None:
                self._contents = self.store.contents_pages()
            return self._contents

    def structure(self) -> dict[str, tuple[str, str, str]]:
        """page id → (section, JSON list of heading paths, page kind) (corpus.structure), read once."""
        with self._lock:
            if self._structure is None:
                self._structure = self.store.page_structure()
            return self._structure

    def page_section(self, page_id: str, chunk_id: str = "") -> tuple[str, str]:
        """(heading path, page kind) of a page; empty strings where none is known. With
        ``chunk_id`` (a hit's passage) the path is that of the stretch of the page the chunk
        overlaps most (``corpus.structure.page_spans``): on a page that holds several sections
        the passage's own, not the one covering most of the page."""
        sec, _, kind = self.structure().get(page_id, ("", "[]", ""))
        if chunk_id and len(held := self.page_sections(page_id)) > 1:
            sec = self._passage_section(page_id, chunk_id, list(held)) or sec
        return sec, kind

    def page_sections(self, page_id: str) -> tuple[str, ...]:
        """Every heading path covering part of a page, in page order (corpus.structure), read
        once per page."""
        got = self._paths.get(page_id)
        if got is None:
            held = self.structure().get(page_id, ("", "[]", ""))[1]
            got = self._paths[page_id] = tuple(json.loads(held or "[]"))
        return got

    def section_paths(self, page_id: str) -> tuple[str, ...]:
        """The heading paths a ``section`` filter or a citation is tested on: those covering
        the page (``page_sections``), else its main section alone."""
        return self.page_sections(page_id) or (self.page_section(page_id)[0],)

    def _passage_section(self, page_id: str, chunk_id: str, paths: list[str]) -> str:
        chunk = self.store.chunk(self.version, chunk_id)
        doc_id, n = parse_page_id(page_id)
        row = self.store.page(doc_id, n)
        if chunk is None or row is None:
            return ""
        text = row["raw" if self.version == "raw" else "cleaned"]
        where = [(b, e) for p, b, e in chunk.spans if p == n]  # a chunk has one span a page
        return section_at(text, paths, *where[0]) if where else ""

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

    def sentence_table(self) -> Any:
        """The version's precomputed sentence vectors (``retrieval.sentvec.SentenceVectors``,
        memory-mapped), or None when ``sourcepage index`` has not built a current one."""
        if self._sentences is False:
            from sourcepage.retrieval import sentvec

            self._sentences = sentvec.load(self.store, self.version, self.fingerprint)
        return self._sentences

    def quote_texts(self, page_ids: list[str]) -> dict[str, tuple[str, bool]]:
        """page id → (the text quotes are made from, columns interleaved): the store's raw
        page (``Store.raw_pages``) without its document's running headers and footers
        (``text.sentences.quote_text``; each document's lines read once per Searcher)."""
        out = self.store.raw_pages(page_ids)
        return {
            pid: (quote_text(raw, self.running_lines(parse_page_id(pid)[0])), risk)
            for pid, (raw, risk) in out.items()
        }

    def running_lines(self, doc_id: str) -> frozenset[str]:
        """The running header and footer lines of a document (``text.sentences.running_lines``)."""
        with self._lock:
            got = self._running.get(doc_id)
        if got is None:
            got = running_lines(self.store.page_texts(doc_id, "raw"))
            with self._lock:
                self._running[doc_id] = got
        return got

    def passage(self, chunk_id: str) -> str:
        return self.store.chunk_text(self.version, chunk_id)
