"""Check a pool question file line by line: fields, classes, page ids, verbatim excerpts.

    python benchmarks/pool/validate.py benchmarks/pool/labels/L1.jsonl [...] [--pages /tmp/pool-text]

Every problem is printed as ``file:line: id: what``; the exit code is 1 when any was
found. Excerpts are compared with the page text after collapsing whitespace (line breaks
in a PDF's text become single spaces); ``--pages`` is the folder ``pages.py`` writes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

CLASSES = {"answerable", "unsupported", "out_of_domain"}
TYPES = {"direct", "procedural", "scenario", "comparison"}
KINDS = {"direct", "paraphrase", "exception", "numeric", "role", "procedure", "cross_reference", "comparison"}
POOL_CORPUS = {"intl": "corpus-intl", "construction": "corpus-construction", "extra": "corpus-extra"}
ID = re.compile(r"^[A-Za-z0-9_.-]+$")
PAGE = re.compile(r"^([a-z0-9][a-z0-9_-]*)#p([1-9][0-9]*)$")


def _norm(s: str) -> str:
    return " ".join(s.split())


def check_line(q: dict, pages: Path, cache: dict[str, str | None]) -> list[str]:
    """The problems of one question (empty when it is valid)."""
    errs: list[str] = []
    for k in ("id", "question", "answerability", "topic", "type", "kind", "pool"):
        if not isinstance(q.get(k), str) or not q.get(k):
            errs.append(f"field '{k}' missing or empty")
    if errs:
        return errs
    if not ID.match(q["id"]):
        errs.append("id must match [A-Za-z0-9_.-]+")
    if q["answerability"] not in CLASSES:
        errs.append(f"answerability '{q['answerability']}' not one of {sorted(CLASSES)}")
    if q["type"] not in TYPES:
        errs.append(f"type '{q['type']}' not one of {sorted(TYPES)}")
    if q["kind"] not in KINDS:
        errs.append(f"kind '{q['kind']}' not one of {sorted(KINDS)}")
    corpus = POOL_CORPUS.get(q["pool"])
    if corpus is None:
        return [*errs, f"pool '{q['pool']}' unknown"]
    ev = q.get("evidence", [])
    if q["answerability"] != "answerable":
        if ev:
            errs.append("evidence given for a question that is not answerable")
        if q["answerability"] == "unsupported" and not (q.get("absence_check") or {}).get("terms"):
            errs.append("unsupported without absence_check.terms")
        return errs
    if not ev:
        return [*errs, "answerable without evidence"]
    if not q.get("answer_points") or not q.get("reference_answer"):
        errs.append("answerable without reference_answer or answer_points")
    if q.get("source_page") and q["source_page"] not in {e.get("page") for e in ev}:
        errs.append(f"source_page {q['source_page']} is not among the evidence pages")
    for e in ev:
        m = PAGE.match(str(e.get("page", "")))
        if not m:
            errs.append(f"evidence page '{e.get('page')}' is not a page id doc#pN")
            continue
        if e.get("grade") not in (1, 2):
            errs.append(f"{e['page']}: grade must be 1 or 2")
        key = f"{corpus}/{m[1]}/p{m[2]}"
        if key not in cache:
            f = pages / corpus / m[1] / f"p{m[2]}.txt"
            cache[key] = _norm(f.read_text(encoding="utf-8")) if f.exists() else None
        text = cache[key]
        if text is None:
            errs.append(f"{e['page']}: no such page in {corpus}")
        elif not e.get("excerpt") or _norm(e["excerpt"]) not in text:
            errs.append(f"{e['page']}: excerpt is not verbatim on the page")
    return errs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--pages", type=Path, default=Path("/tmp/pool-text"))
    args = ap.parse_args()
    cache: dict[str, str | None] = {}
    seen: dict[str, str] = {}
    bad = n = 0
    for path in args.files:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or line.startswith("//"):
                continue
            n += 1
            where = f"{path}:{i}"
            try:
                q = json.loads(line)
            except json.JSONDecodeError as e:
                print(f"{where}: not JSON ({e.msg} at column {e.colno})")
                bad += 1
                continue
            errs = check_line(q, args.pages, cache) if isinstance(q, dict) else ["not a JSON object"]
            if isinstance(q, dict) and q.get("id") in seen:
                errs.append(f"duplicate id (first at {seen[q['id']]})")
            if isinstance(q, dict) and isinstance(q.get("id"), str):
                seen.setdefault(q["id"], where)
            for err in errs:
                print(f"{where}: {q.get('id', '?') if isinstance(q, dict) else '?'}: {err}")
            bad += bool(errs)
    print(f"{n} questions, {bad} with problems", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
