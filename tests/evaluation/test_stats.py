from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from sourcepage.evaluation.metrics import auroc
from sourcepage.evaluation.stats import (
    auroc_bootstrap_ci,
    bootstrap_ci,
    compare_family,
    friedman,
    holm,
    mcnemar_exact,
    paired_bootstrap_ci,
    rank_biserial,
    wilcoxon_signed_rank,
)


def _rr_columns(seed: int = 42, n: int = 36) -> dict[str, np.ndarray]:
    """Reciprocal-rank-like columns (values 1/r or 0, many ties) for three methods."""
    rng = np.random.default_rng(seed)

    def rr(p_miss: float) -> np.ndarray:
        ranks = rng.integers(1, 21, size=n)
        return np.where(rng.random(n) < p_miss, 0.0, 1.0 / ranks)

    return {"bm25": rr(0.2), "lsa": rr(0.4), "rrf": rr(0.3)}


# --------------------------------------------------------------------------- Holm


def test_holm_hand_case():
    # sorted: 0.005, 0.01, 0.03, 0.04 (m = 4)
    # scaled: 4*0.005=0.02, 3*0.01=0.03, 2*0.03=0.06, 1*0.04=0.04 -> running max 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_cap_nan_and_monotone():
    # 2*0.5 = 1.0, then max(1.0, 0.6) = 1.0
    assert holm([0.5, 0.6]) == [1.0, 1.0]
    assert holm([0.9]) == [0.9]
    assert holm([]) == []
    out = holm([0.02, math.nan, 0.01])  # m = 2: 2*0.01 = 0.02, max(0.02, 1*0.02) = 0.02
    assert out[0] == pytest.approx(0.02) and out[2] == pytest.approx(0.02)
    assert math.isnan(out[1])
    rng = np.random.default_rng(42)
    p = rng.random(12) ** 3
    adj = np.array(holm(p))
    order = np.argsort(p)
    assert np.all(np.diff(adj[order]) >= 0)
    assert np.all(adj >= p) and np.all(adj <= 1.0)


# --------------------------------------------------------------------------- McNemar


def test_mcnemar_hand_case():
    # a hit / b miss six times (b10 = 6), a miss / b hit once (b01 = 1), plus concordant pairs
    a = [True] * 6 + [False] + [True] * 5 + [False] * 4
    b = [False] * 6 + [True] + [True] * 5 + [False] * 4
    out = mcnemar_exact(a, b)
    assert (out["b01"], out["b10"], out["n"]) == (1, 6, 7)
    # p = 2 * P(X <= 1), X ~ Bin(7, 0.5) = 2 * (1 + 7) / 128 = 0.125
    assert out["p"] == pytest.approx(0.125)
    assert mcnemar_exact(b, a)["p"] == pytest.approx(0.125)


def test_mcnemar_no_discordant_pairs():
    out = mcnemar_exact([True, False, True], [True, False, True])
    assert out == {"b01": 0, "b10": 0, "n": 0, "p": 1.0}
    with pytest.raises(ValueError):
        mcnemar_exact([True], [True, False])


# --------------------------------------------------------------------------- Wilcoxon / rank-biserial


def test_rank_biserial_hand_case():
    a = [1.0, 0.25, 0.5, 0.5, 1.0]
    b = [0.5, 0.5, 0.25, 0.5, 0.0]
    # d = [0.5, -0.25, 0.25, 0 (dropped), 1.0]; |d| ranks: 0.25,0.25 -> 1.5 each; 0.5 -> 3; 1 -> 4
    # W+ = 3 + 1.5 + 4 = 8.5, W- = 1.5, r = (8.5 - 1.5) / 10 = 0.7
    assert rank_biserial(a, b) == pytest.approx(0.7)
    assert rank_biserial(b, a) == pytest.approx(-0.7)
    # Wilcoxon's two-sided statistic is min(W+, W-) = 1.5
    assert wilcoxon_signed_rank(a, b)["statistic"] == pytest.approx(1.5)
    assert rank_biserial([1.0, 2.0], [0.0, 0.0]) == 1.0
    assert rank_biserial([1.0, 2.0], [1.0, 2.0]) == 0.0


def test_rank_biserial_matches_wilcoxon_statistic():
    cols = _rr_columns()
    a, b = cols["bm25"], cols["lsa"]
    d = a - b
    nz = d[d != 0]
    total = nz.size * (nz.size + 1) / 2  # W+ + W- = sum of ranks 1..n'
    w_min = sps.wilcoxon(a, b).statistic
    r = rank_biserial(a, b)
    # |r| = 1 - 2 * min(W+, W-) / (W+ + W-)
    assert abs(r) == pytest.approx(1 - 2 * w_min / total)


def test_wilcoxon_equals_scipy():
    cols = _rr_columns()
    for x, y in [("bm25", "lsa"), ("bm25", "rrf"), ("rrf", "lsa")]:
        ours = wilcoxon_signed_rank(cols[x], cols[y])
        ref = sps.wilcoxon(cols[x], cols[y], zero_method="wilcox", alternative="two-sided")
        assert ours["statistic"] == pytest.approx(float(ref.statistic))
        assert ours["p"] == pytest.approx(float(ref.pvalue))
        assert ours["n"] == 36
        assert ours["n_nonzero"] == int(np.count_nonzero(cols[x] - cols[y]))
        assert ours["note"] is None


def test_wilcoxon_all_zero_differences():
    out = wilcoxon_signed_rank([0.5, 1.0, 0.0], [0.5, 1.0, 0.0])
    assert out["statistic"] == 0.0 and out["p"] == 1.0 and out["n_nonzero"] == 0
    assert out["note"]
    with pytest.raises(ValueError):
        wilcoxon_signed_rank([1.0, 2.0], [1.0])


# --------------------------------------------------------------------------- Friedman


def test_friedman_equals_scipy():
    cols = _rr_columns()
    out = friedman(cols)
    ref = sps.friedmanchisquare(cols["bm25"], cols["lsa"], cols["rrf"])
    assert out["statistic"] == pytest.approx(float(ref.statistic))
    assert out["p"] == pytest.approx(float(ref.pvalue))
    assert (out["k"], out["n"], out["reason"]) == (3, 36, None)


def test_friedman_degenerate_cases():
    two = friedman({"a": [1.0, 2.0], "b": [2.0, 1.0]})
    assert math.isnan(two["p"]) and math.isnan(two["statistic"]) and two["k"] == 2
    assert "3 conditions" in two["reason"]
    tied = friedman({"a": [0.5, 1.0, 0.0], "b": [0.5, 1.0, 0.0], "c": [0.5, 1.0, 0.0]})
    assert math.isnan(tied["p"]) and tied["reason"] and tied["n"] == 3
    with pytest.raises(ValueError):
        friedman({"a": [1.0], "b": [1.0, 2.0], "c": [1.0]})


# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_ci_deterministic_and_contains_mean():
    values = _rr_columns()["bm25"]
    mean, low, high = bootstrap_ci(values)
    assert mean == pytest.approx(values.mean())
    assert low < mean < high
    assert bootstrap_ci(values) == (mean, low, high)  # same seed, same CI
    assert bootstrap_ci(values, seed=7) != (mean, low, high)
    m90, l90, h90 = bootstrap_ci(values, confidence=0.90)
    assert l90 >= low and h90 <= high


def test_bootstrap_ci_matches_plain_reference():
    # one chunk (2000 x 36 cells) -> identical to an unchunked plain implementation
    values = _rr_columns()["lsa"]
    rng = np.random.default_rng(42)
    means = values[rng.integers(0, values.size, size=(2000, values.size))].mean(axis=1)
    expected = np.quantile(means, [0.025, 0.975])
    _, low, high = bootstrap_ci(values, n_resamples=2000)
    assert (low, high) == pytest.approx(tuple(expected), abs=1e-15)


def test_bootstrap_ci_large_and_edge_cases():
    values = np.random.default_rng(0).random(60)
    mean, low, high = bootstrap_ci(values)  # 20,000 x 60, chunked
    assert low < mean < high
    # normal-theory check: half-width ~ 1.96 * sd / sqrt(n)
    half = 1.96 * values.std() / math.sqrt(values.size)
    assert (high - low) / 2 == pytest.approx(half, rel=0.1)
    assert bootstrap_ci([0.3, 0.3, 0.3]) == pytest.approx((0.3, 0.3, 0.3))
    assert all(math.isnan(x) for x in bootstrap_ci([]))
    with pytest.raises(ValueError):
        bootstrap_ci(values, confidence=1.5)


def test_paired_bootstrap_ci():
    cols = _rr_columns()
    a, b = cols["bm25"], cols["lsa"]
    assert paired_bootstrap_ci(a, a) == (0.0, 0.0, 0.0)
    diff, low, high = paired_bootstrap_ci(a, b)
    assert diff == pytest.approx(a.mean() - b.mean())
    assert (diff, low, high) == bootstrap_ci(a - b)  # same indices for a and b
    neg = paired_bootstrap_ci(b, a)
    assert neg == pytest.approx((-diff, -high, -low))
    with pytest.raises(ValueError):
        paired_bootstrap_ci([1.0, 2.0], [1.0])


def test_auroc_bootstrap_ci():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(42)
    pos = np.round(rng.normal(1.0, 1.0, 36), 1)
    neg = np.round(rng.normal(0.0, 1.0, 18), 1)
    point, low, high = auroc_bootstrap_ci(pos, neg)
    assert point == pytest.approx(roc_auc_score(np.r_[np.ones(36), np.zeros(18)], np.r_[pos, neg]))
    assert low < point < high
    assert auroc_bootstrap_ci(pos, neg) == (point, low, high)
    # agrees with a plain stratified index bootstrap (different draws) within MC error
    ref = [auroc(pos[rng.integers(0, 36, 36)], neg[rng.integers(0, 18, 18)]) for _ in range(3000)]
    ref_low, ref_high = np.quantile(ref, [0.025, 0.975])
    assert low == pytest.approx(ref_low, abs=0.03)
    assert high == pytest.approx(ref_high, abs=0.03)
    # perfect separation stays perfect in every stratified resample
    assert auroc_bootstrap_ci([2.0, 3.0], [0.0, 1.0]) == (1.0, 1.0, 1.0)
    assert all(math.isnan(x) for x in auroc_bootstrap_ci([], [0.1]))


# --------------------------------------------------------------------------- families


def test_compare_family_default_pairs():
    cols = _rr_columns()
    hits = {name: col >= 1 / 3 for name, col in cols.items()}  # Hit@3 from RR
    rows = compare_family(cols, hits=hits, n_resamples=2000)
    assert [(r["a"], r["b"]) for r in rows] == [("bm25", "lsa"), ("bm25", "rrf"), ("lsa", "rrf")]
    ps = [r["p"] for r in rows]
    assert [r["p_holm"] for r in rows] == pytest.approx(holm(ps))
    assert [r["mcnemar_p_holm"] for r in rows] == pytest.approx(holm([r["mcnemar_p"] for r in rows]))
    for r in rows:
        a, b = cols[r["a"]], cols[r["b"]]
        assert r["mean_diff"] == pytest.approx(a.mean() - b.mean())
        assert (r["mean_diff"], r["ci_low"], r["ci_high"]) == paired_bootstrap_ci(a, b, 2000)
        assert r["p"] == pytest.approx(float(sps.wilcoxon(a, b).pvalue))
        assert r["rank_biserial"] == pytest.approx(rank_biserial(a, b))
        mc = mcnemar_exact(hits[r["a"]], hits[r["b"]])
        assert (r["mcnemar_b01"], r["mcnemar_b10"], r["mcnemar_p"]) == (mc["b01"], mc["b10"], mc["p"])
    assert compare_family(cols, hits=hits, n_resamples=2000) == rows  # deterministic


def test_compare_family_given_pairs_and_no_hits():
    cols = _rr_columns()
    cols["same"] = cols["bm25"].copy()
    pairs = [("rrf", "lsa"), ("bm25", "same")]
    rows = compare_family(cols, pairs=pairs, n_resamples=500)
    assert [(r["a"], r["b"]) for r in rows] == pairs
    assert "mcnemar_p" not in rows[0]
    same = rows[1]
    assert (same["mean_diff"], same["ci_low"], same["ci_high"]) == (0.0, 0.0, 0.0)
    assert same["p"] == 1.0 and same["rank_biserial"] == 0.0 and same["note"]
    # Holm with m = 2: the smaller p doubles, capped at 1
    assert rows[0]["p_holm"] == pytest.approx(min(1.0, 2 * rows[0]["p"]))
    with pytest.raises(KeyError):
        compare_family(cols, pairs=[("bm25", "nope")])
