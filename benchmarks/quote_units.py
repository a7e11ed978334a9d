"""What the quote selector's units of a store hold (README, "Quote units as a person reads
them").

    python benchmarks/quote_units.py STORE

Over every page of the store, the units ``text.sentences.quote_units`` makes from the text
quotes are made from (``Searcher.quote_texts``: the raw page without its document's running
headers and footers) and, for comparison, from the raw page as stored. Printed: the units of
each; those holding a running line of three words or more (a ``clean.line_key`` of the
document's ``running_lines``, digits as "#"); those with a word broken at a U+2010 hyphen
("engage‐ ment"); the pages whose units differ; and the milliseconds a fresh searcher takes
to read each document's running lines (the largest three documents).
"""

from __future__ import annotations

import argparse
import re
import time

from sourcepage.records import parse_page_id
from sourcepage.retrieval.search import Searcher
from sourcepage.text.clean import line_key
from sourcepage.text.sentences import quote_units

_BROKEN = re.compile(r"\w\u2010 [a-z]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    a = ap.parse_args()
    s = Searcher(a.store, auto_build=False)
    ids = sorted(s.store.page_ids())
    raw, quoted = s.store.raw_pages(ids), s.quote_texts(ids)
    counts = {name: {"units": 0, "running": 0, "broken": 0} for name in ("raw page", "quote text")}
    changed = 0
    for pid in ids:
        keys = [k for k in s.running_lines(parse_page_id(pid)[0]) if len(k.split()) >= 3]
        texts = {"raw page": raw[pid][0], "quote text": quoted[pid][0]}
        units = {name: [u.text for _, u in quote_units(t)] for name, t in texts.items()}
        changed += set(units["raw page"]) != set(units["quote text"])
        for name, us in units.items():
            c = counts[name]
            c["units"] += len(us)
            c["running"] += sum(any(k in line_key(u) for k in keys) for u in us)
            c["broken"] += sum(bool(_BROKEN.search(u)) for u in us)
    for name, c in counts.items():
        print(
            f"{name:10}  units {c['units']:6}  holding a running line {c['running']:5}"
            f"  with a word broken at U+2010 {c['broken']:4}"
        )
    print(f"pages whose units differ: {changed} of {len(ids)}")
    largest = sorted({parse_page_id(p)[0] for p in ids}, key=lambda d: -s.store.page_count(d))[:3]
    fresh = Searcher(a.store, auto_build=False)
    for doc in largest:
        t0 = time.perf_counter()
        fresh.running_lines(doc)
        ms = (time.perf_counter() - t0) * 1000
        print(f"running lines of {doc} ({s.store.page_count(doc)} pages): {ms:.1f} ms")


if __name__ == "__main__":
    main()
