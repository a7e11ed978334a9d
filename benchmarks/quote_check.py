"""Does the desk's quote check (``sourcepage.labels.quotecheck``) accept the system's own
quotes on their own pages, and refuse them on the other pages shown? The measurement
behind refusing a decision whose quoted sentence is on no accepted page (issue 49): a
check that refused a faithful quote would stop a reviewer who copied the draft, one that
accepted a quote on the wrong page would let the wrong page be published.

    PYTHONPATH=src python benchmarks/quote_check.py --store STORE --questions benchmarks/intl20/dev.jsonl

Searches each question with the defaults (no referral written, no index built), then
checks each quote against its own page and, alone, against each other page of the top five.
Prints the counts.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sourcepage import api
from sourcepage.labels import quotecheck
from sourcepage.records import parse_page_id
from sourcepage.store.db import Store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--limit", type=int, default=40, help="the first N questions")
    args = ap.parse_args()
    db = Store(args.store)
    lines = args.questions.read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line)["question"] for line in lines if line.strip()][: args.limit]
    texts: dict[str, list[str]] = {}

    def of(page: str) -> dict[str, list[str]]:
        if page not in texts:
            row = db.page(*parse_page_id(page)) or {}
            texts[page] = [str(row.get("raw") or ""), str(row.get("cleaned") or "")]
        return {page: texts[page]}

    own = own_refused = other = other_accepted = 0
    for q in questions:
        res = api.search(q, args.store, build=False, refer=False)
        pages = [r["page"] for r in res["results"][:5]]
        for quote in (res.get("answer") or {}).get("quotes") or []:
            own += 1
            if quotecheck.unsourced([quote["text"]], of(quote["page"])):
                own_refused += 1
                print(f"refused on its own page: {quote['page']}: {quote['text'][:100]}")
            for p in pages:
                if p != quote["page"]:
                    other += 1
                    other_accepted += not quotecheck.unsourced([quote["text"]], of(p))
    print(f"{len(questions)} questions, {own} quotes")
    print(f"on its own page: {own - own_refused} accepted, {own_refused} refused")
    print(f"on another of the top five pages: {other - other_accepted} refused, {other_accepted} accepted")


if __name__ == "__main__":
    main()
