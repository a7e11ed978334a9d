"""Dense search at scale: the approximate nearest-neighbour index (retrieval.ann), its size
threshold, its seam into page collapse, and resumable embedding."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from sourcepage.bench.dense_scale import TOP, clustered_vectors, exact_top
from sourcepage.retrieval import ann, dense
from sourcepage.retrieval.index import build_index, current_build, load_index
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.pages import TOP_PAGES, collapse, collapse_top
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.settings import IndexSettings
from sourcepage.store.db import Store

E5 = parse_method("dense:e5-small")
ANN = IndexSettings().replace("dense", search="ann")
EXACT = IndexSettings().replace("dense", search="exact")
QUESTIONS = ["group lockbox", "oxygen level before entry", "who removes a lockout device", "guard openings"]


def _recall(index: ann.AnnIndex, vectors: np.ndarray, queries: np.ndarray) -> float:
    truth = exact_top(vectors, queries)
    got = [set(index.search(q, TOP)[0].tolist()) for q in queries]
    return float(np.mean([len(g & set(t.tolist())) / TOP for g, t in zip(got, truth, strict=True)]))


def test_recall_at_100_on_clustered_vectors(tmp_path: Path) -> None:
    vectors, queries = clustered_vectors(5000, 40)
    ann.build(vectors, tmp_path / ann.ANN_FILE)
    index = ann.AnnIndex.load(tmp_path / ann.ANN_FILE, vectors)
    assert TOP * ann.EXACT_FRACTION < len(vectors)  # the graph answers, not the exact fallback
    assert _recall(index, vectors, queries) >= 0.95
    ids, scores = index.search(queries[0], 10)
    assert np.allclose(scores, vectors[ids] @ queries[0], atol=1e-6)  # their cosines, to float32 precision


def test_same_vectors_same_index_and_results(tmp_path: Path) -> None:
    vectors, queries = clustered_vectors(2000, 10)
    a, b = tmp_path / "a.faiss", tmp_path / "b.faiss"
    ann.build(vectors, a)
    ann.build(vectors, b)
    assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()
    ia, ib = ann.AnnIndex.load(a, vectors), ann.AnnIndex.load(b, vectors)
    for q in queries:
        (x, sx), (y, sy) = ia.search(q, 50), ib.search(q, 50)
        assert np.array_equal(x, y) and np.array_equal(sx, sy)


def test_index_of_other_vectors_is_refused(tmp_path: Path) -> None:
    vectors, _ = clustered_vectors(200, 1)
    ann.build(vectors, tmp_path / ann.ANN_FILE)
    with pytest.raises(ValueError, match="not an approximate index of the 100 embeddings"):
        ann.AnnIndex.load(tmp_path / ann.ANN_FILE, vectors[:100])


def test_page_collapse_of_top_chunks(tmp_path: Path) -> None:
    """``collapse_top`` over the graph's top chunks gives (nearly) the pages of the full
    collapse, with their cosines; with a filter it asks for more chunks until depth pages pass."""
    vectors, queries = clustered_vectors(3000, 20)
    ann.build(vectors, tmp_path / ann.ANN_FILE)
    index = ann.AnnIndex.load(tmp_path / ann.ANN_FILE, vectors)
    page_ids = [f"doc{j:04d}#p1" for j in range(1000)]
    chunk_pages = np.arange(3000) // 3  # three chunks a page
    chunk_ids = [f"{page_ids[i // 3]}#c{i % 3 + 1}" for i in range(3000)]
    mask = (chunk_pages % 10) == 0  # a filter keeping a tenth of the pages
    overlap = []
    for q in queries:
        exact_scores = (vectors @ q).astype(np.float64)
        for m in (None, mask):
            want = collapse(exact_scores, chunk_pages, page_ids, chunk_ids, m, 10)
            got = collapse_top(
                lambda k, q=q: index.search(q, k), 3000, chunk_pages, page_ids, chunk_ids, m, 10
            )
            assert len(got) == 10 and [h.rank for h in got] == list(range(1, 11))
            assert all(np.isclose(h.score, exact_scores[chunk_ids.index(h.chunk_id)]) for h in got)
            if m is not None:
                assert all(chunk_pages[chunk_ids.index(h.chunk_id)] % 10 == 0 for h in got)
            overlap.append(len({h.page_id for h in got} & {h.page_id for h in want}) / 10)
    assert np.mean(overlap) >= 0.95
    every = collapse_top(
        lambda k: index.search(queries[0], k), 3000, chunk_pages, page_ids, chunk_ids, None, None
    )
    assert len(every) == min(TOP_PAGES, len(page_ids))  # "every page" from top chunks: TOP_PAGES


def _pages(s: Searcher, method: str, k: int | None, filters: dict[str, str] | None = None) -> list:
    """(page, chunk) of each hit for each question: the scores are compared apart (a top
    chunk's cosine comes from faiss, which may differ from numpy's product in
    the last float32 bit)."""
    return [[(h.page_id, h.chunk_id) for h in s.rank(q, method, k, filters).hits] for q in QUESTIONS]


def _scores(s: Searcher, method: str, k: int | None) -> np.ndarray:
    return np.array([h.score for q in QUESTIONS for h in s.rank(q, method, k).hits])


def test_below_threshold_exact_and_unchanged(safety_store: Path) -> None:
    st = Store(safety_store)
    try:
        path = build_index(st, "raw", E5)
        assert not (path / ann.ANN_FILE).exists()  # far below ANN_MIN_CHUNKS
        params = json.loads((path / "params.json").read_text())
        # as before (and the e5 runtime, when it is ONNX's: dense.runtime_tag)
        assert set(params["settings"]) - {"runtime"} == {"model", "description", "dim", "max_tokens"}
        idx = load_index(st, "raw", E5)
        assert idx is not None and idx.model.ann_path is None and idx.top_chunks("x") is None
    finally:
        st.close()
    auto, exact = Searcher(safety_store, "raw"), Searcher(safety_store, "raw", EXACT)
    for k in (3, None):  # exact search: the same scores, bit for bit
        assert _pages(auto, "dense:e5-small", k) == _pages(exact, "dense:e5-small", k)
        assert np.array_equal(_scores(auto, "dense:e5-small", k), _scores(exact, "dense:e5-small", k))


def test_forced_ann_ranks_through_top_chunks(fresh_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ann, "EXACT_FRACTION", 0)  # every search goes through the graph
    st = Store(fresh_store)
    try:
        assert load_index(st, "raw", E5, ANN) is None  # nothing built yet
        build_index(st, "raw", E5)  # an "auto" index: too small for the graph
        assert load_index(st, "raw", E5, ANN) is None  # "ann" asks for a rebuild
        path = build_index(st, "raw", E5, ANN)
        assert (path / ann.ANN_FILE).exists()
        info = json.loads((path / "ann.json").read_text())
        assert info["library"] == "faiss-cpu" and info["vectors"] == len(st.chunk_ids("raw"))
        assert load_index(st, "raw", E5).model.ann_path is not None  # "auto" uses what was built
        assert load_index(st, "raw", E5, EXACT).model.ann_path is None  # "exact" ignores it
    finally:
        st.close()
    approx, exact = Searcher(fresh_store, "raw", ANN), Searcher(fresh_store, "raw", EXACT)
    calls: list[int] = []
    idx = approx.index(E5)
    fetch = idx.top_chunks("group lockbox")
    assert fetch is not None
    orig = idx.model.ann().search
    monkeypatch.setattr(idx.model.ann(), "search", lambda q, m: calls.append(m) or orig(q, m))
    # on a few dozen chunks the graph finds every neighbour: the same pages as exact search
    assert _pages(approx, "dense:e5-small", 3) == _pages(exact, "dense:e5-small", 3)
    assert calls  # ranked from the approximate index's top chunks
    f = {"jurisdiction": "UK"}
    assert _pages(approx, "dense:e5-small", 2, f) == _pages(exact, "dense:e5-small", 2, f)
    assert _pages(approx, "rrf:bm25+dense:e5-small", 5) == _pages(exact, "rrf:bm25+dense:e5-small", 5)
    assert _pages(approx, "dense:e5-small", None) == _pages(exact, "dense:e5-small", None)
    assert np.allclose(
        _scores(approx, "dense:e5-small", None), _scores(exact, "dense:e5-small", None), atol=1e-6
    )


def test_auto_uses_ann_from_the_threshold(fresh_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    st = Store(fresh_store)
    try:
        n = len(st.chunk_ids("raw"))
        monkeypatch.setattr(ann, "ANN_MIN_CHUNKS", n + 1)
        assert not (build_index(st, "raw", E5) / ann.ANN_FILE).exists()
        monkeypatch.setattr(ann, "ANN_MIN_CHUNKS", n)
        assert (build_index(st, "raw", E5) / ann.ANN_FILE).exists()
        assert not (build_index(st, "raw", E5, EXACT) / ann.ANN_FILE).exists()
    finally:
        st.close()


def test_embedding_resumes_after_an_interrupted_build(fresh_store: Path) -> None:
    """A build killed mid-way keeps every finished batch (committed one by one): the next
    build embeds only the rest, and gives the vectors of an uninterrupted build."""
    st = Store(fresh_store)
    try:
        texts = [t for _, t in st.iter_chunk_texts("raw")]
        n = len({dense.text_sha(t) for t in texts})
        assert n > 8
        enc = dense.MODELS["e5-small"]
        seen: list[int] = []

        def stop_after_two(done: int, total: int) -> None:
            seen.append(done)
            if len(seen) == 2:
                raise KeyboardInterrupt  # as a killed build: no cleanup of the cache

        with pytest.raises(KeyboardInterrupt):
            dense.embed_passages(
                enc, texts, st.cached_embeddings, st.cache_embeddings, stop_after_two, batch=4
            )
        shas = sorted({dense.text_sha(t) for t in texts})
        other = Store(fresh_store)  # a new connection sees only what was committed
        try:
            assert len(other.cached_embeddings(dense.cache_key(enc), shas)) == 8
        finally:
            other.close()
        embedded: list[int] = []
        resumed = dense.embed_passages(
            enc, texts, st.cached_embeddings, st.cache_embeddings, lambda d, t: embedded.append(d), batch=4
        )
        assert len(embedded) == -(-(n - 8) // 4)  # only the batches not yet cached
        assert np.allclose(resumed, enc.passages(texts), atol=1e-5)
        path = build_index(st, "raw", E5)  # the index build reads them all from the cache
        assert np.array_equal(np.load(path / "embeddings.npy"), resumed)
        assert current_build(st, "raw", E5) == path
    finally:
        st.close()


def test_bench_dense_and_index_knob_cli(tmp_path: Path, safety_store: Path) -> None:
    from typer.testing import CliRunner

    from sourcepage.cli import app

    out = tmp_path / "dense.json"
    args = ["bench", "--scale", "500", "--dense", "--queries", "5", "--work", str(tmp_path / "w")]
    r = CliRunner().invoke(app, [*args, "--json", str(out)])
    assert r.exit_code == 0, r.output
    rows = json.loads(out.read_text())["rows"]
    assert rows["exact"]["recall_at_100"] == 1.0 and rows["sourcepage"]["recall_at_100"] >= 0.95
    assert rows["sourcepage"]["build_seconds"] > 0 and rows["sourcepage"]["p50"] > 0
    r = CliRunner().invoke(
        app, ["index", "--store", str(safety_store), "--method", "dense", "--dense-search", "no"]
    )
    assert r.exit_code != 0 and "dense search 'no': use one of auto, exact, ann" in r.output
