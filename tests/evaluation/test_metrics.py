from __future__ import annotations

import math
import random

import numpy as np
import pytest

from sourcepage.evaluation.metrics import (
    METRICS,
    auroc,
    doc_hit_at,
    doc_of,
    evaluate,
    first_relevant_rank,
    hit_at,
    ndcg_at,
    parse_metric,
    per_question,
    recall_at,
    reciprocal_rank,
    score,
)

L3 = math.log2(3)
L6 = math.log2(6)

# Relevant pages at ranks 2 (grade 2) and 5 (grade 1); 2 relevant pages in total.
RANKED = ["x#p1", "a#p1", "y#p2", "z#p9", "b#p3"]
JUDGED = {"a#p1": 2, "b#p3": 1}


def _deep_ranking(relevant_rank: int) -> list[str]:
    """Ranking of filler pages with the single relevant page 'rel#p1' at relevant_rank."""
    pages = [f"f{i}#p1" for i in range(1, 40)]
    pages.insert(relevant_rank - 1, "rel#p1")
    return pages


# --------------------------------------------------------------------------- hand cases


def test_doc_of():
    assert doc_of("osha3120#p12") == "osha3120"
    assert doc_of("a-b_c#p1") == "a-b_c"
    assert doc_of("nopage") == "nopage"


def test_hit_at():
    assert hit_at(RANKED, JUDGED, 1) == 0.0  # rank 1 is x#p1, not relevant
    assert hit_at(RANKED, JUDGED, 2) == 1.0  # a#p1 at rank 2
    assert hit_at(RANKED, JUDGED, 10) == 1.0
    assert hit_at([], JUDGED, 5) == 0.0


def test_recall_at():
    assert recall_at(RANKED, JUDGED, 1) == 0.0  # 0 of 2
    assert recall_at(RANKED, JUDGED, 4) == 0.5  # a#p1 only: 1 / 2
    assert recall_at(RANKED, JUDGED, 5) == 1.0  # a#p1 and b#p3: 2 / 2
    # three relevant, two retrieved in top 3: 2 / 3
    assert recall_at(["r1#p1", "n#p1", "r2#p1"], {"r1#p1": 1, "r2#p1": 1, "r3#p1": 2}, 3) == (
        pytest.approx(2 / 3)
    )


def test_reciprocal_rank_and_first_rank():
    assert first_relevant_rank(RANKED, JUDGED) == 2
    assert reciprocal_rank(RANKED, JUDGED) == 0.5  # 1 / 2
    assert reciprocal_rank(RANKED, JUDGED, depth=1) == 0.0  # cut before rank 2
    assert first_relevant_rank(["n#p1"], JUDGED) is None
    assert reciprocal_rank([], JUDGED) == 0.0


def test_depth_20_cut():
    # relevant page at rank 20 still counts: RR = 1/20
    assert first_relevant_rank(_deep_ranking(20), {"rel#p1": 1}) == 20
    assert reciprocal_rank(_deep_ranking(20), {"rel#p1": 1}) == pytest.approx(1 / 20)
    # at rank 21 it is ">20": RR 0, rank None, and no k beyond 20 reaches it
    deep = _deep_ranking(21)
    judged = {"rel#p1": 1}
    assert first_relevant_rank(deep, judged) is None
    assert reciprocal_rank(deep, judged) == 0.0
    assert hit_at(deep, judged, 30) == 0.0
    assert recall_at(deep, judged, 30) == 0.0
    assert ndcg_at(deep, judged, 30) == 0.0
    assert score("mrr", deep, judged) == 0.0
    assert score("mrr@30", deep, judged) == 0.0
    # a larger explicit depth does reach it
    assert reciprocal_rank(deep, judged, depth=25) == pytest.approx(1 / 21)


def test_ndcg_binary():
    # gains at ranks 2 and 5: DCG = 1/log2(3) + 1/log2(6); ideal = ranks 1, 2: 1 + 1/log2(3)
    expected = (1 / L3 + 1 / L6) / (1 + 1 / L3)
    assert ndcg_at(RANKED, JUDGED, 5) == pytest.approx(expected, abs=1e-12)
    assert ndcg_at(RANKED, JUDGED, 10) == pytest.approx(expected, abs=1e-12)
    # @3: only rank 2 counts; IDCG@3 still holds both relevant pages
    assert ndcg_at(RANKED, JUDGED, 3) == pytest.approx((1 / L3) / (1 + 1 / L3), abs=1e-12)
    # @1: nothing relevant at rank 1
    assert ndcg_at(RANKED, JUDGED, 1) == 0.0
    # perfect ranking
    assert ndcg_at(["a#p1", "b#p3", "x#p1"], JUDGED, 10) == pytest.approx(1.0)


def test_ndcg_graded_linear_gain():
    # gains g = grade: 2 at rank 2, 1 at rank 5; ideal = [2, 1] at ranks 1, 2
    expected = (2 / L3 + 1 / L6) / (2 + 1 / L3)
    assert ndcg_at(RANKED, JUDGED, 5, graded=True) == pytest.approx(expected, abs=1e-12)
    # swapping grades changes graded but not binary nDCG
    swapped = {"a#p1": 1, "b#p3": 2}
    assert ndcg_at(RANKED, swapped, 5, graded=True) == pytest.approx(
        (1 / L3 + 2 / L6) / (2 + 1 / L3), abs=1e-12
    )
    assert ndcg_at(RANKED, swapped, 5) == ndcg_at(RANKED, JUDGED, 5)


def test_ndcg_ideal_uses_all_judged_pages():
    # 3 relevant, only one retrieved at rank 1: DCG = 1; IDCG@2 = 1 + 1/log2(3)
    judged = {"r1#p1": 1, "r2#p1": 1, "r3#p1": 1}
    assert ndcg_at(["r1#p1", "n#p1"], judged, 2) == pytest.approx(1 / (1 + 1 / L3))


def test_grade_zero_entries_are_not_relevant():
    judged = {"x#p1": 0, "a#p1": 1}
    assert hit_at(RANKED, judged, 1) == 0.0
    assert recall_at(RANKED, judged, 2) == 1.0  # |R| = 1, grade-0 page not counted
    assert ndcg_at(RANKED, judged, 2) == pytest.approx((1 / L3) / 1.0)


def test_doc_hit_at():
    # distinct docs in order: x, a, y, z, b; labelled docs {a, b}
    assert doc_hit_at(RANKED, JUDGED, 1) == 0.0
    assert doc_hit_at(RANKED, JUDGED, 2) == 1.0
    # another page of a labelled document counts at document level, not at page level
    ranked = ["a#p7", "x#p1"]
    assert hit_at(ranked, JUDGED, 1) == 0.0
    assert doc_hit_at(ranked, JUDGED, 1) == 1.0
    # k counts distinct documents: x, x, x, a -> a is the 2nd distinct doc
    ranked = ["x#p1", "x#p2", "x#p3", "a#p9"]
    assert doc_hit_at(ranked, JUDGED, 1) == 0.0
    assert doc_hit_at(ranked, JUDGED, 2) == 1.0
    assert hit_at(ranked, {"b#p3": 1}, 3) == 0.0
    assert doc_hit_at(["n#p1", "m#p2", "k#p3", "a#p1"], JUDGED, 3) == 0.0  # a is 4th doc


def test_score_names_and_registry():
    assert set(METRICS) == {"hit", "recall", "mrr", "ndcg", "ndcg_graded", "doc_hit"}
    assert parse_metric("ndcg@10") == ("ndcg", 10)
    assert parse_metric("mrr") == ("mrr", None)
    assert score("hit@2", RANKED, JUDGED) == 1.0
    assert score("recall@4", RANKED, JUDGED) == 0.5
    assert score("mrr", RANKED, JUDGED) == 0.5
    assert score("mrr@1", RANKED, JUDGED) == 0.0
    assert score("mrr@2", RANKED, JUDGED) == 0.5
    assert score("ndcg@5", RANKED, JUDGED) == ndcg_at(RANKED, JUDGED, 5)
    assert score("ndcg_graded@5", RANKED, JUDGED) == ndcg_at(RANKED, JUDGED, 5, graded=True)
    assert score("doc_hit@2", RANKED, JUDGED) == 1.0


@pytest.mark.parametrize("bad", ["map@10", "hit", "hit@0", "ndcg@x", "mrr@", "", "HIT@3"])
def test_unknown_metric_names_raise(bad):
    with pytest.raises(ValueError, match="known forms"):
        score(bad, RANKED, JUDGED)


def test_evaluate_and_per_question():
    qrels = {
        "q1": {"a#p1": 1},  # found at rank 1
        "q2": {"b#p1": 2},  # found at rank 2
        "q3": {"c#p1": 1},  # missing from run -> empty ranking -> 0
        "q4": {},  # no relevant page -> excluded
        "q5": {"d#p1": 0},  # only grade 0 -> excluded
    }
    run = {"q1": ["a#p1", "x#p1"], "q2": ["x#p1", "b#p1"], "q4": ["a#p1"], "q9": ["a#p1"]}
    table = per_question(qrels, run, ["hit@1", "mrr"])
    assert table == {
        "hit@1": {"q1": 1.0, "q2": 0.0, "q3": 0.0},
        "mrr": {"q1": 1.0, "q2": 0.5, "q3": 0.0},
    }
    means = evaluate(qrels, run, ["hit@1", "mrr", "recall@2"])
    assert means["hit@1"] == pytest.approx(1 / 3)  # (1 + 0 + 0) / 3
    assert means["mrr"] == pytest.approx(0.5)  # (1 + 1/2 + 0) / 3
    assert means["recall@2"] == pytest.approx(2 / 3)  # (1 + 1 + 0) / 3
    assert math.isnan(evaluate({"q": {}}, {}, ["mrr"])["mrr"])
    with pytest.raises(ValueError):
        evaluate(qrels, run, ["nope@1"])


def test_auroc_hand_case():
    # pairs: 0.9>0.5 (1), 0.9>0.1 (1), 0.5=0.5 (0.5), 0.5>0.1 (1) -> 3.5 / 4
    assert auroc([0.9, 0.5], [0.5, 0.1]) == pytest.approx(0.875)
    assert auroc([1.0], [0.0]) == 1.0
    assert auroc([0.0], [1.0]) == 0.0
    assert auroc([0.3, 0.3], [0.3]) == 0.5
    assert math.isnan(auroc([], [0.1]))
    assert math.isnan(auroc([0.1], []))


def test_auroc_equals_sklearn():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(42)
    for _ in range(20):
        pos = np.round(rng.normal(1.0, 1.0, size=36), 1)  # rounding creates ties
        neg = np.round(rng.normal(0.0, 1.0, size=18), 1)
        y = np.r_[np.ones(pos.size), np.zeros(neg.size)]
        expected = roc_auc_score(y, np.r_[pos, neg])
        assert auroc(pos, neg) == pytest.approx(expected, abs=1e-12)


# --------------------------------------------------------------------------- cross-checks


def _toy_benchmark(seed: int = 42, n_questions: int = 40):
    """Seeded random qrels (grades 1/2) and rankings of 25 unique pages over 8 docs."""
    rnd = random.Random(seed)
    pages = [f"doc{d}#p{p}" for d in range(8) for p in range(1, 9)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[str]] = {}
    for i in range(n_questions):
        qid = f"Q{i:03d}"
        relevant = rnd.sample(pages, rnd.randint(1, 4))
        qrels[qid] = {page: rnd.choice([1, 2]) for page in relevant}
        run[qid] = rnd.sample(pages, 25)
    return qrels, run


def _binary(qrels):
    return {q: {p: 1 for p, g in j.items() if g >= 1} for q, j in qrels.items()}


def test_cross_check_ir_measures():
    """ir_measures (pytrec_eval, i.e. trec_eval) agrees to 1e-9.

    trec_eval nDCG uses linear gains (gain = relevance level), so graded qrels match
    our ``ndcg_graded@k`` and binarised qrels match our default binary ``ndcg@k``.
    """
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import RR, R, Success, nDCG

    qrels, run = _toy_benchmark()

    def calc(measures, qrel_map):
        qrel_rows = [ir_measures.Qrel(q, p, g) for q, judged in qrel_map.items() for p, g in judged.items()]
        # distinct descending scores, so trec_eval's tie-breaking never matters
        run_rows = [
            ir_measures.ScoredDoc(q, p, float(100 - r))
            for q, ranked in run.items()
            for r, p in enumerate(ranked, 1)
        ]
        out: dict = {}
        for m in ir_measures.iter_calc(measures, qrel_rows, run_rows):
            out[(str(m.measure), m.query_id)] = m.value
        return out

    ks = [1, 3, 5, 10, 20]
    ours_vs_theirs = {f"hit@{k}": str(Success @ k) for k in ks}
    ours_vs_theirs |= {f"recall@{k}": str(R @ k) for k in ks}
    ours_vs_theirs |= {f"mrr@{k}": str(RR @ k) for k in ks}
    ours_vs_theirs |= {f"ndcg@{k}": str(nDCG @ k) for k in ks}
    binary = calc([m @ k for m in (Success, R, RR, nDCG) for k in ks], _binary(qrels))
    graded = calc([nDCG @ k for k in ks], qrels)
    table = per_question(qrels, run, list(ours_vs_theirs) + [f"ndcg_graded@{k}" for k in ks])
    for ours, theirs in ours_vs_theirs.items():
        for qid, value in table[ours].items():
            assert value == pytest.approx(binary[(theirs, qid)], abs=1e-9), (ours, qid)
    for k in ks:
        for qid, value in table[f"ndcg_graded@{k}"].items():
            assert value == pytest.approx(graded[(str(nDCG @ k), qid)], abs=1e-9), (k, qid)
    # plain "mrr" is RR over the first 20 ranks
    assert table["mrr@20"] == per_question(qrels, run, ["mrr"])["mrr"]


@pytest.mark.slow
def test_cross_check_ranx():
    """ranx agrees to 1e-9; ranx ``ndcg`` is Järvelin's nDCG with linear gains (the
    same as trec_eval), ``ndcg_burges`` would be the 2^g - 1 variant.

    The first run compiles ranx's numba kernels (cached afterwards).
    """
    ranx = pytest.importorskip("ranx")
    qrels, run = _toy_benchmark()
    ranx_run = ranx.Run(
        {q: {p: float(100 - r) for r, p in enumerate(ranked, 1)} for q, ranked in run.items()}
    )
    ks = [1, 3, 5, 10, 20]
    names = {f"hit@{k}": f"hit_rate@{k}" for k in ks}
    names |= {f"recall@{k}": f"recall@{k}" for k in ks}
    names |= {f"mrr@{k}": f"mrr@{k}" for k in ks}
    names |= {f"ndcg@{k}": f"ndcg@{k}" for k in ks}
    binary = ranx.evaluate(ranx.Qrels(_binary(qrels)), ranx_run, list(names.values()), return_mean=False)
    graded = ranx.evaluate(ranx.Qrels(qrels), ranx_run, [f"ndcg@{k}" for k in ks], return_mean=False)
    qids = list(ranx_run.keys())  # ranx's question order for the per-query arrays
    table = per_question(qrels, run, list(names) + [f"ndcg_graded@{k}" for k in ks])
    for ours, theirs in names.items():
        expected = dict(zip(qids, binary[theirs], strict=True))
        for qid, value in table[ours].items():
            assert value == pytest.approx(expected[qid], abs=1e-9), (ours, qid)
    for k in ks:
        expected = dict(zip(qids, graded[f"ndcg@{k}"], strict=True))
        for qid, value in table[f"ndcg_graded@{k}"].items():
            assert value == pytest.approx(expected[qid], abs=1e-9), (k, qid)
    means = evaluate(qrels, run, ["hit@3", "mrr@10", "ndcg@10"])
    ranx_means = ranx.evaluate(ranx.Qrels(_binary(qrels)), ranx_run, ["hit_rate@3", "mrr@10", "ndcg@10"])
    assert means["hit@3"] == pytest.approx(ranx_means["hit_rate@3"], abs=1e-9)
    assert means["mrr@10"] == pytest.approx(ranx_means["mrr@10"], abs=1e-9)
    assert means["ndcg@10"] == pytest.approx(ranx_means["ndcg@10"], abs=1e-9)


def test_miss_kind_by_hand() -> None:
    """The first page next to a labelled one, elsewhere in its document, in another document."""
    from sourcepage.evaluation.metrics import miss_kind

    judged = {"a#p5": 1, "a#p9": 2, "b#p1": 0}
    assert miss_kind(["a#p5", "a#p4"], judged) is None  # a hit
    assert miss_kind(["a#p4", "a#p5"], judged) == "adjacent page"
    assert miss_kind(["a#p10"], judged) == "adjacent page"
    assert miss_kind(["a#p7"], judged) == "same document"
    assert miss_kind(["b#p1"], judged) == "other document"  # grade 0 is not labelled support
    assert miss_kind([], judged) == "nothing ranked"
    assert miss_kind(["a#p1"], {"b#p1": 0}) is None  # nothing labelled
