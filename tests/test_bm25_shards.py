"""Sharded, memory-mapped BM25 (retrieval.postings, retrieval.bm25) and page collapse over
top candidates (retrieval.pages): bit-identical to bm25s and to the full collapse."""

from __future__ import annotations

from pathlib import Path

import bm25s
import numpy as np
import pytest

from sourcepage.records import Hit
from sourcepage.retrieval import bm25
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.pages import collapse
from sourcepage.retrieval.postings import build_postings, load_postings
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.tokenize import tokenize

WORDS = ["lock", "tag", "energy", "zone", "1", "class", "i", "über", "ñandú", "1910.147", "the", "a"]


def _corpus(n: int, seed: int = 42) -> list[list[str]]:
    """Random token lists with Zipf-like term frequencies, repeats and empty documents."""
    rng = np.random.default_rng(seed)
    vocab = WORDS + [f"w{i}" for i in range(300)]
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    return [[vocab[j] for j in rng.choice(len(vocab), size=rng.integers(0, 40), p=p)] for _ in range(n)]


QUERIES = [["lock"], ["lock", "lock", "tag"], ["über", "ñandú"], ["zone", "1", "class", "i"], ["nope"], []]
QUERIES += [["the", "a", "w3", "w250", "w299", "unknown"]]


def _bm25s(tokens: list[list[str]], variant: str) -> bm25s.BM25:
    ref = bm25s.BM25(k1=1.5, b=0.75, method=variant, dtype="float64")
    ref.index(tokens, show_progress=False)
    return ref


def _ref_scores(ref: bm25s.BM25, q: list[str], n: int, variant: str) -> np.ndarray:
    known = [t for t in q if t in ref.vocab_dict]
    if not known:
        return np.zeros(n)
    out = np.asarray(ref.get_scores(known), dtype=np.float64)
    return out * (1.5 + 1) if variant == "robertson" else out


@pytest.mark.parametrize("variant", bm25.VARIANTS)
@pytest.mark.parametrize("shard_docs", [1, 7, 64, 10_000])
def test_scores_bit_identical_to_bm25s(variant: str, shard_docs: int) -> None:
    tokens = _corpus(150)
    ref = _bm25s(tokens, variant)
    model = bm25.build(tokens, variant=variant, shard_docs=shard_docs)
    assert len(model.postings.shards) == -(-150 // shard_docs)
    for q in QUERIES:
        assert np.array_equal(bm25.scores(model, q), _ref_scores(ref, q, len(tokens), variant)), q


def test_on_disk_postings_memory_mapped_and_equal(tmp_path: Path) -> None:
    tokens = _corpus(120, seed=7)
    memory = build_postings(tokens, bm25.Bm25Params().weigh, None, shard_docs=50)
    disk = build_postings(tokens, bm25.Bm25Params().weigh, tmp_path / "ix", shard_docs=50)
    again = load_postings(tmp_path / "ix")
    assert not (tmp_path / "ix" / ".pass1").exists()  # scratch of the first pass removed
    assert isinstance(again.shards[0].weights.base, np.memmap) and isinstance(again.df.base, np.memmap)
    assert [s.n_docs for s in again.shards] == [50, 50, 20] and again.n_docs == 120
    # global statistics: one df over every shard, exact mean length
    assert again.mean_length == sum(map(len, tokens)) / 120
    present = sorted({t for d in tokens for t in d})
    assert len(again.vocab) == len(present) and list(again.vocab.terms()) == present
    for t in [*present[:3], *present[-3:], "lock", "über"]:
        assert again.df[again.vocab.id(t)] == sum(t in d for d in tokens) > 0
    assert again.vocab.id("missing") == -1 and again.vocab.id("") == -1
    for q in QUERIES:
        ids = disk.term_ids(q)
        for a, b, c in zip(
            memory.shard_scores(ids), disk.shard_scores(ids), again.shard_scores(ids), strict=True
        ):
            assert np.array_equal(a, b) and np.array_equal(b, c)


def test_term_df_mapping() -> None:
    tokens = [["a", "b"], ["a"], ["c", "c"]]
    df = bm25.build(tokens).term_df()
    assert df.get("a") == 2 and df["c"] == 1 and df.get("zz", 0) == 0 and "b" in df and len(df) == 3
    with pytest.raises(KeyError):
        df["zz"]


def test_stored_index_equals_bm25s_and_is_sharded(fresh_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The registered method builds its index streamed from the store, one shard per 5
    chunks here; every chunk score equals bm25s's on the same tokens. A private store: the
    shared one may already hold an index built with the default shard size."""
    monkeypatch.setattr(bm25.Bm25Method, "shard_docs", 5)
    searcher = Searcher(fresh_store, "raw")
    idx = searcher.index(parse_method("bm25"))
    texts = [c.text for c in searcher.store.chunks("raw")]
    assert len(idx.model.postings.shards) == -(-len(texts) // 5) > 1
    tokens = [tokenize(t) for t in texts]
    ref = _bm25s(tokens, "robertson")
    for q in ("who removes the lock", "oxygen 19.5 percent", "1910.147(c)(4) zzzz", ""):
        assert np.array_equal(idx.scores(q), _ref_scores(ref, tokenize(q), len(texts), "robertson"))
        assert np.array_equal(np.concatenate(idx.score_parts(q)), idx.scores(q))


# ----------------------------------------------------------------------------- collapse


def _collapse_reference(
    chunk_scores, chunk_pages, page_ids, chunk_ids, mask=None, depth=None, min_score=None
):
    """The full collapse as it was before top-candidate selection (sorts every chunk)."""
    keep = np.ones(len(chunk_scores), dtype=bool) if mask is None else mask.copy()
    if min_score is not None:
        keep &= chunk_scores > min_score
    idx = np.flatnonzero(keep)
    if idx.size == 0:
        return []
    s, p = chunk_scores[idx], chunk_pages[idx]
    order = np.lexsort((idx, p, -s))
    _, first = np.unique(p[order], return_index=True)
    best = order[first]
    ranked = best[np.lexsort((p[best], -s[best]))]
    if depth is not None:
        ranked = ranked[:depth]
    return [
        Hit(rank=r, page_id=page_ids[p[j]], score=float(s[j]), chunk_id=chunk_ids[idx[j]])
        for r, j in enumerate(ranked, 1)
    ]


@pytest.mark.parametrize("seed", range(46))
def test_collapse_on_top_candidates_equals_full_collapse(seed: int) -> None:
    """Random scores with many ties (and mostly zeros), pages out of chunk order, masks,
    min_score, any depth, scores whole or in shards: the same hits as the full sort."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400)) if seed < 40 else int(rng.integers(5000, 12000))
    n_pages = int(rng.integers(1, n + 1))
    pages = rng.integers(0, n_pages, size=n)
    page_ids = [f"d#p{i + 1}" for i in range(n_pages)]
    chunk_ids = [f"d#p{pages[i] + 1}#c{i}" for i in range(n)]
    scores = rng.integers(0, 6, size=n).astype(np.float64) * (rng.random(n) < rng.random())
    if seed % 3 == 0:
        scores += rng.random(n)  # mostly distinct
    cuts = np.sort(rng.integers(0, n + 1, size=int(rng.integers(0, 4))))
    parts = np.split(scores, cuts)
    for mask in (None, rng.random(n) < 0.6):
        for min_score in (None, 0.0):
            for depth in (None, 1, 2, 5, 10, 37, n_pages, n + 5):
                want = _collapse_reference(scores, pages, page_ids, chunk_ids, mask, depth, min_score)
                assert collapse(scores, pages, page_ids, chunk_ids, mask, depth, min_score) == want
                assert collapse(parts, pages, page_ids, chunk_ids, mask, depth, min_score) == want


def test_collapse_depth_zero_and_empty() -> None:
    s = np.array([1.0, 2.0])
    assert collapse(s, np.array([0, 0]), ["d#p1"], ["d#p1#c1", "d#p1#c2"], depth=0) == []
    assert collapse([np.zeros(0)], np.zeros(0, int), [], [], depth=3) == []


def test_saved_chunk_table_equals_computed(fresh_store: Path) -> None:
    """The chunk → page table saved at build loads as computed from the chunk ids; an index
    without it (built before) still loads."""
    from sourcepage.retrieval.index import _chunk_table, build_index, load_index
    from sourcepage.store.db import Store

    st = Store(fresh_store)
    try:
        path = build_index(st, "raw", parse_method("bm25"))
        idx = load_index(st, "raw", parse_method("bm25"))
        pages, cp, docs, cd = _chunk_table(idx.chunk_ids)
        assert idx.page_ids == pages and idx.doc_ids == docs
        assert np.array_equal(idx.chunk_pages, cp) and np.array_equal(idx.chunk_docs, cd)
        (path / "chunk_table.json").unlink()
        old = load_index(st, "raw", parse_method("bm25"))
        assert old.page_ids == pages and np.array_equal(old.chunk_pages, cp)
    finally:
        st.close()
