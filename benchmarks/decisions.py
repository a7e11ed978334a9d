"""What a user sees: the whole search (ranking, answer policy, jurisdiction rules, answer
check, quote rule) over a question set, tallied per answerability class.

    python benchmarks/decisions.py --store STORE --questions benchmarks/intl20/dev.jsonl \
        [--method METHOD] [--out decisions.json] [--by phase]

For every question ``sourcepage.api.search`` runs as the CLI and the web page run it (the
store's calibrated policy, else the shipped default): the one search pipeline
(``sourcepage.pipeline``), which ``sourcepage eval`` also runs, so its per_question.jsonl
rows (decision, P(supported), quote ids, pages) equal these rows' for the same store and
method. Printed and written: the share of
answer / review / refuse per class, the AUROC of P(supported) (answerable against
unsupported, and against out-of-domain), the answer points covered by the quotes, and the
ids of unsupported questions answered and answerable ones refused, and what a person is
told (``evaluation.answers.answer_metrics``: answer rate, answer precision and recall
against the labelled excerpts, quote match, point coverage, bootstrap CIs, the
risk–coverage curve). ``--by phase`` (or ``work_package``, ``project_type``: a construction
question set's fields) adds the shares per group (a question counts in each group it
lists). Use the dev split for choices; run the test split once.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from sourcepage import api
from sourcepage.evaluation.answers import answer_metrics, quote_matches
from sourcepage.evaluation.by_field import question_fields
from sourcepage.evaluation.metrics import auroc
from sourcepage.evaluation.questions import read_questions
from sourcepage.pipeline import outline
from sourcepage.store.files import write_json
from sourcepage.support.check import point_covered

CLASSES = ("answerable", "unsupported", "out_of_domain")


def measure(store: Path, questions: Path, method: str | None, k: int = 10) -> dict:
    qs = read_questions(questions)
    rows = []
    t0 = time.perf_counter()
    for i, q in enumerate(qs, 1):
        r = api.search(q.question, store, method=method, k=k, refer=False)
        sup = r["support"] or {}
        seen = outline(r)
        texts = [x["text"] for x in r.get("answer", {}).get("quotes", [])]
        quotes = " ".join(texts)
        answerable = q.answerability == "answerable"
        points = [int(point_covered(p, quotes)) for p in q.answer_points] if answerable else []
        matches = quote_matches(texts, q) if answerable and q.excerpts else []
        best = max((x["score"] for x in r.get("answer", {}).get("quotes", [])), default=0.0)
        sides = r["routing"].get("groups", []) if r["routing"]["compares"] else []
        quoted = {x.get("jurisdiction") for x in r.get("answer", {}).get("quotes", [])}
        rows.append(
            {
                "id": q.id,
                "class": q.answerability,
                "decision": r["decision"],
                "probability": sup.get("probability"),
                "confidence": (sup.get("probability") or 0.0) * best,
                "origin": sup.get("origin"),
                "points": points,
                "stating": any(matches) if answerable and q.excerpts else None,
                "matches": matches,
                "quotes": texts,
                "quote_ids": seen["quote_ids"],
                "pages": seen["pages"],  # what eval's per_question.jsonl carries (pipeline.outline)
                "decide_ms": r["timings_ms"]["decide"],
                "query_ms": r.get("query_ms"),
                "reasons": r["reasons"],
                "type": q.type,
                # a question comparing jurisdictions: the share of its sides some quote is from
                "sides_quoted": sum(bool(quoted & set(g)) for g in sides) / len(sides) if sides else None,
                **question_fields(q),
            }
        )
        took = time.perf_counter() - t0
        print(f"{i}/{len(qs)} {q.id} {r['decision']} {took:.0f}s", file=sys.stderr, flush=True)
    shares = tally(rows)
    pos = [r["probability"] for r in rows if r["class"] == "answerable" and r["probability"] is not None]

    def vs(c: str) -> float | None:
        neg = [r["probability"] for r in rows if r["class"] == c and r["probability"] is not None]
        return round(auroc(pos, neg), 3) if pos and neg else None

    covered = [sum(r["points"]) / len(r["points"]) for r in rows if r["points"]]
    return {
        "store": str(store),
        "questions": str(questions),
        "method": method or "default",
        "decisions": shares,
        "auroc_near": vs("unsupported"),
        "auroc_ood": vs("out_of_domain"),
        "answer_points_covered": round(sum(covered) / len(covered), 3) if covered else None,
        "unsupported_answered": [
            r["id"] for r in rows if r["class"] != "answerable" and r["decision"] == "answer"
        ],
        "answerable_refused": [
            r["id"] for r in rows if r["class"] == "answerable" and r["decision"] == "refuse"
        ],
        "answers": answer_metrics(rows),
        "comparisons": compared(rows),
        "decide_ms_median": float(sorted(r["decide_ms"] for r in rows)[len(rows) // 2]),
        "rows": rows,
    }


def compared(rows: list[dict]) -> dict:
    """Over the answerable questions that compare jurisdictions (they go to a reviewer):
    how many, the mean share of their sides that some quote is from, the share whose
    quotes hold a labelled excerpt, and the answer points the quotes cover."""
    cs = [r for r in rows if r["class"] == "answerable" and r["sides_quoted"] is not None]
    n = len(cs) or 1
    return {
        "n": len(cs),
        "sides_quoted": round(sum(r["sides_quoted"] for r in cs) / n, 3),
        "all_sides_quoted": round(sum(r["sides_quoted"] == 1 for r in cs) / n, 3),
        "stating": round(sum(bool(r["stating"]) for r in cs) / n, 3),
        "points": round(sum(sum(r["points"]) / len(r["points"]) for r in cs if r["points"]) / n, 3),
    }


def tally(rows: list[dict]) -> dict:
    """class → share of answer / review / refuse, and n."""
    shares = {}
    for c in CLASSES:
        got = Counter(r["decision"] for r in rows if r["class"] == c)
        n = sum(got.values())
        shares[c] = {d: round(got[d] / n, 3) if n else None for d in ("answer", "review", "refuse")}
        shares[c]["n"] = n
    return shares


def by_group(rows: list[dict], field: str) -> dict:
    """group of ``field`` → the tally of its questions (a question in each group it lists)."""
    groups = sorted({g for r in rows for g in r.get(field, [])})
    return {g: tally([r for r in rows if g in r.get(field, [])]) for g in groups}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--method", default=None, help="default: the search default")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--by", action="append", default=[], help="phase, work_package or project_type")
    a = ap.parse_args()
    res = measure(a.store, a.questions, a.method)
    for field in a.by:
        res[f"by_{field}"] = by_group(res["rows"], field)
    if a.out:
        write_json(a.out, res)
    short = {k: v for k, v in res.items() if k != "rows"}
    short["answers"] = {k: v for k, v in res["answers"].items() if k != "risk_coverage"}
    print(json.dumps(short, indent=1))


if __name__ == "__main__":
    main()
