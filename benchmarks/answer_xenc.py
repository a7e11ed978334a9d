"""The cross-encoder in the answer stage (issue #47 items 4–5; issue #52 item 4): choose on
the pool's train splits, measure once on its dev splits.

    python benchmarks/answer_xenc.py choose --quotes Q.json … --policy P.json … [--out CHOICE.json]
    python benchmarks/answer_xenc.py measure --choice CHOICE.json --quotes Q.json … --policy P.json …

Inputs are the rows the fitting scripts collect: ``fit_quotes.py --collect-only`` (one row
per question: the shipped search's decision inputs and every candidate unit with its
features, the cross-encoder's among them for the first ``XENC_COLLECT`` units a part) and
``fit_policy.py --xenc --cache`` (P(supported) feature rows with the cross-encoder's).

``choose`` (train rows only): each P(supported) feature set (``POLICIES``) gets out-of-fold
probabilities (``calibrate.out_of_fold``) and its refusal threshold; each selector
(``SELECTORS``: features, units read, C) out-of-fold P(states) (``fit_quotes.out_of_fold``,
folds by question); each pair the nested estimate of its answer gate
(``fit_quotes.nested``: thresholds fitted on 4/5 of the questions, scored on the fifth).
The pair of highest nested answer recall with no negative answered and precision ≥ 0.90
is chosen (ties: the cheaper). Then both are fitted on all train rows, the gate's
thresholds on the out-of-fold probabilities (as ``fit_quotes.py`` does), and written.

``measure`` (dev rows, once): the shipped models against the chosen ones, per split and
pooled: answer precision and recall (``evaluation.answers`` rules: a negative answered
counts against precision), recall over answerable questions no rule sends to review,
negatives answered, out-of-domain refused, AUROC of P(supported) answerable vs
unsupported (near) and vs out-of-domain, and paired 95% bootstrap intervals of the
differences.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fit_quotes as FQ  # noqa: E402

from sourcepage.evaluation.metrics import auroc  # noqa: E402
from sourcepage.evaluation.stats import paired_bootstrap_ci  # noqa: E402
from sourcepage.support import calibrate as C  # noqa: E402
from sourcepage.support.features import CLASSIFIER_FEATURES, matrix  # noqa: E402
from sourcepage.support.policy import Classifier, default_policy  # noqa: E402
from sourcepage.support.select import QuoteModel, quote_model  # noqa: E402

BASE_Q = list(quote_model().features) if quote_model() else []  # type: ignore[union-attr]
#: P(supported) feature sets
POLICIES: dict[str, list[str]] = {
    "today's": list(CLASSIFIER_FEATURES),
    "+xenc_max": [*CLASSIFIER_FEATURES, "xenc_max"],
    "+xenc_max+mean3": [*CLASSIFIER_FEATURES, "xenc_max", "xenc_mean3"],
}
#: selector → (features, units a part read by the cross-encoder, C)
SELECTORS: dict[str, tuple[list[str], int, float]] = {
    "today's": (BASE_Q, 0, 0.1),
    "+xenc_unit (12)": ([*BASE_Q, "xenc_unit", "xenc_unit_gap"], 12, 0.1),
    "+xenc (12)": ([*BASE_Q, "xenc", "xenc_gap"], 12, 0.1),
    "+xenc, no gap (12)": ([*BASE_Q, "xenc"], 12, 0.1),
    "+xenc (8)": ([*BASE_Q, "xenc", "xenc_gap"], 8, 0.1),
    "+xenc (16)": ([*BASE_Q, "xenc", "xenc_gap"], 16, 0.1),
}


def key(row: dict[str, Any]) -> str:
    """The policy rows' id of a quote row ("NAME:ID", NAME the questions' folder)."""
    return f"{Path(row['set']).parent.name}:{row['id']}"


def load(quotes: list[Path], policy: list[Path]) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Quote rows (text features set, passage labels) and policy rows by id."""
    rows = [r for p in quotes for r in json.loads(p.read_text())]
    FQ._text_features(rows)
    FQ.passage_labels(rows)
    prow = {r["id"]: r for p in policy for r in json.loads(p.read_text())}
    missing = [key(r) for r in rows if key(r) not in prow]
    if missing:
        raise SystemExit(f"no policy row for {missing[:5]} …")
    return rows, prow


def aurocs(p: np.ndarray, classes: list[str]) -> dict[str, float]:
    """AUROC of P(supported): answerable against unsupported (near) and out-of-domain."""
    c = np.array(classes)
    pos = p[c == "answerable"]
    return {
        "near": round(auroc(pos.tolist(), p[c == "unsupported"].tolist()), 4),
        "ood": round(auroc(pos.tolist(), p[c == "out_of_domain"].tolist()), 4),
    }


def choose(a: argparse.Namespace) -> None:
    rows, prow = load(a.quotes, a.policy)
    prows = [prow[key(r)] for r in rows]
    y = np.array([r["label"] for r in prows])
    classes = [r["class"] for r in rows]
    pol: dict[str, tuple[np.ndarray, float]] = {}
    for name, feats in POLICIES.items():
        oof, _, _ = C.out_of_fold(matrix([r["features"] for r in prows], feats), y)
        t_refuse, _ = C.thresholds(oof, y, 0.05, 0.0)
        pol[name] = (oof, t_refuse)
        ood = [p < t_refuse for p, c in zip(oof, classes, strict=True) if c == "out_of_domain"]
        print(
            f"P(supported) {name:18} AUROC {aurocs(oof, classes)}, t_refuse {t_refuse:.4f}, "
            f"OOD refused {np.mean(ood):.3f}"
        )
    sel: dict[str, tuple[list[dict[str, Any]], list[np.ndarray]]] = {}
    for name, (feats, n, c_reg) in SELECTORS.items():
        r_n = FQ.xenc_units(rows, n) if n else rows
        probs = FQ.split_probs(r_n, FQ.out_of_fold(r_n, feats, c_reg))
        sel[name] = (r_n, probs)
        print(f"selector {name:20} {FQ.selection_scores(r_n, probs)}")
    results = []
    for pn, (oof, t_refuse) in pol.items():
        for sn, (r_n, probs) in sel.items():
            with_p = [{**r, "probability": float(p)} for r, p in zip(r_n, oof, strict=True)]
            est = FQ.nested(with_p, probs, floor=t_refuse)
            cost = (pn != "today's") * len(POLICIES[pn]) + SELECTORS[sn][1]
            results.append({"policy": pn, "selector": sn, "cost": cost, **est})
            print(f"nested  {pn:18} × {sn:20} {est}", flush=True)
    ok = [r for r in results if r["neg_answered"] <= 0.02 and r["precision"] >= 0.90] or results
    best = max(ok, key=lambda r: (r["recall"], r["precision"], -r["cost"]))
    print(f"chosen: {best}; {len(results)} pairs tried")
    if a.out:
        fit_and_write(rows, prows, best, pol[best["policy"]], sel[best["selector"]], results, a.out)


def fit_and_write(
    rows: list[dict[str, Any]],
    prows: list[dict[str, Any]],
    best: dict[str, Any],
    pol: tuple[np.ndarray, float],
    sel: tuple[list[dict[str, Any]], list[np.ndarray]],
    results: list[dict[str, Any]],
    out: Path,
) -> None:
    """The chosen pair fitted on all train rows, its gate on the out-of-fold probabilities."""
    feats = POLICIES[best["policy"]]
    policy = C.fit_policy(
        prows, text_version="raw", sparse="bm25", semantic="dense", origin="default", names=feats
    )
    qfeats, n, c_reg = SELECTORS[best["selector"]]
    r_n, probs = sel
    with_p = [{**r, "probability": float(p)} for r, p in zip(r_n, pol[0], strict=True)]
    t_s, t_q, o = FQ.fit_thresholds(with_p, probs, floor=policy.t_refuse)
    model = FQ.fitted_model(
        r_n,
        qfeats,
        c_reg,
        t_s,
        t_q,
        {
            "fitted_on": sorted({r["set"] for r in rows}),
            "labels": "passage",
            "xenc_units": n,
            "questions": len(rows),
            "chosen": best["selector"],
            "policy_features": best["policy"],
            "train_gate_out_of_fold": {k: round(v, 4) for k, v in o.items()},
            "train_nested": {k: best[k] for k in ("answered", "precision", "recall", "neg_answered")},
            "pairs_tried": results,
        },
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "quote_model.json").write_text(json.dumps(model.as_dict(), indent=2, sort_keys=True) + "\n")
    (out / "default_policy.json").write_text(json.dumps(policy.to_json(), indent=2, sort_keys=True) + "\n")
    print(f"t_refuse {policy.t_refuse:.4f}, t_support {t_s}, t_quote {t_q}: {o}; wrote {out}")


def outcomes(
    rows: list[dict[str, Any]],
    prows: list[dict[str, Any]],
    clf: Classifier,
    t_refuse: float,
    model: QuoteModel,
    n: int,
) -> list[dict[str, Any]]:
    """Per question what a search with these models decides (``support.decide``: refused
    under t_refuse or by the jurisdiction rule; answered when no rule sends it to review,
    P(supported) reaches t_support and the quotes' P(states) t_quote) and whether an
    answer's quotes state the evidence."""
    from sourcepage.support.answer import stated

    r_n = FQ.xenc_units(rows, n) if n else rows
    probs = clf.predict([r["features"] for r in prows])
    t_answer = max(model.t_support, t_refuse)
    out = []
    for r, p in zip(r_n, probs.tolist(), strict=True):
        units, quotes = FQ.quotes_of(r, model.proba([c["features"] for c in r["cands"]]))
        refused = p < t_refuse or r["rule_refused"]
        answered = not refused and not r["blocked"] and p >= t_answer and stated(units) >= model.t_quote
        out.append(
            {
                "class": r["class"],
                "p": p,
                "refused": refused,
                "blocked": r["blocked"],
                "answered": answered,
                "stating": answered and r["class"] == "answerable" and FQ.holds(r, quotes),
                "labelled": r["class"] == "answerable" and r["has_excerpt"],
            }
        )
    return out


def figures(o: list[dict[str, Any]]) -> dict[str, Any]:
    ans = [x for x in o if x["answered"]]
    lab = [x for x in o if x["labelled"]]
    neg = [x for x in o if x["class"] != "answerable"]
    ood = [x for x in o if x["class"] == "out_of_domain"]
    free = [x for x in lab if not x["blocked"]]
    return {
        "answers": len(ans),
        "precision": round(sum(x["stating"] for x in ans) / len(ans), 3) if ans else None,
        "recall": round(sum(x["stating"] for x in lab) / len(lab), 3),
        "recall_free": round(sum(x["stating"] for x in free) / len(free), 3) if free else None,
        "neg_answered": f"{sum(x['answered'] for x in neg)}/{len(neg)}",
        "ood_refused": f"{sum(x['refused'] for x in ood)}/{len(ood)}",
        **aurocs(np.array([x["p"] for x in o]), [x["class"] for x in o]),
    }


def precision_ci(before: list[dict[str, Any]], after: list[dict[str, Any]], seed: int = 42) -> str:
    """Paired bootstrap (questions resampled alike in both arms) of Δ answer precision."""
    rng = np.random.default_rng(seed)
    a = np.array([[x["answered"], x["stating"]] for x in after], dtype=float)
    b = np.array([[x["answered"], x["stating"]] for x in before], dtype=float)
    diffs = []
    for _ in range(2000):
        i = rng.integers(0, len(a), len(a))
        if a[i, 0].sum() and b[i, 0].sum():
            diffs.append(a[i, 1].sum() / a[i, 0].sum() - b[i, 1].sum() / b[i, 0].sum())
    d = a[:, 1].sum() / max(1, a[:, 0].sum()) - b[:, 1].sum() / max(1, b[:, 0].sum())
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def measure(a: argparse.Namespace) -> None:
    rows, prow = load(a.quotes, a.policy)
    prows = [prow[key(r)] for r in rows]
    choice = Path(a.choice)
    new_q = QuoteModel.from_dict(json.loads((choice / "quote_model.json").read_text()))
    from sourcepage.support.policy import Policy

    new_p = Policy.from_json(json.loads((choice / "default_policy.json").read_text()))
    old_p, old_q = default_policy(), quote_model()
    assert old_q is not None
    arms = {
        "shipped": outcomes(rows, prows, old_p.classifier, old_p.t_refuse, old_q, 0),
        "refitted": outcomes(
            rows, prows, new_p.classifier, new_p.t_refuse, new_q, int(new_q.meta["xenc_units"])
        ),
    }
    table: dict[str, Any] = {}
    for split in [*sorted({r["set"] for r in rows}), "pooled"]:
        idx = [i for i, r in enumerate(rows) if split in ("pooled", r["set"])]
        before, after = ([arms[k][i] for i in idx] for k in ("shipped", "refitted"))
        lab = [i for i, x in enumerate(before) if x["labelled"]]
        d, lo, hi = paired_bootstrap_ci(
            [float(after[i]["stating"]) for i in lab], [float(before[i]["stating"]) for i in lab]
        )
        table[split] = {
            "questions": len(idx),
            "shipped": figures(before),
            "refitted": figures(after),
            "d_recall": f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]",
            "d_precision": precision_ci(before, after),
        }
        print(split, json.dumps(table[split]))
    if a.out:
        a.out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("choose", "measure"))
    ap.add_argument("--quotes", type=Path, action="append", required=True, help="fit_quotes.py rows (JSON)")
    ap.add_argument("--policy", type=Path, action="append", required=True, help="fit_policy.py rows (JSON)")
    ap.add_argument("--choice", type=Path, help="measure: the folder choose wrote the models to")
    ap.add_argument("--out", type=Path, help="choose: a folder for the models; measure: a JSON file")
    a = ap.parse_args()
    (choose if a.step == "choose" else measure)(a)


if __name__ == "__main__":
    main()
