"""Write second_pass/blind.jsonl: a seeded sample of answerable questions, each with a shuffled
candidate list of 4-6 pages (the first pass's labelled pages mixed with unlabelled pages of the
same documents) and no grades, for an independent second labeller.

    python benchmarks/construction/second_pass/make_blind.py [--corpus ../shared/corpus-construction]

Sample: ``random.Random(42).sample(sorted answerable ids, 48)``, written in id order.
Candidates per question: up to 3 labelled pages (grade 2 first, then by page id; a random
3 of them when there are more, so a labeller cannot tell labelled pages by count), plus
unlabelled pages of the labelled pages' documents with the most content words in common with
the question (ties by page id), to 5 candidates (6 when 3 are labelled). Overlap is counted
here on purpose, not with the project's retrievers: the second pass must not inherit their
rankings. The list is shuffled with the same seeded generator. Standard library + pypdfium2.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
STOP = set(
    "a an and are as at be by can do does for from has have how i if in into is it its may must of on or our"
    " should so that the their there these this to under up we what when where which who why will with"
    " you your according code guide section".split()
)


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP and len(w) > 2}


def page_words(corpus: Path, docs: set[str]) -> dict[str, set[str]]:
    import pypdfium2 as pdfium

    files = {r["doc_id"]: r["file"] for r in csv.DictReader((corpus / "manifest.csv").open(encoding="utf-8"))}
    out: dict[str, set[str]] = {}
    for doc in sorted(docs):
        pdf = pdfium.PdfDocument(str(corpus / "pdf" / files[doc]))
        try:
            for i in range(len(pdf)):
                out[f"{doc}#p{i + 1}"] = words(pdf[i].get_textpage().get_text_range())
        finally:
            pdf.close()
    return out


def page_key(pid: str) -> tuple[str, int]:
    doc, n = pid.rsplit("#p", 1)
    return doc, int(n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=BENCH.parents[1].parent / "shared" / "corpus-construction")
    ap.add_argument("--n", type=int, default=48)
    args = ap.parse_args()
    rows = [
        json.loads(ln) for ln in (BENCH / "questions.jsonl").read_text(encoding="utf-8").splitlines() if ln
    ]
    answerable = {r["id"]: r for r in rows if r["answerability"] == "answerable"}
    rng = random.Random(42)
    sample = sorted(rng.sample(sorted(answerable), args.n))
    docs = {page_key(e["page"])[0] for qid in sample for e in answerable[qid]["evidence"]}
    pages = page_words(args.corpus, docs)
    out = []
    for qid in sample:
        q = answerable[qid]
        ev = sorted(q["evidence"], key=lambda e: (-e["grade"], page_key(e["page"])))
        labelled = [e["page"] for e in ev]
        if len(labelled) > 3:
            labelled = rng.sample(labelled, 3)
        want = 6 if len(labelled) == 3 else 5
        qw = words(q["question"])
        own = {e["page"] for e in q["evidence"]}
        pool = [p for p in pages if page_key(p)[0] in {page_key(x)[0] for x in own} and p not in own]
        pool.sort(key=lambda p: (-len(qw & pages[p]), page_key(p)))
        cands = labelled + pool[: want - len(labelled)]
        rng.shuffle(cands)
        out.append({"id": qid, "question": q["question"], "candidates": [{"page": p} for p in cands]})
    dest = HERE / "blind.jsonl"
    tmp = dest.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out), encoding="utf-8")
    tmp.replace(dest)
    print(f"{dest}: {len(out)} questions, {sum(len(r['candidates']) for r in out)} candidate pages")


if __name__ == "__main__":
    main()
