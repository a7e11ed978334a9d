"""Complete the pool's labels: pool pages from several methods, record judgments, measure
agreement, and write the final question sets.

    python benchmarks/pool/judging.py pool   --pool intl --store STORE [--depth 5]
    python benchmarks/pool/judging.py finish --pool intl

``pool`` runs each method of ``METHODS`` over every question of ``<pool>/questions.jsonl``
(answerable and unsupported: a pooled page that answers an "unsupported" question is a
labelling error to find) and writes ``<pool>/pooled.tsv``: question id, page, best rank,
the methods that ranked it, and the author's grade where the page is already evidence.
Pages are ordered by best rank, then page id, so the pool is deterministic.

Judges write ``<pool>/judgments/<reviewer>.tsv`` (question id, page, grade 0/1/2, excerpt,
note; tab-separated, a header line). The first pass (``first-*`` reviewers) grades every
pooled page the author did not label; the second pass (``second``) grades every pooled page
of a seeded 15% sample of the questions, the author's evidence pages included, without
seeing the labels; adjudications (``adjudicator:*`` rows) settle the disagreements.

``finish`` replays every judgment into a label log (``labels.judgments``: append-only, the
same log ``sourcepage judge`` writes), prints Cohen's kappa between ``second`` and the first
pass (the author's grade for evidence pages, 0 for a pooled page the author left out and the
first pass graded 0), lists the unresolved disagreements, and rewrites ``questions.jsonl``
and the three splits with the final evidence (the author's pages, every pooled page whose
final grade is 1 or 2 with its judge's excerpt; an adjudicated 0 removes a page).
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
METHODS = ("bm25", "lsa", "dense", "sect:route:rrf:bm25+dense")
SECOND = "second"
SAMPLE_SHARE = 0.15
FIELDS = ("question_id", "page", "grade", "excerpt", "note")


def _questions(pool: str) -> list[dict]:
    """The pool's questions as their authors wrote them (``labels/L*.jsonl``, by id), so
    that ``finish`` always starts from the authors' labels and can be run again."""
    rows = []
    for f in sorted((HERE / "labels").glob("L*.jsonl")):
        if not f.name.endswith("-skipped.jsonl"):
            rows += [json.loads(ln) for ln in f.read_text(encoding="utf-8").splitlines() if ln.strip()]
    return sorted((q for q in rows if q["pool"] == pool), key=lambda q: q["id"])


def _page_key(page: str) -> tuple[str, int]:
    doc, _, n = page.rpartition("#p")
    return doc, int(n)


def pool_pages(pool: str, store: Path, depth: int) -> Path:
    """Write ``<pool>/pooled.tsv`` from the methods' top-``depth`` pages."""
    from sourcepage import api

    searcher = api.searcher(store, build=False)
    rows = []
    for q in _questions(pool):
        if q["answerability"] == "out_of_domain":
            continue
        best: dict[str, int] = {}
        by: dict[str, list[str]] = {}
        for m in METHODS:
            for hit in searcher.rank(q["question"], m, k=depth).hits:
                best[hit.page_id] = min(best.get(hit.page_id, hit.rank), hit.rank)
                by.setdefault(hit.page_id, []).append(m)
        author = {e["page"]: e["grade"] for e in q.get("evidence", [])}
        for p in sorted(best, key=lambda p: (best[p], _page_key(p))):
            rows.append([q["id"], p, best[p], "+".join(by[p]), author.get(p, "")])
    out = HERE / pool / "pooled.tsv"
    tmp = out.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["question_id", "page", "best_rank", "methods", "author_grade"])
        w.writerows(rows)
    tmp.replace(out)
    return out


def second_sample(pool: str) -> list[str]:
    """The seeded sample of question ids (15%, answerable and unsupported) of the second pass."""
    ids = sorted(q["id"] for q in _questions(pool) if q["answerability"] != "out_of_domain")
    rng = random.Random(f"second-pass-{pool}-42")
    return sorted(rng.sample(ids, max(1, round(SAMPLE_SHARE * len(ids) + 0.5))))


def _judgments(pool: str) -> list[dict]:
    rows = []
    for f in sorted((HERE / pool / "judgments").glob("*.tsv")):
        # adjudicator-<name>.tsv holds the adjudications of <name> (labels.judgments.ADJUDICATOR)
        name = f.stem
        adj = name.startswith("adjudicator-")
        reviewer = "adjudicator:" + name.removeprefix("adjudicator-") if adj else name
        with f.open(encoding="utf-8", newline="") as fh:
            for i, r in enumerate(csv.DictReader(fh, delimiter="\t"), 2):
                if set(FIELDS) - set(r):
                    sys.exit(f"{f}:{i}: needs the columns {', '.join(FIELDS)}")
                if r["grade"] not in ("0", "1", "2"):
                    sys.exit(f"{f}:{i}: grade {r['grade']!r} is not 0, 1 or 2")
                rows.append({**r, "grade": int(r["grade"]), "reviewer": r.get("reviewer") or reviewer})
    return rows


def _replay(pool: str, db, rows: list[dict]) -> dict[tuple[str, str], str]:  # noqa: ANN001 (a LabelLog)
    """Record the first pass (author + first-* judges, as ``first``), the second pass and
    the adjudications in ``db``; returns the excerpt of every pair a judge found relevant."""
    from sourcepage.labels.judgments import adjudicate, record

    qs = {q["id"]: q for q in _questions(pool)}
    excerpts: dict[tuple[str, str], str] = {}
    first: dict[tuple[str, str], int] = {}
    for q in qs.values():
        for e in q.get("evidence", []):
            first[(q["id"], e["page"])] = e["grade"]
            excerpts[(q["id"], e["page"])] = e["excerpt"]
    for r in rows:
        key = (r["question_id"], r["page"])
        if r["question_id"] not in qs:
            sys.exit(f"judgment of an unknown question {r['question_id']} by {r['reviewer']}")
        if r["grade"] >= 1 and r["excerpt"].strip() and key not in excerpts:
            excerpts[key] = r["excerpt"].strip()
        if r["reviewer"].startswith("first") and key not in first:
            first[key] = r["grade"]
    for (qid, page), g in sorted(first.items()):
        record(db, qid, page, g, "first")
    for r in rows:
        if r["reviewer"] == SECOND:
            record(db, r["question_id"], r["page"], r["grade"], SECOND, r["note"])
        elif r["reviewer"].startswith("adjudicator:"):
            adjudicate(db, r["question_id"], r["page"], r["grade"], r["reviewer"].split(":", 1)[1], r["note"])
    return excerpts


def frozen_split(pool: str, qs: list[dict]) -> dict[str, str]:
    """Each question's split as ``build.py`` first drew it (``<pool>/splits.json``, written
    once): an adjudicated change of class must not move a question between splits."""
    from build import split

    path = HERE / pool / "splits.json"
    if not path.exists():
        path.write_text(json.dumps(split(qs, 42), indent=0, sort_keys=True) + "\n", encoding="utf-8")
    which = json.loads(path.read_text(encoding="utf-8"))
    missing = sorted({q["id"] for q in qs} - set(which))
    if missing:
        sys.exit(f"{pool}: questions without a split: {missing[:5]}")
    return which


def _reclass(q: dict, rows: list[dict]) -> None:
    """An adjudicator's ``class=answerable`` / ``class=unsupported`` note changes a question's class."""
    for r in rows:
        if r["question_id"] == q["id"] and r["reviewer"].startswith("adjudicator:"):
            for cls in ("answerable", "unsupported"):
                if f"class={cls}" in r["note"] and q["answerability"] != cls:
                    q["answerability"] = cls
                    q.setdefault("notes", "")
                    q["notes"] = (q["notes"] + f" [adjudicated: {cls}: {r['note']}]").strip()


def finish(pool: str) -> None:
    from build import _write

    from sourcepage.labels.judgments import cohens_kappa, connect, disagreements, final_grades

    with tempfile.TemporaryDirectory() as tmp:
        db = connect(Path(tmp) / "labels.sqlite")
        rows = _judgments(pool)  # read once: the replay, the adjudications, the reclassing
        excerpts = _replay(pool, db, rows)
        kappa = cohens_kappa(db, "first", SECOND)
        adj = [r for r in rows if r["reviewer"].startswith("adjudicator:")]
        settled = {(r["question_id"], r["page"]) for r in adj}
        open_pairs = [
            d for d in disagreements(db, "first", SECOND) if (d["question_id"], d["page"]) not in settled
        ]
        final, _ = final_grades(db, reviewer="first")
    print(json.dumps({"pool": pool, "kappa": kappa}, default=str, indent=1))
    qs = _questions(pool)
    which = frozen_split(pool, qs)
    flagged = []
    for q in qs:
        _reclass(q, rows)
        grades = {p: g for (qid, p), g in final.items() if qid == q["id"]}
        if q["answerability"] != "answerable":
            q["evidence"] = []
            hits = sorted(p for p, g in grades.items() if g >= 1)
            if hits:
                flagged.append(f"{q['id']} ({q['answerability']}): pages judged relevant {hits}")
            continue
        pages = sorted((p for p, g in grades.items() if g >= 1), key=lambda p: (-grades[p], _page_key(p)))
        q["evidence"] = [
            {"page": p, "grade": grades[p], "excerpt": excerpts.get((q["id"], p), "")} for p in pages
        ]
    for line in flagged:
        print("check:", line)
    print(f"{len(open_pairs)} disagreements between first and second not adjudicated")
    for d in open_pairs:
        print("  ", d["question_id"], d["page"], "first", d["first"], "second", d[SECOND])
    _write(HERE / pool / "questions.jsonl", qs)
    for name in ("train", "dev", "test"):
        sha = _write(HERE / pool / f"{name}.jsonl", [q for q in qs if which[q["id"]] == name])
        print(f"{pool}/{name}.jsonl {sha}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("verb", choices=("pool", "sample", "finish"))
    ap.add_argument("--pool", required=True, choices=("intl", "construction", "extra"))
    ap.add_argument("--store", type=Path)
    ap.add_argument("--depth", type=int, default=5)
    args = ap.parse_args()
    if args.verb == "pool":
        if args.store is None:
            sys.exit("pool needs --store")
        print(pool_pages(args.pool, args.store, args.depth))
    elif args.verb == "sample":
        print("\n".join(second_sample(args.pool)))
    else:
        finish(args.pool)


if __name__ == "__main__":
    main()
