"""The README's headline table, measured through the whole search a person receives.

    python benchmarks/headline.py --stores /work/stores [--split dev] [--reason "..."] \
        [--out docs/headline.json]

For each benchmark set below, its split is run question by question through
``sourcepage.api.search`` (the one pipeline: ranking, decision, quotes; the store's policy,
else the shipped default; the default method) on the store ``<stores>/<store>``, and the
table reports what a user gets: page Hit@1 and MRR over the first 20 pages and Recall@10
(answerable questions, 95% bootstrap intervals), answer precision and recall (an answer
counts when a quote holds ≥ 60% of a labelled excerpt's content words:
``evaluation.answers``), unsupported questions answered, out-of-domain refused, and the warm
search's median time. One-shot time: ``sourcepage search`` as a new process, the median of
three. Reading a test split (``--split test``) needs ``--reason`` and appends to
``benchmarks/test_reads.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from decisions import measure  # noqa: E402
from readlog import log_read  # noqa: E402

from sourcepage.evaluation.metrics import hit_at, recall_at, reciprocal_rank  # noqa: E402
from sourcepage.evaluation.questions import read_questions  # noqa: E402
from sourcepage.evaluation.stats import bootstrap_ci  # noqa: E402

#: (name, question folder, store name under --stores)
SETS = (
    ("pool intl", "pool/intl", "intl"),
    ("pool construction", "pool/construction", "construction"),
    ("pool extra", "pool/extra", "extra"),
    ("osha6", "osha6", "osha6"),
    ("intl20", "intl20", "intl"),
    ("construction", "construction", "construction"),
)


def _ci(values: list[float]) -> str:
    m, lo, hi = bootstrap_ci(values, 2000)
    return f"{m:.3f} [{lo:.2f}, {hi:.2f}]"


def one_set(store: Path, questions: Path) -> dict:
    """Ranking and answer figures of one split on one store."""
    res = measure(store, questions, None, k=20)
    qs = {q.id: q for q in read_questions(questions)}
    ans = [r for r in res["rows"] if r["class"] == "answerable"]
    judged = {r["id"]: qs[r["id"]].evidence for r in ans}
    hit1 = [hit_at(r["pages"], judged[r["id"]], 1) for r in ans]
    rr = [reciprocal_rank(r["pages"], judged[r["id"]]) for r in ans]
    r10 = [recall_at(r["pages"], judged[r["id"]], 10) for r in ans]
    a = res["answers"]
    return {
        "questions": len(res["rows"]),
        "answerable": len(ans),
        "hit@1": _ci(hit1),
        "mrr": _ci(rr),
        "recall@10": round(statistics.fmean(r10), 3),
        "answer_precision": a["answer_precision"],
        "answer_recall": a["answer_recall"],
        "unsupported_answered": a["unsupported_answered"],
        "ood_refused": a["ood_refused"],
        "warm_ms_p50": round(statistics.median(r["query_ms"] for r in res["rows"]), 1),
        "per_question": {r["id"]: {"hit@1": h, "rr": x} for r, h, x in zip(ans, hit1, rr, strict=True)},
    }


def one_shot(store: Path, question: str, runs: int = 3) -> float:
    """Median wall time (s) of ``sourcepage search`` as a new process."""
    exe = Path(sys.executable).with_name("sourcepage")
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([str(exe), "search", question, "--store", str(store)], check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times), 2)


def _pct(x: dict) -> str:
    return f"{x['value']:.2f}" if x.get("n") else "–"


def table(results: dict, split: str) -> str:
    head = (
        f"| set ({split}) | questions (answerable) | page Hit@1 | MRR | R@10 | answer precision | "
        "answer recall | negatives answered | out-of-domain refused | warm search p50 |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = [
        f"| {name} | {r['questions']} ({r['answerable']}) | {r['hit@1']} | {r['mrr']} | {r['recall@10']} | "
        f"{_pct(r['answer_precision'])} | {_pct(r['answer_recall'])} | {_pct(r['unsupported_answered'])} | "
        f"{_pct(r['ood_refused'])} | {r['warm_ms_p50']:.0f} ms |"
        for name, r in results.items()
    ]
    return head + "\n".join(rows) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", type=Path, required=True)
    ap.add_argument("--split", default="dev", choices=("dev", "test"))
    ap.add_argument("--reason", default="")
    ap.add_argument("--only", default="", help="comma-separated set names (default: all)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.split == "test" and not a.reason.strip():
        sys.exit("reading a test split needs --reason (it is logged in benchmarks/test_reads.jsonl)")
    only = {s.strip() for s in a.only.split(",") if s.strip()}
    results: dict[str, dict] = {}
    for name, folder, store in SETS:
        if only and name not in only:
            continue
        questions = HERE / folder / f"{a.split}.jsonl"
        if not (a.stores / store).is_dir():
            print(f"{name}: no store {a.stores / store}, left out", file=sys.stderr)
            continue
        if a.split == "test":
            log_read(questions, a.reason)
        results[name] = one_set(a.stores / store, questions)
    question = "Who may remove a lockout device?"
    shots = {s: one_shot(a.stores / s, question) for s in ("intl",) if (a.stores / s).is_dir()}
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    out = {"date": date, "split": a.split, "sets": results, "one_shot_s": shots}
    if a.out:
        tmp = a.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(out, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(a.out)
    print(table(results, a.split))
    print("one-shot `sourcepage search` (median of 3):", ", ".join(f"{k} {v} s" for k, v in shots.items()))


if __name__ == "__main__":
    main()
