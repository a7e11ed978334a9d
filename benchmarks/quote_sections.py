"""How often a quote's section is found and differs from its page's main section (README,
"Each quote names its section").

    python benchmarks/quote_sections.py STORE QUESTIONS.jsonl

Runs the whole search (``sourcepage.api``) for every question and counts, over the quotes it
shows: those on pages that hold several heading paths, how many of their first chosen
sentences ``text.sentences.locate`` finds in the page's raw text, and how many quotes name a
section other than the page's main one.
"""

from __future__ import annotations

import argparse

from sourcepage import api
from sourcepage.evaluation.questions import read_questions
from sourcepage.records import parse_page_id
from sourcepage.text.sentences import locate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("questions")
    a = ap.parse_args()
    svc = api.service(a.store, build=False)
    s = svc.searcher
    n = multi = found = differ = 0
    for q in read_questions(a.questions):
        res = svc.respond(q.question, k=10, answer=True, log=False)
        for quote in (res.get("answer") or {}).get("quotes", []):
            n += 1
            differ += quote["section"] != s.page_section(quote["page"])[0]
            if len(s.page_sections(quote["page"])) > 1:
                multi += 1
                row = s.store.page(*parse_page_id(quote["page"]))
                found += locate(row["raw"] if row else "", quote["sentences"][0]) >= 0
    print(f"{a.questions}: {n} quotes, {multi} on pages of several sections, {found} of them found;")
    print(f"{differ} quotes name a section other than their page's main one")


if __name__ == "__main__":
    main()
