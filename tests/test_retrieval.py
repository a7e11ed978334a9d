"""Retrieval: tokenizer, BM25 parity, hand-checked rankings, page collapse, RRF,
filters, index persistence (round trip, interrupted build, staleness), determinism."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import rank_bm25

from sourcepage.ingest import ingest
from sourcepage.records import Hit
from sourcepage.retrieval import bm25, lsa
from sourcepage.retrieval import index as index_mod
from sourcepage.retrieval.fusion import rrf
from sourcepage.retrieval.index import (
    _chunk_table,
    build_index,
    current_build,
    index_dir,
    load_index,
)
from sourcepage.retrieval.methods import parse_method, parse_methods
from sourcepage.retrieval.pages import collapse
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.settings import IndexSettings
from sourcepage.retrieval.tokenize import TokenizerConfig, tokenize
from sourcepage.store.db import Store
from sourcepage.text.chunk import ChunkConfig
from sourcepage.text.versions import TextSettings

BM25 = parse_method("bm25")
LSA = parse_method("lsa")

#: (query, expected first page) hand-checked against the factory's page texts
EXPECTED = [
    ("group lockbox", "loto_energy_control#p2"),
    ("atmospheric testing before entering a permit-required confined space", "confined_space_entry#p3"),
    ("hearing protection noise action value", "hse_ppe_at_work#p2"),
    ("point of operation guards light curtains", "machine_guarding#p1"),
    ("who may remove a lock when the employee has left the site", "loto_energy_control#p3"),
    ("tongue guard abrasive wheel bench grinder", "machine_guarding#p2"),
]


@pytest.fixture(scope="module")
def store(safety_store: Path):
    st = Store(safety_store)
    yield st
    st.close()


@pytest.fixture(scope="module")
def searchers(store: Store) -> dict[str, Searcher]:
    return {v: Searcher(store, v) for v in ("raw", "cleaned", "enriched")}


def _dump(ranking) -> bytes:
    return json.dumps([asdict(h) for h in ranking.hits]).encode()


# ----------------------------------------------------------------------------- tokenizer


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Class I", ["class", "i"]),
        ("Zone 1", ["zone", "1"]),
        ("29 CFR 1910.147(c)(4)", ["29", "cfr", "1910.147(c)(4)", "1910.147", "c", "4"]),
        ("1/4 inch", ["1/4", "inch"]),
        ("1,000 volts at 19.5 percent.", ["1,000", "volts", "at", "19.5", "percent"]),
        ("See 1910.147.", ["see", "1910.147"]),
        ("the employer’s lock", ["the", "employer's", "lock"]),
        ("Protección auditiva", ["protección", "auditiva"]),
        ("Type A, Division 2", ["type", "a", "division", "2"]),
        ("", []),
    ],
)
def test_tokenize(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


def test_tokenize_stopwords_switch() -> None:
    text = "The employee and the lock in Class I"
    assert tokenize(text) == ["the", "employee", "and", "the", "lock", "in", "class", "i"]
    assert tokenize(text, TokenizerConfig(stopwords=True)) == ["employee", "lock", "class", "i"]
    assert tokenize("a Type A device", TokenizerConfig(stopwords=True)) == ["a", "type", "a", "device"]


def test_tokenize_stemming_switch() -> None:
    text = "Locks removed by authorized employees per 1910.147(c)(4)"
    assert tokenize(text, TokenizerConfig(stem=True)) == [
        "lock",
        "remov",
        "by",
        "author",
        "employe",
        "per",
        "1910.147(c)(4)",
        "1910.147",
        "c",
        "4",
    ]
    assert tokenize(text, TokenizerConfig(stopwords=True, stem=True))[:2] == ["lock", "remov"]
    assert "by" not in tokenize(text, TokenizerConfig(stopwords=True, stem=True))


# ----------------------------------------------------------------------------- BM25 parity


def test_bm25_parity_with_rank_bm25_hand_corpus() -> None:
    corpus = [
        ["a", "b", "c", "c"],
        ["a", "d"],
        ["a", "b", "e", "e", "e"],
        ["f", "g"],
        ["a", "x", "y", "z", "w", "v"],
    ]
    model = bm25.build(corpus)
    ref = rank_bm25.BM25Okapi(corpus, k1=1.5, b=0.75, epsilon=0)
    for q in (["a"], ["b"], ["c"], ["e", "b"], ["b", "b"], ["a", "b", "unknown"], ["unknown"]):
        np.testing.assert_allclose(bm25.scores(model, q), ref.get_scores(q), rtol=0, atol=1e-6)
    assert not bm25.scores(model, ["a"]).any()  # df 4 of 5 > N/2: IDF floored at 0


def test_bm25_parity_with_rank_bm25_on_store(store: Store) -> None:
    for version in ("raw", "enriched"):
        chunks = store.chunks(version)
        tokens = [tokenize(c.text) for c in chunks]
        ref = rank_bm25.BM25Okapi(tokens, k1=1.5, b=0.75, epsilon=0)
        idx = load_index(store, version, BM25) or Searcher(store, version).index(BM25)
        assert idx.chunk_ids == [c.chunk_id for c in chunks]
        n = len(tokens)
        df_the = sum("the" in t for t in tokens)
        assert df_the > n / 2
        queries = [
            "the employee removes the lock",
            "group lockbox",
            "oxygen 19.5 percent",
            "the the hearing protection",
            "1910.147(c)(4) zzzz",
        ]
        for q in queries:
            np.testing.assert_allclose(idx.scores(q), ref.get_scores(tokenize(q)), rtol=0, atol=1e-6)


# ----------------------------------------------------------------------------- rankings


@pytest.mark.parametrize("version", ["raw", "cleaned", "enriched"])
@pytest.mark.parametrize("method", ["bm25", "lsa"])
@pytest.mark.parametrize(("query", "page"), EXPECTED)
def test_sparse_rankings(
    searchers: dict[str, Searcher], version: str, method: str, query: str, page: str
) -> None:
    ranking = searchers[version].rank(query, method, k=5)
    assert ranking.pages()[0] == page
    assert ranking.method == method and ranking.text_version == version
    assert [h.rank for h in ranking.hits] == list(range(1, len(ranking.hits) + 1))
    assert len(set(ranking.pages())) == len(ranking.hits)
    assert ranking.hits[0].chunk_id.startswith(page + "#c")


def test_ranking_covers_every_nonblank_page(searchers: dict[str, Searcher]) -> None:
    pages = searchers["raw"].rank("lock", "bm25", k=None).pages()
    assert len(pages) == 10 and "confined_space_entry#p2" not in pages


def test_equal_scores_rank_in_natural_page_order(searchers: dict[str, Searcher]) -> None:
    ranking = searchers["raw"].rank("qwertyuiop", "bm25", k=None)
    assert all(h.score == 0 for h in ranking.hits)
    assert ranking.pages() == [
        "confined_space_entry#p1",
        "confined_space_entry#p3",
        "hse_ppe_at_work#p1",
        "hse_ppe_at_work#p2",
        "hse_ppe_at_work#p3",
        "loto_energy_control#p1",
        "loto_energy_control#p2",
        "loto_energy_control#p3",
        "machine_guarding#p1",
        "machine_guarding#p2",
    ]


@pytest.mark.parametrize(("query", "page"), EXPECTED)
def test_dense_e5_small_rankings(searchers: dict[str, Searcher], query: str, page: str) -> None:
    ranking = searchers["cleaned"].rank(query, "dense:e5-small", k=3)
    assert ranking.method == "dense:e5-small"
    assert ranking.pages()[0] == page


def test_dense_embeddings_cached(searchers: dict[str, Searcher], store: Store) -> None:
    from sourcepage.retrieval.dense import MODELS, cache_key, text_sha

    searchers["cleaned"].rank("group lockbox", "dense:e5-small")
    shas = [text_sha(c.text) for c in store.chunks("cleaned")]
    cached = store.cached_embeddings(cache_key(MODELS["e5-small"]), shas)
    assert set(cached) == set(shas) and all(v.shape == (384,) for v in cached.values())


def test_dense_minilm_ranking(searchers: dict[str, Searcher]) -> None:
    s = searchers["cleaned"]
    assert s.rank("group lockbox", "dense").pages()[0] == "loto_energy_control#p2"
    assert (
        s.rank("atmospheric testing before entering a permit-required confined space", "dense").pages()[0]
        == "confined_space_entry#p3"
    )


def test_rrf_method_on_store(searchers: dict[str, Searcher]) -> None:
    s = searchers["cleaned"]
    fused = s.rank("group lockbox", "rrf:bm25+lsa", k=5)
    assert fused.method == "rrf:bm25+lsa" and fused.pages()[0] == "loto_energy_control#p2"
    a, b = s.rank("group lockbox", "bm25", k=None), s.rank("group lockbox", "lsa", k=None)
    expect = {p: 0.0 for p in a.pages()}
    for r in (a, b):
        for h in r.hits:
            expect[h.page_id] += 1 / (60 + h.rank)
    for h in fused.hits:
        assert h.score == pytest.approx(expect[h.page_id], abs=1e-12)


def test_method_names() -> None:
    assert parse_method("dense").name == "dense" and parse_method("dense").model == "minilm"
    assert parse_method("dense:e5-small").index_key == "dense-e5-small"
    assert [m.name for m in parse_methods("bm25, lsa,rrf:bm25+dense")] == ["bm25", "lsa", "rrf:bm25+dense"]
    for bad, msg in [
        ("rrf:bm25", "two or more"),
        ("rrf:bm25+bm25", "twice"),
        ("dense:nope", "unknown dense model"),
        ("tfidf", "unknown method"),
    ]:
        with pytest.raises(ValueError, match=msg):
            parse_method(bad)


# ----------------------------------------------------------------------------- page collapse


def test_collapse_hand_computed() -> None:
    page_ids = ["d#p1", "d#p2", "d#p10"]  # natural order
    chunk_ids = ["d#p1#c1", "d#p10#c1", "d#p2#c1", "d#p2#c2", "d#p1#c2", "d#p10#c2"]
    chunk_pages = np.array([0, 2, 1, 1, 0, 2])
    scores = np.array([0.5, 0.9, 0.3, 0.9, 0.7, 0.2])
    hits = collapse(scores, chunk_pages, page_ids, chunk_ids)
    # page score = max chunk score; the p2/p10 tie goes to p2 (natural order, not "p10" < "p2")
    assert hits == [
        Hit(1, "d#p2", 0.9, "d#p2#c2"),
        Hit(2, "d#p10", 0.9, "d#p10#c1"),
        Hit(3, "d#p1", 0.7, "d#p1#c2"),
    ]
    masked = collapse(scores, chunk_pages, page_ids, chunk_ids, mask=np.array([1, 1, 1, 0, 1, 1], bool))
    assert [(h.page_id, h.score, h.chunk_id) for h in masked] == [
        ("d#p10", 0.9, "d#p10#c1"),
        ("d#p1", 0.7, "d#p1#c2"),
        ("d#p2", 0.3, "d#p2#c1"),
    ]
    assert [h.page_id for h in collapse(scores, chunk_pages, page_ids, chunk_ids, depth=2)] == [
        "d#p2",
        "d#p10",
    ]
    assert [h.page_id for h in collapse(scores, chunk_pages, page_ids, chunk_ids, min_score=0.6)] == [
        "d#p2",
        "d#p10",
        "d#p1",
    ]
    assert collapse(scores, chunk_pages, page_ids, chunk_ids, min_score=1.0) == []


def test_collapse_best_chunk_tie_takes_first_chunk() -> None:
    hits = collapse(np.array([0.4, 0.4]), np.array([0, 0]), ["d#p1"], ["d#p1#c1", "d#p1#c2"])
    assert hits == [Hit(1, "d#p1", 0.4, "d#p1#c1")]


def test_chunk_table_natural_order() -> None:
    pages, cp, docs, cd = _chunk_table(["d#p10#c1", "d#p2#c1", "d#p1#c1", "a#p3#c1", "d#p2#c2"])
    assert pages == ["a#p3", "d#p1", "d#p2", "d#p10"]
    assert cp.tolist() == [3, 2, 1, 0, 2]
    assert docs == ["a", "d"] and cd.tolist() == [1, 1, 1, 0, 1]


# ----------------------------------------------------------------------------- RRF


def _hits(*pages: str, tag: str = "") -> list[Hit]:
    return [Hit(r, p, 1.0 / r, f"{p}#c{tag or 1}") for r, p in enumerate(pages, 1)]


ORDER = {p: i for i, p in enumerate(["d#p1", "d#p2", "d#p3", "d#p4", "d#p10"])}


def test_rrf_hand_computed() -> None:
    a = _hits("d#p1", "d#p2", "d#p3", tag="1")
    b = _hits("d#p3", "d#p1", "d#p4", tag="2")
    fused = rrf([a, b], ORDER)
    assert [h.page_id for h in fused] == ["d#p1", "d#p3", "d#p2", "d#p4"]
    assert [h.rank for h in fused] == [1, 2, 3, 4]
    assert fused[0].score == 1 / 61 + 1 / 62 and fused[1].score == 1 / 63 + 1 / 61
    assert fused[2].score == 1 / 62 and fused[3].score == 1 / 63
    # the chunk of the method that ranked the page best
    assert fused[0].chunk_id == "d#p1#c1" and fused[1].chunk_id == "d#p3#c2"
    assert [h.page_id for h in rrf([a, b], ORDER, k=1)] == ["d#p1", "d#p3", "d#p2", "d#p4"]
    assert [h.page_id for h in rrf([a, b], ORDER, depth=1)] == ["d#p1", "d#p3"]


def test_rrf_ties_by_natural_page_order_and_first_method() -> None:
    fused = rrf([_hits("d#p10", tag="1"), _hits("d#p2", tag="2")], ORDER)
    assert [h.page_id for h in fused] == ["d#p2", "d#p10"]  # equal score: natural order
    same = rrf([_hits("d#p4", tag="1"), _hits("d#p4", tag="2")], ORDER)
    assert same[0].chunk_id == "d#p4#c1"  # equal rank: the first method's chunk


def test_rrf_rejects_duplicates() -> None:
    with pytest.raises(ValueError, match="holds page d#p1 twice"):
        rrf([_hits("d#p1", "d#p2"), _hits("d#p3", "d#p1", "d#p1")], ORDER)


def test_rrf_deterministic() -> None:
    rankings = [
        _hits("d#p1", "d#p2", "d#p3", "d#p4"),
        _hits("d#p4", "d#p3", "d#p2", "d#p1"),
        _hits("d#p2", "d#p4", "d#p1", "d#p10"),
    ]
    first = rrf(rankings, ORDER)
    assert rrf(rankings, ORDER) == first
    swapped = rrf(rankings[::-1], ORDER)
    assert [(h.page_id, round(h.score, 12)) for h in swapped] == [
        (h.page_id, round(h.score, 12)) for h in first
    ]


# ----------------------------------------------------------------------------- filters


def _docs(ranking) -> set[str]:
    return {p.split("#")[0] for p in ranking.pages()}


def test_filter_jurisdiction(searchers: dict[str, Searcher]) -> None:
    s = searchers["cleaned"]
    for value in ("UK", "uk", ["UK"]):
        r = s.rank("protection lock guard", "bm25", k=None, filters={"jurisdiction": value})
        assert _docs(r) == {"hse_ppe_at_work"} and len(r.hits) == 3
    r = s.rank("group lockbox", "rrf:bm25+lsa", k=3, filters={"jurisdiction": "UK"})
    assert _docs(r) == {"hse_ppe_at_work"} and len(r.hits) == 3
    assert "hse_ppe_at_work" not in _docs(s.rank("protection", "lsa", k=None, filters={"jurisdiction": "US"}))


def test_filter_extra_column(searchers: dict[str, Searcher]) -> None:
    s = searchers["raw"]
    r = s.rank("space", "bm25", k=None, filters={"project_type": "utilities"})
    assert _docs(r) == {"confined_space_entry"}
    r = s.rank("space", "bm25", k=None, filters={"project_type": ["utilities", "manufacturing"]})
    assert _docs(r) == {"confined_space_entry", "machine_guarding"}


def test_filter_years(searchers: dict[str, Searcher]) -> None:
    s = searchers["raw"]
    assert _docs(s.rank("work", k=None, filters={"year_from": 2022})) == {
        "loto_energy_control",
        "machine_guarding",
        "hse_ppe_at_work",
    }
    assert _docs(s.rank("work", k=None, filters={"year_to": "2021"})) == {"confined_space_entry"}
    assert _docs(s.rank("work", k=None, filters={"year_from": "2022", "year_to": "2022"})) == {
        "machine_guarding",
        "hse_ppe_at_work",
    }
    assert s.rank("work", k=None, filters={"year_from": "2030"}).hits == ()
    with pytest.raises(ValueError, match="year_from needs one year"):
        s.rank("work", filters={"year_from": "20x2"})


def test_unknown_filter_key(searchers: dict[str, Searcher]) -> None:
    with pytest.raises(ValueError) as ei:
        searchers["raw"].rank("work", filters={"region": "EU"})
    msg = str(ei.value)
    assert "unknown filter 'region'" in msg
    for key in ("jurisdiction", "topic", "authority", "project_type", "year_from", "year_to"):
        assert key in msg


# ----------------------------------------------------------------------------- index persistence


QUERIES = ["group lockbox", "the employee removes the lock", "oxygen percent gas monitor", "zzzz"]


def test_index_round_trip_identical_scores(store: Store) -> None:
    chunks = store.chunks("cleaned")
    texts = [c.text for c in chunks]
    memory_bm25 = bm25.build([tokenize(t) for t in texts])
    memory_lsa = lsa.build(texts, tokenize)
    Searcher(store, "cleaned").index(LSA)  # make sure both exist
    loaded_bm25 = load_index(store, "cleaned", BM25)
    loaded_lsa = load_index(store, "cleaned", LSA)
    assert loaded_bm25 is not None and loaded_lsa is not None
    assert loaded_lsa.chunk_ids == [c.chunk_id for c in chunks]
    for q in QUERIES:
        assert np.array_equal(loaded_bm25.scores(q), bm25.scores(memory_bm25, tokenize(q)))
        assert np.array_equal(loaded_lsa.scores(q), lsa.scores(memory_lsa, q))
    again = load_index(store, "cleaned", LSA)
    assert again is not None and all(np.array_equal(again.scores(q), loaded_lsa.scores(q)) for q in QUERIES)


def test_searcher_reuses_current_index(store: Store) -> None:
    Searcher(store, "raw").index(BM25)
    build = current_build(store, "raw", BM25)
    assert build is not None
    params = json.loads((build / "params.json").read_text())
    assert params["method"] == "bm25" and params["chunks"] == len(store.chunks("raw"))
    assert params["settings"] == {
        "tokenizer": {"stopwords": False, "stem": False},
        "k1": 1.5,
        "b": 0.75,
        "variant": "robertson",
        "storage": "postings-1",
    }
    Searcher(store, "raw").rank("group lockbox")
    assert current_build(store, "raw", BM25) == build


@pytest.mark.parametrize("method", ["bm25", "lsa"])
@pytest.mark.parametrize("where", ["write_json", "write_text"])
def test_interrupted_build_keeps_previous_index(
    fresh_store: Path, monkeypatch: pytest.MonkeyPatch, method: str, where: str
) -> None:
    st = Store(fresh_store)
    try:
        m = parse_method(method)
        first = build_index(st, "raw", m)
        before = load_index(st, "raw", m)
        assert before is not None

        def boom(*args, **kwargs):
            raise OSError("disk full (simulated)")

        monkeypatch.setattr(index_mod, where, boom)
        with pytest.raises(OSError, match="simulated"):
            build_index(st, "raw", m)
        monkeypatch.undo()
        assert current_build(st, "raw", m) == first
        after = load_index(st, "raw", m)
        assert after is not None and after.params == before.params
        for q in QUERIES:
            assert np.array_equal(after.scores(q), before.scores(q))
        assert not [p for p in index_dir(st, "raw", m).iterdir() if p.name.endswith(".tmp")]
        # the next good build publishes and removes every older build folder
        newest = build_index(st, "raw", m)
        assert sorted(p.name for p in index_dir(st, "raw", m).iterdir()) == sorted(["CURRENT", newest.name])
    finally:
        st.close()


def test_stale_index_rebuilt(fresh_corpus: Path, fresh_store: Path) -> None:
    st = Store(fresh_store)
    Searcher(st, "cleaned").index(BM25)
    old = current_build(st, "cleaned", BM25)
    st.close()
    ingest(
        fresh_corpus, fresh_store, settings=TextSettings(chunk=ChunkConfig(size=200, overlap=50)), workers=1
    )
    st = Store(fresh_store)
    try:
        assert load_index(st, "cleaned", BM25) is None  # chunks changed: stale
        with pytest.raises(RuntimeError, match="no current bm25 index"):
            Searcher(st, "cleaned", auto_build=False).index(BM25)
        s = Searcher(st, "cleaned")
        assert s.rank("group lockbox").pages()[0] == "loto_energy_control#p2"
        new = current_build(st, "cleaned", BM25)
        assert new is not None and new != old and not old.exists()
        idx = load_index(st, "cleaned", BM25)
        assert idx is not None and idx.chunk_ids == [c.chunk_id for c in st.chunks("cleaned")]
        # other settings than the index's also make it stale
        assert load_index(st, "cleaned", BM25, IndexSettings(tokenizer=TokenizerConfig(stem=True))) is None
    finally:
        st.close()


# ----------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("method", ["bm25", "lsa", "dense:e5-small", "rrf:bm25+lsa"])
def test_same_query_twice_byte_identical(store: Store, searchers: dict[str, Searcher], method: str) -> None:
    q = "who removes the lock when the employee has left the site"
    first = _dump(searchers["enriched"].rank(q, method, k=None))
    assert _dump(searchers["enriched"].rank(q, method, k=None)) == first
    assert _dump(Searcher(store, "enriched").rank(q, method, k=None)) == first  # reloaded index
