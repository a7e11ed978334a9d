"""A second operating point for the answer gate, measured on the dev splits and not kept
(README, "Does the corpus answer it?"): answer when P(supported) ≥ t_s1 and P(states) ≥ t_q1
(today's pair, ``fit_quotes.fit_thresholds``), **or** when P(supported) ≥ t_s2 < t_s1 and
P(states) ≥ t_q2 > t_q1 — a surer quote standing in for a less sure page.

    python benchmarks/gate_points.py --set STORE=QUESTIONS [--set …] --cache DIR \\
        --probabilities OOF.json [--t-support 0.9266] [--margin M]

Reads ``fit_quotes.py``'s cached rows (``--cache``, the same folder) and its out-of-fold
P(supported); the shipped selector form (no MiniLM, C = 0.1) is refitted out of fold. The
second point is fitted like the first (highest answer recall with no negative answered and
≥ 90% of answers stating; at equal recall the stricter point), and with ``--margin M`` only a
point that still answers no negative when both thresholds are M lower is admitted. Prints the
in-sample gate and the nested estimate (thresholds fitted on four fifths, scored on the fifth,
three seeds) of the one-point and the two-point gate. Tune on dev only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import fit_quotes as F  # benchmarks/, this script's folder
import numpy as np
from sklearn.model_selection import KFold

from sourcepage.support import select as S

Point = tuple[float, float]


def outcomes(rows: list[dict[str, Any]], quoted: list[tuple[float, bool]], points: list[Point]) -> dict:
    """Counts of the gate that answers when any of ``points`` (t_support, t_quote) passes."""
    c = dict.fromkeys(("answered", "stating", "pos", "neg", "neg_ans"), 0)
    for r, (best, holds) in zip(rows, quoted, strict=True):
        p = r["probability"] or 0.0
        ok = not r["blocked"] and any(p >= ts and best >= tq for ts, tq in points)
        if r["class"] == "answerable":
            c["pos"] += 1
            c["answered"] += ok
            c["stating"] += ok and holds
        else:
            c["neg"] += 1
            c["neg_ans"] += ok
    return c


def allowed(c: dict) -> bool:
    precision = c["stating"] / c["answered"] if c["answered"] else 1.0
    return c["neg_ans"] <= F.MAX_NEG_ANSWERED * c["neg"] and precision >= F.MIN_PRECISION


def fit_points(rows: list[dict[str, Any]], probs: list[np.ndarray], t_support: float | None, margin: float):
    """Today's pair, then the second point of highest recall the constraints allow."""
    t_s1, t_q1, _ = F.fit_thresholds(rows, probs, t_support)
    quoted = F.outcomes_of(rows, probs)
    first = [(t_s1, t_q1)]
    start = outcomes(rows, quoted, first)["stating"]
    best: tuple[tuple[int, float, float], list[Point]] = ((start, 0.0, 0.0), first)
    p_s = sorted({round(r["probability"] or 0.0, 4) for r in rows if 0.5 <= (r["probability"] or 0.0) < t_s1})
    p_q = sorted({round(b, 4) for b, _ in quoted if b > t_q1})
    for ts in p_s:
        for tq in p_q:
            c = outcomes(rows, quoted, [*first, (ts, tq)])
            if not (allowed(c) and allowed(outcomes(rows, quoted, [*first, (ts - margin, tq - margin)]))):
                continue
            key = (c["stating"], ts, tq)  # at equal recall the stricter point
            if key > best[0]:
                best = (key, [*first, (ts, tq)])
    return best[1]


def nested(rows: list[dict[str, Any]], probs: list[np.ndarray], fit) -> dict[str, float]:
    tot = dict.fromkeys(("answered", "stating", "pos", "neg", "neg_ans"), 0)
    for seed in (42, 43, 44):
        for train, test in KFold(5, shuffle=True, random_state=seed).split(rows):
            points = fit([rows[i] for i in train], [probs[i] for i in train])
            held = [rows[i] for i in test]
            c = outcomes(held, F.outcomes_of(held, [probs[i] for i in test]), points)
            for k in tot:
                tot[k] += c[k]
    return {
        "answered": tot["answered"],
        "precision": round(tot["stating"] / tot["answered"], 4),
        "recall": round(tot["stating"] / tot["pos"], 4),
        "neg_answered": round(tot["neg_ans"] / tot["neg"], 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", required=True, help="STORE=QUESTIONS (a dev split)")
    ap.add_argument("--cache", type=Path, required=True, help="fit_quotes.py's cache folder")
    ap.add_argument("--probabilities", type=Path, required=True, help="fit_policy.py --oof output")
    ap.add_argument("--t-support", type=float, default=None)
    ap.add_argument("--margin", type=float, default=0.0)
    a = ap.parse_args()
    rows: list[dict[str, Any]] = []
    for pair in a.set:
        store, _, qpath = pair.partition("=")
        rows += json.loads((a.cache / (Path(store).name + "-" + Path(qpath).stem + ".json")).read_text())
    F._text_features(rows)
    F._held_out(rows, json.loads(a.probabilities.read_text()), a.probabilities)
    F.passage_labels(rows)
    names = [f for f in S.FEATURES if not f.startswith("minilm")]
    probs = F.split_probs(rows, F.out_of_fold(rows, names, 0.1))
    one = lambda r, p: [F.fit_thresholds(r, p, a.t_support)[:2]]  # noqa: E731
    two = lambda r, p: fit_points(r, p, a.t_support, a.margin)  # noqa: E731
    points = two(rows, probs)
    c = outcomes(rows, F.outcomes_of(rows, probs), points)
    print(
        f"in sample: points {points}; answered {c['answered']}, stating {c['stating']} of {c['pos']}, "
        f"negatives answered {c['neg_ans']} of {c['neg']}"
    )
    print(f"nested, one point: {nested(rows, probs, one)}")
    print(f"nested, two points (margin {a.margin}): {nested(rows, probs, two)}")


if __name__ == "__main__":
    main()
