"""Paired statistics over per-question scores (study §3.7, §4.2).

The answerable questions are paired observations across every retrieval
condition, so all comparisons resample or rank *questions*: question-level
percentile bootstrap CIs (20,000 resamples, seed 42), Friedman across >= 3
conditions, Wilcoxon signed-rank with Holm correction within a comparison
family, matched-pairs rank-biserial effect sizes, and exact McNemar on hits.
Everything is deterministic for a given seed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import stats as sps

from sourcepage.evaluation.metrics import auroc

DEFAULT_RESAMPLES = 20_000
DEFAULT_SEED = 42
_CHUNK_CELLS = 1_000_000  # resample rows per chunk ≈ this / n, bounds memory

__all__ = [
    "auroc_bootstrap_ci",
    "bootstrap_ci",
    "compare_family",
    "friedman",
    "holm",
    "mcnemar_exact",
    "paired_bootstrap_ci",
    "rank_biserial",
    "wilcoxon_signed_rank",
]


def _as_1d(values: Sequence[float], name: str = "values") -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def _paired(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, y = _as_1d(a, "a"), _as_1d(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.size} vs {y.size}")
    return x, y


def _chunks(total: int, width: int) -> list[int]:
    """Row counts of the resample chunks: ~_CHUNK_CELLS cells each."""
    rows = max(1, _CHUNK_CELLS // max(1, width))
    return [min(rows, total - start) for start in range(0, total, rows)]


def _percentiles(stats: np.ndarray, confidence: float) -> tuple[float, float]:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    alpha = 1.0 - confidence
    low, high = np.quantile(stats, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(low), float(high)


# --------------------------------------------------------------------------- bootstrap


def bootstrap_ci(
    values: Sequence[float],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """(mean, low, high): percentile bootstrap CI of the mean over questions.

    Each resample draws n question indices with replacement (``default_rng(seed)``),
    mean* = (1/n) Σ v[idx]; the CI is the (α/2, 1 − α/2) quantiles of the
    means*, α = 1 − confidence. Vectorised in chunks of rows. NaNs if empty.
    """
    v = _as_1d(values)
    n = v.size
    if n == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = np.concatenate(
        [v[rng.integers(0, n, size=(rows, n))].mean(axis=1) for rows in _chunks(n_resamples, n)]
    )
    low, high = _percentiles(means, confidence)
    return float(v.mean()), low, high


def paired_bootstrap_ci(
    a: Sequence[float],
    b: Sequence[float],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """(mean(a − b), low, high): bootstrap CI of the paired mean difference.

    Resampling the per-question differences d_i = a_i − b_i uses the same
    question indices for both conditions, which keeps the pairing.
    """
    x, y = _paired(a, b)
    return bootstrap_ci(x - y, n_resamples=n_resamples, seed=seed, confidence=confidence)


def auroc_bootstrap_ci(
    pos: Sequence[float],
    neg: Sequence[float],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """(auroc, low, high): stratified percentile bootstrap CI of the AUROC.

    Positives and negatives are resampled separately (class sizes fixed). With
    C_ij = 1[p_i > n_j] + 0.5·1[p_i = n_j] and bootstrap multiplicities u, w,
    AUROC* = uᵀ C w / (n_pos · n_neg). Resamples with a non-finite AUROC
    (only possible with NaN scores) are skipped. NaNs if a side is empty.
    """
    p, q = _as_1d(pos, "pos"), _as_1d(neg, "neg")
    point = auroc(p, q)
    if p.size == 0 or q.size == 0:
        return math.nan, math.nan, math.nan
    pair = (p[:, None] > q[None, :]) + 0.5 * (p[:, None] == q[None, :])
    rng = np.random.default_rng(seed)
    out = []
    for rows in _chunks(n_resamples, p.size + q.size):
        u = rng.multinomial(p.size, np.full(p.size, 1.0 / p.size), size=rows)
        w = rng.multinomial(q.size, np.full(q.size, 1.0 / q.size), size=rows)
        out.append(np.einsum("ri,ij,rj->r", u, pair, w) / (p.size * q.size))
    aucs = np.concatenate(out)
    aucs = aucs[np.isfinite(aucs)]
    if aucs.size == 0:
        return point, math.nan, math.nan
    low, high = _percentiles(aucs, confidence)
    return point, low, high


# --------------------------------------------------------------------------- omnibus


def friedman(columns: Mapping[str, Sequence[float]]) -> dict:
    """Friedman test across k >= 3 paired conditions (scipy ``friedmanchisquare``).

    χ²_F = 12 / (n k (k+1)) Σ_j R_j² − 3 n (k+1), with R_j the rank sum of
    condition j over the n questions (tie-corrected by scipy). Returns
    ``{"statistic", "p", "k", "n", "reason"}``; statistic and p are NaN with a
    reason when k < 3 or every question ties all conditions (no ranking info).
    """
    names = list(columns)
    arrays = [_as_1d(columns[name], name) for name in names]
    k = len(arrays)
    n = arrays[0].size if arrays else 0
    if any(arr.size != n for arr in arrays):
        raise ValueError("friedman: all conditions need the same number of questions")
    result: dict = {"statistic": math.nan, "p": math.nan, "k": k, "n": n, "reason": None}
    if k < 3:
        result["reason"] = f"Friedman needs at least 3 conditions, got {k}"
        return result
    if n == 0:
        result["reason"] = "no questions"
        return result
    table = np.column_stack(arrays)
    if np.all(table == table[:, :1]):
        result["reason"] = "all conditions are equal on every question"
        return result
    stat, pvalue = sps.friedmanchisquare(*arrays)
    result["statistic"], result["p"] = float(stat), float(pvalue)
    return result


# --------------------------------------------------------------------------- pairwise


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values, in the input order.

    With p_(1) <= … <= p_(m): p̃_(i) = min(1, max_{j <= i} (m − j + 1) · p_(j)),
    so the adjusted values are monotone and capped at 1. NaN inputs stay NaN
    and do not count towards m.
    """
    p = np.asarray(pvalues, dtype=float)
    adjusted = np.full(p.shape, math.nan)
    finite = np.flatnonzero(np.isfinite(p))
    m = finite.size
    if m == 0:
        return adjusted.tolist()
    order = finite[np.argsort(p[finite], kind="stable")]
    scaled = (m - np.arange(m)) * p[order]
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return adjusted.tolist()


def wilcoxon_signed_rank(
    a: Sequence[float],
    b: Sequence[float],
    zero_method: str = "wilcox",
    alternative: str = "two-sided",
) -> dict:
    """Wilcoxon signed-rank test on paired differences d = a − b (scipy ``wilcoxon``).

    W = min(W+, W−) for two-sided, W± the rank sums of |d| over positive/negative
    d (zero differences dropped with ``zero_method="wilcox"``, scipy's default).
    Returns ``{"statistic", "p", "n", "n_nonzero", "note"}``. When every
    difference is zero the test is undefined; we return statistic 0, p 1.0 and a
    note instead of raising.
    """
    x, y = _paired(a, b)
    d = x - y
    n_nonzero = int(np.count_nonzero(d))
    result: dict = {"statistic": 0.0, "p": 1.0, "n": int(d.size), "n_nonzero": n_nonzero, "note": None}
    if n_nonzero == 0:
        result["note"] = "all paired differences are zero; no evidence of a difference"
        return result
    res = sps.wilcoxon(x, y, zero_method=zero_method, alternative=alternative)
    result["statistic"], result["p"] = float(res.statistic), float(res.pvalue)
    return result


def rank_biserial(a: Sequence[float], b: Sequence[float]) -> float:
    """Matched-pairs rank-biserial correlation r = (W+ − W−) / (W+ + W−).

    Ranks |d| of the non-zero differences d = a − b (average ranks for ties);
    W+ / W− sum the ranks of positive / negative d. r ∈ [−1, 1], positive when
    a tends to exceed b; 0.0 when all differences are zero.
    """
    x, y = _paired(a, b)
    d = x - y
    d = d[d != 0]
    if d.size == 0:
        return 0.0
    ranks = sps.rankdata(np.abs(d))
    w_plus = float(ranks[d > 0].sum())
    w_minus = float(ranks[d < 0].sum())
    return (w_plus - w_minus) / (w_plus + w_minus)


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> dict:
    """Exact McNemar test on paired binary outcomes (e.g. Hit@3 per question).

    b01 = #(a miss, b hit), b10 = #(a hit, b miss); under H0 the discordant pairs
    split Bin(b01 + b10, 0.5), p = binomtest(min(b01, b10), b01 + b10, 0.5)
    two-sided = min(1, 2 · P(X <= min)). p = 1.0 when there is no discordant pair.
    """
    x = np.asarray(a, dtype=bool)
    y = np.asarray(b, dtype=bool)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired outcomes differ in shape: {x.shape} vs {y.shape}")
    b01 = int(np.sum(~x & y))
    b10 = int(np.sum(x & ~y))
    n = b01 + b10
    p = 1.0 if n == 0 else float(sps.binomtest(min(b01, b10), n, 0.5).pvalue)
    return {"b01": b01, "b10": b10, "n": n, "p": p}


def compare_family(
    scores: Mapping[str, Sequence[float]],
    hits: Mapping[str, Sequence[bool]] | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> list[dict]:
    """All planned pairwise comparisons of one family (the study's Table 5).

    For each pair (a, b) — all ``combinations(sorted(scores), 2)`` or ``pairs``
    in the given order — reports mean_a, mean_b, mean_diff = mean(a − b), its
    paired bootstrap CI (ci_low, ci_high), the Wilcoxon statistic and p, the
    Holm-adjusted p within the family (p_holm), rank_biserial, and, if ``hits``
    is given, exact McNemar (mcnemar_b01, mcnemar_b10, mcnemar_p, plus
    mcnemar_p_holm within the family).
    """
    if pairs is None:
        pairs = list(itertools.combinations(sorted(scores), 2))
    rows: list[dict] = []
    for name_a, name_b in pairs:
        for name in (name_a, name_b):
            if name not in scores:
                raise KeyError(f"unknown condition {name!r}; known: {sorted(scores)}")
        x, y = _paired(scores[name_a], scores[name_b])
        diff, low, high = paired_bootstrap_ci(x, y, n_resamples, seed, confidence)
        wil = wilcoxon_signed_rank(x, y)
        row: dict = {
            "a": name_a,
            "b": name_b,
            "n": int(x.size),
            "mean_a": float(x.mean()) if x.size else math.nan,
            "mean_b": float(y.mean()) if y.size else math.nan,
            "mean_diff": diff,
            "ci_low": low,
            "ci_high": high,
            "wilcoxon_statistic": wil["statistic"],
            "p": wil["p"],
            "p_holm": math.nan,
            "rank_biserial": rank_biserial(x, y),
            "note": wil["note"],
        }
        if hits is not None:
            mc = mcnemar_exact(hits[name_a], hits[name_b])
            row.update(mcnemar_b01=mc["b01"], mcnemar_b10=mc["b10"], mcnemar_p=mc["p"])
        rows.append(row)
    for row, adj in zip(rows, holm([row["p"] for row in rows]), strict=True):
        row["p_holm"] = adj
    if hits is not None:
        adjusted = holm([row["mcnemar_p"] for row in rows])
        for row, adj in zip(rows, adjusted, strict=True):
            row["mcnemar_p_holm"] = adj
    return rows
