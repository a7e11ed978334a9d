"""The learned second stage: features, a model fitted and saved as JSON, ranking with it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sourcepage.retrieval.ltr import MODELS_DIR, candidates, feature_names, fit, model_scores
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.search import Searcher

Q = "Who may remove a lockout device?"


def test_candidates_are_the_fused_pages_with_one_feature_row_each(safety_store: Path) -> None:
    s = Searcher(safety_store)
    parts = [parse_method("bm25"), parse_method("lsa")]
    hits, x = candidates(s, parts, Q, {})
    fused = s.rank(Q, "rrf:bm25+lsa", k=None).hits
    assert [h.page_id for h in hits] == [h.page_id for h in fused][: len(hits)]
    assert x.shape == (len(hits), len(feature_names(2)))
    names = feature_names(2)
    assert np.all((x[:, names.index("rr_0")] >= 0) & (x[:, names.index("rr_0")] <= 1))
    assert np.all((x[:, names.index("coverage")] >= 0) & (x[:, names.index("coverage")] <= 1 + 1e-9))


def test_a_store_model_ranks_deterministically_and_a_missing_one_is_a_clear_error(fresh_store: Path) -> None:
    s = Searcher(fresh_store)
    with pytest.raises(RuntimeError, match="no learned-ranking model for ltr:bm25\\+lsa"):
        s.rank(Q, "ltr:bm25+lsa", k=5)
    parts = [parse_method("bm25"), parse_method("lsa")]
    hits, x = candidates(s, parts, Q, {})
    names = feature_names(2)
    y = (x[:, names.index("coverage")] > np.median(x[:, names.index("coverage")])).astype(int)
    model = {**fit(x, y, names), "parts": "bm25+lsa"}
    (fresh_store / "indexes" / "raw" / "ltr-bm25__lsa.json").write_text(json.dumps(model))
    s2 = Searcher(fresh_store)
    ranked = s2.rank(Q, "ltr:bm25+lsa", k=None).hits
    assert sorted(h.page_id for h in ranked) == sorted(h.page_id for h in hits)
    scores = model_scores(model, x)
    best = hits[int(np.argmax(scores))].page_id
    assert ranked[0].page_id == best
    assert s2.rank(Q, "ltr:bm25+lsa", k=None).hits == ranked  # same inputs, same ranking


def test_the_shipped_model_is_plain_json_with_its_measurement() -> None:
    model = json.loads((MODELS_DIR / "ltr-bm25__dense.json").read_text())
    assert model["parts"] == "bm25+dense" and model["features"] == feature_names(2, sections=True)
    assert len(model["coef"]) == len(model["mean"]) == len(model["scale"]) == len(model["features"])
    assert model["cv"]["questions"] > 50 and set(model["cv"]) >= {"rrf", "ltr"}


def test_section_features_extend_the_rows_and_a_model_reading_them_ranks(fresh_store: Path) -> None:
    """``sections=True`` appends sect_rr, head and listing to the same rows; a model whose
    features name them is scored on them (the shipped model, without them, is unchanged)."""
    s = Searcher(fresh_store)
    parts = [parse_method("bm25"), parse_method("lsa")]
    hits, x = candidates(s, parts, Q, {})
    hits2, x2 = candidates(s, parts, Q, {}, sections=True)
    names = feature_names(2, sections=True)
    assert hits2 == hits and x2.shape == (len(hits), len(names)) and np.array_equal(x2[:, : x.shape[1]], x)
    assert names[-3:] == ["sect_rr", "head", "listing"]
    assert np.all((x2[:, -3] >= 0) & (x2[:, -3] <= 1)) and set(np.unique(x2[:, -1])) <= {0.0, 1.0}
    assert x2[:, -3].max() == 1.0  # some candidate's section ranks first
    y = (x2[:, -3] == 1.0).astype(int)
    model = {**fit(x2, y, names), "parts": "bm25+lsa"}
    (fresh_store / "indexes" / "raw" / "ltr-bm25__lsa.json").write_text(json.dumps(model))
    ranked = Searcher(fresh_store).rank(Q, "ltr:bm25+lsa", k=None).hits
    assert ranked[0].page_id == hits[int(np.argmax(model_scores(model, x2)))].page_id


def test_pairwise_fit_ranks_a_labelled_page_first(fresh_store: Path) -> None:
    """``fit_pairwise`` learns from positive-minus-negative differences of one query: on the
    query it was fitted on, a labelled page comes first; the model is the same JSON form."""
    from sourcepage.retrieval.ltr import fit_pairwise

    s = Searcher(fresh_store)
    parts = [parse_method("bm25"), parse_method("lsa")]
    names = feature_names(2, sections=True)
    groups = []
    for q in (Q, "When must a confined space permit be cancelled?"):
        hits, x = candidates(s, parts, q, {}, sections=True)
        y = (x[:, names.index("coverage")] == x[:, names.index("coverage")].max()).astype(int)
        groups.append((x, y, 1.0))
    model = fit_pairwise(groups, names)
    assert model["intercept"] == 0.0 and model["loss"] == "pairwise" and model["features"] == names
    x, y, _ = groups[0]
    assert y[int(np.argmax(model_scores(model, x)))] == 1
    assert fit_pairwise(groups, names) == model  # deterministic
