"""Rebuild questions.jsonl from the topic files in this folder (the first pass's source).

    python benchmarks/construction/authoring/build.py [--corpus ../shared/corpus-construction] [--out FILE]

Each ``t_*.py`` holds a list ``QS`` of questions written by reading the pages. Evidence is
``(page, grade, excerpt)`` with a short document alias for the page id (table ``A``); an
excerpt written ``start ... end`` is resolved to the verbatim span of the page text from
``start`` to the first ``end`` after it, so long excerpts are copied, not retyped. Page text
is PDFium's ``get_text_range`` (the raw text version) with whitespace collapsed; an excerpt
that does not occur on its page stops the build. For unsupported questions the absence
check is computed here: each term, a case-insensitive regular expression, is run over all
1,114 pages and the matching pages are recorded; a term that matches anywhere needs a
``note`` saying what those pages say. Writes atomically (temp file + rename).
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import re
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
A = dict(
    ex="us-osha2226-trenching-excavation", cdm="uk-hse-l153-cdm2015", hsg="uk-hse-hsg150-construction",
    dem="au-cth-demolition-work-cop", nfw="au-nsw-formwork-cop", coo="au-nsw-consultation-coordination-cop",
    sws="au-swa-swing-stage-scaffolds-guide", pre="au-ascc-precast-tiltup-cop",
    pro="au-nsw-whs-mgmt-guidelines-construction", sdo="au-cth-safe-design-structures-cop", ewp="au-swa-ewp-cop",
    acw="au-swa-construction-work-cop", fp="osha3146-fall-protection-construction", afl="au-swa-falls-cop",
    sc="osha3150-scaffold-use", ncw="au-nsw-construction-work-cop", qfw="au-qld-formwork-cop",
    sw1="au-swa-swms-info-sheet", sw2="au-wa-swms-info-sheet",
)

#: question topic (the issue's list) -> the nearest topic slug of the corpus manifest, kept in
#: the extra field ``manifest_topic`` for readers that join questions to manifest topics
MANIFEST_TOPIC = {
    "fall_protection": "fall_protection", "scaffolding": "scaffolding", "formwork": "temporary_works",
    "temporary_works": "temporary_works", "excavation": "excavation", "lifting": "cranes_lifting",
    "precast_tiltup": "cranes_lifting", "plant_movement": "construction", "electrical": "construction",
    "contractor_coordination": "contractor_coordination", "demolition": "demolition", "swms": "construction",
    "design": "construction", "procedures": "construction", "none": "none",
}


def collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def load_pages(corpus: Path) -> tuple[dict[str, str], dict[str, str]]:
    """page id -> collapsed text for every page, and doc id -> jurisdiction."""
    import pypdfium2 as pdfium

    pages: dict[str, str] = {}
    jur: dict[str, str] = {}
    for r in csv.DictReader((corpus / "manifest.csv").open(encoding="utf-8")):
        jur[r["doc_id"]] = r["jurisdiction"]
        pdf = pdfium.PdfDocument(str(corpus / "pdf" / r["file"]))
        try:
            for i in range(len(pdf)):
                pages[f"{r['doc_id']}#p{i + 1}"] = collapse(pdf[i].get_textpage().get_text_range())
        finally:
            pdf.close()
    return pages, jur


def resolve(pages: dict[str, str], pid: str, excerpt: str) -> str:
    text = pages[pid]
    if " ... " in excerpt:
        start, end = excerpt.split(" ... ", 1)
        i = text.find(start)
        j = text.find(end, i + len(start)) if i >= 0 else -1
        if i < 0 or j < 0:
            sys.exit(f"{pid}: excerpt span not found: {excerpt!r}")
        return text[i : j + len(end)]
    if excerpt not in text:
        sys.exit(f"{pid}: excerpt not found: {excerpt!r}")
    return excerpt


def absence(pages: dict[str, str], qid: str, spec: dict) -> dict:
    hits = {t: sorted(p for p, txt in pages.items() if re.search(t, txt, re.I)) for t in spec["terms"]}
    out = {
        "method": "case-insensitive regex over the whitespace-collapsed text of all 1,114 pages "
        "of the 19 documents (pypdfium2)",
        "terms": spec["terms"],
        "pages_matching": {t: len(v) for t, v in hits.items()},
    }
    matched = sorted({p for v in hits.values() for p in v})
    if matched:
        if "note" not in spec:
            sys.exit(f"{qid}: terms match {matched[:8]} but the question has no note")
        out["matching_pages"] = matched[:20]
        out["note"] = spec["note"] + " (pages read; none answers the question)"
    return out


def row(q: dict, pages: dict[str, str], jur: dict[str, str]) -> dict:
    ans = q.get("answerability", "answerable")
    out = {"id": q["id"], "question": q["q"], "topic": q["topic"], "type": q.get("type", "direct"), "answerability": ans}
    if ans == "answerable":
        evidence: list[dict] = []
        for page, grade, excerpt in q["ev"]:
            doc, n = page.split("#")
            pid = f"{A.get(doc, doc)}#p{n.lstrip('p')}"
            if any(e["page"] == pid for e in evidence):
                sys.exit(f"{q['id']}: page {pid} listed twice")
            evidence.append({"page": pid, "grade": grade, "excerpt": resolve(pages, pid, excerpt)})
        out |= {"reference_answer": q["a"], "answer_points": q["pts"], "evidence": evidence}
        where = q.get("jur") or sorted({jur[e["page"].split("#")[0]] for e in evidence})
    else:
        where = q.get("jur", "any")
        if ans == "unsupported":
            out["absence_check"] = absence(pages, q["id"], q["absence"])
    out["manifest_topic"] = MANIFEST_TOPIC[q["topic"]]
    out |= {"phase": q["phase"], "work_package": q["wp"], "project_type": q.get("ptype", "any")}
    out["jurisdiction"] = where if isinstance(where, str) else ";".join(where)
    for src, dst in (("names", "names_jurisdiction"), ("notes", "notes")):
        if src in q:
            out[dst] = q[src]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=HERE.parents[2].parent / "shared" / "corpus-construction")
    ap.add_argument("--out", type=Path, default=HERE.parent / "questions.jsonl")
    args = ap.parse_args()
    pages, jur = load_pages(args.corpus)
    sys.path.insert(0, str(HERE))
    rows, seen = [], set()
    for path in sorted(HERE.glob("t_*.py")):
        for q in importlib.import_module(path.stem).QS:
            if q["id"] in seen:
                sys.exit(f"{path.name}: duplicate id {q['id']}")
            seen.add(q["id"])
            rows.append(row(q, pages, jur))
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(args.out)
    print(f"{args.out}: {len(rows)} questions", dict(Counter(r["answerability"] for r in rows)))


if __name__ == "__main__":
    main()
